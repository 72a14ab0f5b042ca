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
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/sha.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

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

    HubServer() {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = 0;
        ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
        ::listen(fd_, 16);
        socklen_t len = sizeof a;
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
        port_ = ntohs(a.sin_port);
        thread_ = std::thread([this] { serve(); });
    }
    ~HubServer() {
        stop_ = true;
        ::shutdown(fd_, SHUT_RDWR);
        ::close(fd_);
        thread_.join();
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

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

    void serve() {
        while (!stop_) {
            const int c = ::accept(fd_, nullptr, nullptr);
            if (c < 0) continue;
            handle(c);
            ::close(c);
        }
    }

    static void send_all(int c, const std::string& s) {
        size_t off = 0;
        while (off < s.size()) {
            const ssize_t n = ::send(c, s.data() + off, s.size() - off, MSG_NOSIGNAL);
            if (n <= 0) return;
            off += size_t(n);
        }
    }

    void respond(int c, int status, const std::map<std::string, std::string>& headers,
                 const std::string& body, bool head, int64_t cut = -1) {
        const char* reason = status == 200 ? "OK" : status == 206 ? "Partial Content"
                             : status == 302 ? "Found" : status == 404 ? "Not Found" : "Error";
        std::string h = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n";
        for (auto& [k, v] : headers) h += k + ": " + v + "\r\n";
        if (!headers.count("Content-Length")) h += "Content-Length: " + std::to_string(body.size()) + "\r\n";
        h += "Connection: close\r\n\r\n";
        send_all(c, h);
        if (head) return;
        send_all(c, cut >= 0 ? body.substr(0, size_t(cut)) : body);
    }

    void handle(int c) {
        std::string req;
        char buf[4096];
        while (req.find("\r\n\r\n") == std::string::npos) {
            const ssize_t n = ::recv(c, buf, sizeof buf, 0);
            if (n <= 0) return;
            req.append(buf, size_t(n));
        }
        const std::string method = req.substr(0, req.find(' '));
        const size_t p0 = req.find(' ') + 1;
        const std::string path = req.substr(p0, req.find(' ', p0) - p0);
        int64_t range = -1;
        if (auto r = req.find("Range: bytes="); r != std::string::npos) range = std::stoll(req.substr(r + 13));
        std::lock_guard<std::mutex> l(mu_);
        log_.push_back(method + " " + path + (range >= 0 ? " range=" + std::to_string(range) : ""));
        const bool head = method == "HEAD";
        const std::string api = "/api/models/";
        if (path.rfind(api, 0) == 0) {
            const std::string rest = path.substr(api.size());
            const size_t rv = rest.find("/revision/");
            auto it = repos_.find(rest.substr(0, rv));
            if (rv == std::string::npos || it == repos_.end()) return respond(c, 404, {}, "{\"error\":\"Repository not found\"}", head);
            nlohmann::json sib = nlohmann::json::array();
            for (auto& [f, _] : it->second.files) sib.push_back({{"rfilename", f}});
            return respond(c, 200, {{"Content-Type", "application/json"}},
                           nlohmann::json({{"sha", it->second.commit}, {"siblings", sib}}).dump(), head);
        }
        if (path.rfind("/cdn/", 0) == 0) {
            for (auto& [name, repo] : repos_)
                for (auto& [f, file] : repo.files)
                    if (file.lfs && "/cdn/" + sha256(file.content) == path) return send_file(c, f, file, range, head, {});
            return respond(c, 404, {}, "not found", head);
        }
        // /<org>/<name>/resolve/<rev>/<file>
        const size_t rs = path.find("/resolve/");
        if (rs == std::string::npos) return respond(c, 404, {}, "not found", head);
        auto it = repos_.find(path.substr(1, rs - 1));
        if (it == repos_.end()) return respond(c, 404, {{"X-Error-Code", "RepoNotFound"}}, "", head);
        const std::string after = path.substr(rs + 9);
        const std::string rev = after.substr(0, after.find('/'));
        const std::string fname = after.substr(after.find('/') + 1);
        auto f = it->second.files.find(fname);
        if ((rev != "main" && rev != it->second.commit) || f == it->second.files.end())
            return respond(c, 404, {{"X-Error-Code", "EntryNotFound"}}, "", head);
        std::map<std::string, std::string> h = {{"X-Repo-Commit", it->second.commit}};
        if (f->second.lfs) {
            const std::string sum = sha256(f->second.content);
            h["X-Linked-Etag"] = "\"" + sum + "\"";
            h["X-Linked-Size"] = std::to_string(f->second.content.size());
            h["ETag"] = "\"" + git_etag(sum) + "\"";
            h["Location"] = "/cdn/" + sum;
            return respond(c, 302, h, "", head);
        }
        h["ETag"] = "\"" + git_etag(f->second.content) + "\"";
        return send_file(c, fname, f->second, range, head, h);
    }

    void send_file(int c, const std::string& name, const File& file, int64_t range, bool head,
                   std::map<std::string, std::string> h) {
        std::string body = file.content;
        if (corrupt_ == name && !body.empty()) body[body.size() / 2] ^= 0x5a;
        int status = 200;
        if (range > 0) {
            if (range >= int64_t(body.size()))
                return respond(c, 416, {{"Content-Range", "bytes */" + std::to_string(body.size())}}, "", head);
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
        respond(c, status, h, body, head, cut);
    }

    int fd_ = -1;
    int port_ = 0;
    std::atomic<bool> stop_{false};
    std::thread thread_;
    std::mutex mu_;
    std::map<std::string, Repo> repos_;
    std::map<std::string, std::pair<int64_t, int>> cuts_;
    std::string corrupt_;
    std::vector<std::string> log_;
};

}  // namespace bioinfer::test
