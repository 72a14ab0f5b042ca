// libcurl easy interface; one global init. Errors name the URL.
#include "runtime/http.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>
#include <mutex>

#include "bioinfer/error.h"

namespace bioinfer::runtime {

std::string HttpResponse::header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
}

void add_header_line(HttpResponse& r, std::string_view line) {
    if (line.rfind("HTTP/", 0) == 0) {  // a new response (after a redirect): start over
        r.headers.clear();
        return;
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return;
    std::string key(line.substr(0, colon));
    std::string_view val = line.substr(colon + 1);
    std::transform(key.begin(), key.end(), key.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    while (!val.empty() && std::isspace((unsigned char)val.front())) val.remove_prefix(1);
    while (!val.empty() && std::isspace((unsigned char)val.back())) val.remove_suffix(1);
    r.headers[key] = std::string(val);
}

namespace {

void global_init() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
    add_header_line(*static_cast<HttpResponse*>(user), std::string_view(data, size * n));
    return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
    static_cast<HttpResponse*>(user)->body.append(data, size * n);
    return size * n;
}

struct FileSink {
    FILE* f = nullptr;
    HttpResponse* resp = nullptr;
    CURL* curl = nullptr;
    bool checked = false, truncate_on_200 = false, failed_write = false;
    const std::function<void(int64_t)>* on_bytes = nullptr;
};

size_t on_file(char* data, size_t size, size_t n, void* user) {
    auto* s = static_cast<FileSink*>(user);
    if (!s->checked) {
        s->checked = true;
        long status = 0;
        curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 400) return 0;  // no error pages in the file
        // A server that ignores Range sends the whole file: start the file again.
        if (status == 200 && s->truncate_on_200) {
            std::fflush(s->f);
            if (std::freopen(nullptr, "wb", s->f) == nullptr) {
                s->failed_write = true;
                return 0;
            }
        }
    }
    const size_t w = std::fwrite(data, 1, size * n, s->f);
    if (w != size * n) {
        s->failed_write = true;
        return 0;
    }
    if (*s->on_bytes) (*s->on_bytes)(int64_t(w));
    return w;
}

using Easy = std::unique_ptr<CURL, decltype(&curl_easy_cleanup)>;
using Slist = std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)>;

Easy make(const HttpRequest& req, HttpResponse& resp, Slist& hdrs) {
    global_init();
    Easy c(curl_easy_init(), curl_easy_cleanup);
    BI_CHECK(c != nullptr, req.url, "cannot initialise libcurl");
    for (const auto& h : req.headers) hdrs.reset(curl_slist_append(hdrs.release(), h.c_str()));
    curl_easy_setopt(c.get(), CURLOPT_URL, req.url.c_str());
    curl_easy_setopt(c.get(), CURLOPT_HTTPHEADER, hdrs.get());
    curl_easy_setopt(c.get(), CURLOPT_FOLLOWLOCATION, req.follow_redirects ? 1L : 0L);
    curl_easy_setopt(c.get(), CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c.get(), CURLOPT_CONNECTTIMEOUT, req.connect_timeout_s);
    curl_easy_setopt(c.get(), CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(c.get(), CURLOPT_LOW_SPEED_TIME, req.stall_timeout_s);
    curl_easy_setopt(c.get(), CURLOPT_USERAGENT, "bioinfer/0.1");
    curl_easy_setopt(c.get(), CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c.get(), CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c.get(), CURLOPT_HEADERDATA, &resp);
    if (req.timeout_s > 0) curl_easy_setopt(c.get(), CURLOPT_TIMEOUT, req.timeout_s);
    if (!req.basic_auth.empty()) {
        curl_easy_setopt(c.get(), CURLOPT_HTTPAUTH, long(CURLAUTH_BASIC));
        curl_easy_setopt(c.get(), CURLOPT_USERPWD, req.basic_auth.c_str());
    }
    return c;
}

void perform(CURL* c, const HttpRequest& req, HttpResponse& resp) {
    const CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp.status);
    BI_CHECK(rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && resp.status >= 400), req.url,
             curl_easy_strerror(rc));
}

}  // namespace

HttpResponse http_head(const HttpRequest& req) {
    HttpResponse resp;
    Slist hdrs(nullptr, curl_slist_free_all);
    Easy c = make(req, resp, hdrs);
    curl_easy_setopt(c.get(), CURLOPT_NOBODY, 1L);
    perform(c.get(), req, resp);
    return resp;
}

HttpResponse http_get(const HttpRequest& req) {
    HttpResponse resp;
    Slist hdrs(nullptr, curl_slist_free_all);
    Easy c = make(req, resp, hdrs);
    curl_easy_setopt(c.get(), CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c.get(), CURLOPT_WRITEDATA, &resp);
    perform(c.get(), req, resp);
    return resp;
}

HttpResponse http_post_form(const HttpRequest& req,
                            const std::vector<std::pair<std::string, std::string>>& fields) {
    HttpResponse resp;
    Slist hdrs(nullptr, curl_slist_free_all);
    Easy c = make(req, resp, hdrs);
    std::string form;
    for (const auto& [k, v] : fields) {
        char* ek = curl_easy_escape(c.get(), k.data(), int(k.size()));
        char* ev = curl_easy_escape(c.get(), v.data(), int(v.size()));
        BI_CHECK(ek && ev, req.url, "cannot encode the form");
        form += (form.empty() ? "" : "&") + std::string(ek) + "=" + ev;
        curl_free(ek);
        curl_free(ev);
    }
    curl_easy_setopt(c.get(), CURLOPT_POST, 1L);
    curl_easy_setopt(c.get(), CURLOPT_POSTFIELDS, form.c_str());
    curl_easy_setopt(c.get(), CURLOPT_POSTFIELDSIZE, long(form.size()));
    curl_easy_setopt(c.get(), CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c.get(), CURLOPT_WRITEDATA, &resp);
    perform(c.get(), req, resp);
    return resp;
}

HttpResponse http_download(const HttpRequest& req, const std::string& path, int64_t offset,
                           const std::function<void(int64_t)>& on_bytes) {
    HttpResponse resp;
    Slist hdrs(nullptr, curl_slist_free_all);
    HttpRequest r = req;
    if (offset > 0) r.headers.push_back(cat("Range: bytes=", offset, "-"));
    Easy c = make(r, resp, hdrs);
    std::unique_ptr<FILE, decltype(&std::fclose)> f(std::fopen(path.c_str(), offset > 0 ? "ab" : "wb"),
                                                    std::fclose);
    BI_CHECK(f != nullptr, path, "cannot open for writing");
    FileSink sink{f.get(), &resp, c.get(), false, offset > 0, false, &on_bytes};
    curl_easy_setopt(c.get(), CURLOPT_WRITEFUNCTION, on_file);
    curl_easy_setopt(c.get(), CURLOPT_WRITEDATA, &sink);
    const CURLcode rc = curl_easy_perform(c.get());
    curl_easy_getinfo(c.get(), CURLINFO_RESPONSE_CODE, &resp.status);
    BI_CHECK(!sink.failed_write, path, "write failed (disk full?)");
    BI_CHECK(rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && resp.status >= 400), req.url,
             curl_easy_strerror(rc));
    BI_CHECK(std::fflush(f.get()) == 0, path, "write failed (disk full?)");
    return resp;
}

}  // namespace bioinfer::runtime
