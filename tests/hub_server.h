// A local stand-in for the Hugging Face hub, for download tests: serves repositories from memory
// in the hub's URL layout, with its headers, and can misbehave on purpose.
//   GET  /api/models/<org>/<name>/revision/<rev>        {"sha": commit, "siblings": [...]}
//   HEAD /<org>/<name>/resolve/<rev>/<file>             X-Repo-Commit, ETag; for LFS files a
//                                                       302 to /cdn/<sha256> with X-Linked-Etag
//                                                       and X-Linked-Size, as the hub answers
//   GET  the same (following the redirect), with Range: bytes=N- answered by 206
// Faults: cut a file's transfer after N bytes (the connection closes early), serve a file with a
// flipped byte (the checksum no longer matches), 404 for what is not there.
#pragma once
#include <openssl/sha.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "http_server.h"

namespace bioinfer::test {

class HubServer {
public:
    struct File {
        std::string content;
        bool lfs = true;
    };
    struct Repo {
        std::string commit;
        std::map<std::string, File> files;
    };

    HubServer() : server_([this](const HttpRequestSeen& r) { return handle(r); }) {}
    std::string url() const { return server_.url(); }

    void add(const std::string& repo, const std::string& commit, const std::map<std::string, File>& files) {
        std::lock_guard<std::mutex> l(mu_);
        repos_[repo] = {commit, files};
    }
    // The next `times` transfers of `file` stop after `bytes` bytes of the body.
    void cut(const std::string& file, int64_t bytes, int times = 1) {
        std::lock_guard<std::mutex> l(mu_);
        cuts_[file] = {bytes, times};
    }
    // `file` is served with one byte changed (its ETag still the right SHA-256).
    void corrupt(const std::string& file) {
        std::lock_guard<std::mutex> l(mu_);
        corrupt_ = file;
    }
    // "METHOD path [range]" of every request so far.
    std::vector<std::string> requests() {
        std::lock_guard<std::mutex> l(mu_);
        return log_;
    }
    static std::string sha256(const std::string& s) {
        unsigned char md[SHA256_DIGEST_LENGTH];
        SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), md);
        return hex(md, SHA256_DIGEST_LENGTH);
    }

private:
    static std::string hex(const unsigned char* p, size_t n) {
        static const char* h = "0123456789abcdef";
        std::string s;
        for (size_t i = 0; i < n; ++i) {
            s += h[p[i] >> 4];
            s += h[p[i] & 15];
        }
        return s;
    }
    // the hub's ETag for a small (git) file is its git blob id; any 40-hex id will do here
    static std::string git_etag(const std::string& s) { return sha256(s).substr(0, 40); }

    static HttpAnswer respond(int status, std::map<std::string, std::string> headers,
                              std::string body, int64_t cut = -1) {
        return {status, std::move(headers), std::move(body), cut, false};
    }

    HttpAnswer handle(const HttpRequestSeen& r) {
        const std::string& method = r.method;
        const std::string& path = r.path;
        int64_t range = -1;
        if (auto v = r.header("range"); v.rfind("bytes=", 0) == 0) range = std::stoll(v.substr(6));
        std::lock_guard<std::mutex> l(mu_);
        log_.push_back(method + " " + path + (range >= 0 ? " range=" + std::to_string(range) : ""));
        const bool head = method == "HEAD";
        const std::string api = "/api/models/";
        if (path.rfind(api, 0) == 0) {
            const std::string rest = path.substr(api.size());
            const size_t rv = rest.find("/revision/");
            auto it = repos_.find(rest.substr(0, rv));
            if (rv == std::string::npos || it == repos_.end()) return respond(404, {}, "{\"error\":\"Repository not found\"}");
            nlohmann::json sib = nlohmann::json::array();
            for (auto& [f, _] : it->second.files) sib.push_back({{"rfilename", f}});
            return respond(200, {{"Content-Type", "application/json"}},
                           nlohmann::json({{"sha", it->second.commit}, {"siblings", sib}}).dump());
        }
        if (path.rfind("/cdn/", 0) == 0) {
            for (auto& [name, repo] : repos_)
                for (auto& [f, file] : repo.files)
                    if (file.lfs && "/cdn/" + sha256(file.content) == path) return send_file(f, file, range, head, {});
            return respond(404, {}, "not found");
        }
        // /<org>/<name>/resolve/<rev>/<file>
        const size_t rs = path.find("/resolve/");
        if (rs == std::string::npos) return respond(404, {}, "not found");
        auto it = repos_.find(path.substr(1, rs - 1));
        if (it == repos_.end()) return respond(404, {{"X-Error-Code", "RepoNotFound"}}, "");
        const std::string after = path.substr(rs + 9);
        const std::string rev = after.substr(0, after.find('/'));
        const std::string fname = after.substr(after.find('/') + 1);
        auto f = it->second.files.find(fname);
        if ((rev != "main" && rev != it->second.commit) || f == it->second.files.end())
            return respond(404, {{"X-Error-Code", "EntryNotFound"}}, "");
        std::map<std::string, std::string> h = {{"X-Repo-Commit", it->second.commit}};
        if (f->second.lfs) {
            const std::string sum = sha256(f->second.content);
            h["X-Linked-Etag"] = "\"" + sum + "\"";
            h["X-Linked-Size"] = std::to_string(f->second.content.size());
            h["ETag"] = "\"" + git_etag(sum) + "\"";
            h["Location"] = "/cdn/" + sum;
            return respond(302, h, "");
        }
        h["ETag"] = "\"" + git_etag(f->second.content) + "\"";
        return send_file(fname, f->second, range, head, h);
    }

    HttpAnswer send_file(const std::string& name, const File& file, int64_t range, bool head,
                         std::map<std::string, std::string> h) {
        std::string body = file.content;
        if (corrupt_ == name && !body.empty()) body[body.size() / 2] ^= 0x5a;
        int status = 200;
        if (range > 0) {
            if (range >= int64_t(body.size()))
                return respond(416, {{"Content-Range", "bytes */" + std::to_string(body.size())}}, "");
            h["Content-Range"] = "bytes " + std::to_string(range) + "-" + std::to_string(body.size() - 1) + "/" +
                                 std::to_string(body.size());
            body = body.substr(size_t(range));
            status = 206;
        }
        h["Accept-Ranges"] = "bytes";
        int64_t cut = -1;
        auto ct = cuts_.find(name);
        if (!head && ct != cuts_.end() && ct->second.second > 0) {
            cut = std::min<int64_t>(ct->second.first, int64_t(body.size()));
            --ct->second.second;
        }
        return respond(status, h, body, cut);
    }

    std::mutex mu_;
    std::map<std::string, Repo> repos_;
    std::map<std::string, std::pair<int64_t, int>> cuts_;
    std::string corrupt_;
    std::vector<std::string> log_;
    LocalHttpServer server_;  // last: it serves from the members above
};

}  // namespace bioinfer::test
