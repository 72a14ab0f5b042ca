// HTTP for the weights downloader and the MSA server client (libcurl): HEAD without following
// redirects, GET of a small body, POST of a form, and GET of a file with resume (Range) and a
// byte callback for progress.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bioinfer::runtime {

struct HttpResponse {
    long status = 0;
    std::map<std::string, std::string> headers;  // names lower-cased; the last response's
    std::string body;
    std::string header(const std::string& name) const;
};

struct HttpRequest {
    std::string url;
    std::vector<std::string> headers;  // "Authorization: Bearer ..."
    bool follow_redirects = true;
    long connect_timeout_s = 20;
    // A transfer slower than 1 KB/s for this long is given up (and resumed by the caller).
    long stall_timeout_s = 60;
    long timeout_s = 0;       // the whole request, when > 0
    std::string basic_auth;   // "user:password": HTTP basic authentication
};

// Adds one received header line ("Name: value", CRLF or not) to `r`: names lower-cased, values
// trimmed, the last of a repeated name kept; a status line ("HTTP/...", a new response after a
// redirect) starts the headers over; anything else is ignored.
void add_header_line(HttpResponse& r, std::string_view line);

// HEAD request. Throws on transport errors (no connection, timeout), not on HTTP status.
HttpResponse http_head(const HttpRequest& req);
// GET into memory (API responses, small files).
HttpResponse http_get(const HttpRequest& req);

// POST of `fields` as application/x-www-form-urlencoded (values escaped), the answer in memory.
HttpResponse http_post_form(const HttpRequest& req,
                            const std::vector<std::pair<std::string, std::string>>& fields);

// GET appended to `path`, asking for bytes from `offset` on (Range) when offset > 0. Returns the
// response (status 200: the server sent the whole file, and `path` was truncated first; 206: the
// rest was appended). `on_bytes(n)` is called as data arrives. Throws on transport errors,
// leaving what arrived in `path` so that a later call can resume.
HttpResponse http_download(const HttpRequest& req, const std::string& path, int64_t offset,
                           const std::function<void(int64_t)>& on_bytes);

}  // namespace bioinfer::runtime
