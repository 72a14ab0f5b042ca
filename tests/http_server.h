// A local HTTP/1.1 server for client tests (the hub stand-in, the MSA server stand-in): one
// connection at a time on 127.0.0.1, a request read whole (headers and a Content-Length body),
// one answer per connection, which a test can cut short to play a broken transfer.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <functional>
#include <map>
#include <string>
#include <thread>

namespace bioinfer::test {

struct HttpRequestSeen {
    std::string method, path;
    std::map<std::string, std::string> headers;  // names lower-cased
    std::string body;
    std::string header(const std::string& k) const {
        auto it = headers.find(k);
        return it == headers.end() ? "" : it->second;
    }
};

struct HttpAnswer {
    int status = 200;
    std::map<std::string, std::string> headers;
    std::string body;
    int64_t cut = -1;          // send only this many bytes of the body, then close
    bool no_length = false;    // no Content-Length (the body ends when the connection closes)
};

class LocalHttpServer {
public:
    using Handler = std::function<HttpAnswer(const HttpRequestSeen&)>;
    explicit LocalHttpServer(Handler h) : handler_(std::move(h)) {
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
    ~LocalHttpServer() {
        stop_ = true;
        ::shutdown(fd_, SHUT_RDWR);
        ::close(fd_);
        thread_.join();
    }
    LocalHttpServer(const LocalHttpServer&) = delete;
    LocalHttpServer& operator=(const LocalHttpServer&) = delete;
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

private:
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

    void handle(int c) {
        std::string req;
        char buf[4096];
        size_t head_end;
        while ((head_end = req.find("\r\n\r\n")) == std::string::npos) {
            const ssize_t n = ::recv(c, buf, sizeof buf, 0);
            if (n <= 0) return;
            req.append(buf, size_t(n));
        }
        HttpRequestSeen r;
        r.method = req.substr(0, req.find(' '));
        const size_t p0 = req.find(' ') + 1;
        r.path = req.substr(p0, req.find(' ', p0) - p0);
        for (size_t at = req.find("\r\n") + 2; at < head_end;) {
            const size_t e = req.find("\r\n", at);
            const std::string line = req.substr(at, e - at);
            at = e + 2;
            const size_t colon = line.find(':');
            if (colon == std::string::npos) continue;
            std::string k = line.substr(0, colon);
            for (char& ch : k) ch = char(std::tolower((unsigned char)ch));
            size_t v = colon + 1;
            while (v < line.size() && line[v] == ' ') ++v;
            r.headers[k] = line.substr(v);
        }
        const size_t length = r.headers.count("content-length") ? std::stoul(r.headers["content-length"]) : 0;
        r.body = req.substr(head_end + 4);
        while (r.body.size() < length) {
            const ssize_t n = ::recv(c, buf, sizeof buf, 0);
            if (n <= 0) return;
            r.body.append(buf, size_t(n));
        }
        const HttpAnswer a = handler_(r);
        const bool head = r.method == "HEAD";
        const char* reason = a.status == 200 ? "OK" : a.status == 206 ? "Partial Content"
                             : a.status == 302 ? "Found" : a.status == 404 ? "Not Found" : "Error";
        std::string h = "HTTP/1.1 " + std::to_string(a.status) + " " + reason + "\r\n";
        for (auto& [k, v] : a.headers) h += k + ": " + v + "\r\n";
        if (!a.headers.count("Content-Length") && !a.no_length)
            h += "Content-Length: " + std::to_string(a.body.size()) + "\r\n";
        h += "Connection: close\r\n\r\n";
        send_all(c, h);
        if (head) return;
        send_all(c, a.cut >= 0 ? a.body.substr(0, size_t(a.cut)) : a.body);
    }

    Handler handler_;
    int fd_ = -1;
    int port_ = 0;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

}  // namespace bioinfer::test
