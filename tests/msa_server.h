// A local stand-in for the ColabFold MMseqs2 MSA server (api.colabfold.com), speaking its
// protocol as boltz's client uses it:
//   POST /ticket/msa, /ticket/pair   form q=">101\nSEQ\n...", mode=...  -> {"id","status"}
//   GET  /ticket/<id>                                                    -> {"id","status"}
//   GET  /result/download/<id>       out.tar.gz: uniref.a3m and bfd.mgnify30.metaeuk30.smag30.a3m
//                                    (mode env) or pair.a3m (pair modes), one block per query
// The a3m answers per sequence are set by the test; without one a query gets its sequence and
// two made-up hits. It can misbehave on purpose: rate limits, jobs that fail or never finish,
// slow answers, cut downloads, required credentials.
#pragma once
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "http_server.h"

namespace bioinfer::test {

class ColabFoldServer {
public:
    // The hits (a3m lines after the query's header and sequence) a query gets per database.
    struct Hits {
        std::string uniref, env;
    };
    ColabFoldServer() : server_([this](const HttpRequestSeen& r) { return handle(r); }) {}
    std::string url() const { return server_.url(); }

    void set_hits(const std::string& seq, Hits h) {
        std::lock_guard<std::mutex> l(mu_);
        hits_[seq] = std::move(h);
    }
    // The rows of pair.a3m (after the query) per query, for a job over exactly `seqs`.
    void set_pairs(const std::vector<std::string>& seqs, std::vector<std::string> per_query) {
        std::lock_guard<std::mutex> l(mu_);
        pairs_[seqs] = std::move(per_query);
    }
    // Faults. The next `n` submissions answer `status` (RATELIMIT, UNKNOWN, MAINTENANCE, ERROR)
    // or, for "429", HTTP 429; "500": HTTP 500.
    void answer_submissions(const std::string& status, int n) {
        std::lock_guard<std::mutex> l(mu_);
        submit_faults_ = {status, n};
    }
    void polls_before_complete(int n) { std::lock_guard<std::mutex> l(mu_); polls_ = n; }
    void job_fails() { std::lock_guard<std::mutex> l(mu_); job_fails_ = true; }
    // Every answer waits this long first (a timeout for short request limits).
    void delay_ms(int ms) { std::lock_guard<std::mutex> l(mu_); delay_ms_ = ms; }
    // The next `n` downloads stop after `bytes` bytes of the archive.
    void cut_downloads(int64_t bytes, int n) { std::lock_guard<std::mutex> l(mu_); cut_ = {bytes, n}; }
    // Answers 401 unless the request carries this header line ("Authorization: Basic ...",
    // "X-API-Key: secret").
    void require_header(const std::string& name, const std::string& value) {
        std::lock_guard<std::mutex> l(mu_);
        auth_ = {name, value};
    }
    // "METHOD path [mode=M]" of every request so far.
    std::vector<std::string> requests() {
        std::lock_guard<std::mutex> l(mu_);
        return log_;
    }
    int count(const std::string& prefix) {
        int n = 0;
        for (const std::string& r : requests()) n += r.rfind(prefix, 0) == 0;
        return n;
    }
    // The query sequences of every submission, in order.
    std::vector<std::vector<std::string>> submitted() {
        std::lock_guard<std::mutex> l(mu_);
        return submitted_;
    }

    // A tar (ustar) of `files`, gzip-compressed.
    static std::string tar_gz(const std::map<std::string, std::string>& files) {
        std::string tar;
        for (const auto& [name, content] : files) {
            char h[512] = {};
            std::snprintf(h, 100, "%s", name.c_str());
            std::snprintf(h + 100, 8, "%07o", 0644);
            std::snprintf(h + 108, 8, "%07o", 0);
            std::snprintf(h + 116, 8, "%07o", 0);
            std::snprintf(h + 124, 12, "%011lo", (unsigned long)content.size());
            std::snprintf(h + 136, 12, "%011o", 0);
            h[156] = '0';
            std::memcpy(h + 257, "ustar", 6);
            std::memcpy(h + 263, "00", 2);
            std::memset(h + 148, ' ', 8);
            unsigned sum = 0;
            for (unsigned char c : h) sum += c;
            std::snprintf(h + 148, 8, "%06o", sum);
            tar.append(h, 512);
            tar += content;
            tar.append((512 - content.size() % 512) % 512, '\0');
        }
        tar.append(1024, '\0');
        z_stream z{};
        deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
        std::string out(deflateBound(&z, uLong(tar.size())), '\0');
        z.next_in = reinterpret_cast<Bytef*>(tar.data());
        z.avail_in = uInt(tar.size());
        z.next_out = reinterpret_cast<Bytef*>(out.data());
        z.avail_out = uInt(out.size());
        deflate(&z, Z_FINISH);
        out.resize(z.total_out);
        deflateEnd(&z);
        return out;
    }

private:
    struct Job {
        std::vector<std::string> seqs;
        std::string mode;
        int polls = 0;
    };

    static std::string form_value(const std::string& body, const std::string& key) {
        const std::string k = key + "=";
        size_t at = 0;
        while (at < body.size()) {
            size_t end = body.find('&', at);
            if (end == std::string::npos) end = body.size();
            if (body.compare(at, k.size(), k) == 0) {
                std::string v;
                for (size_t i = at + k.size(); i < end; ++i) {
                    if (body[i] == '%' && i + 2 < end + 1) {
                        v += char(std::stoi(body.substr(i + 1, 2), nullptr, 16));
                        i += 2;
                    } else {
                        v += body[i] == '+' ? ' ' : body[i];
                    }
                }
                return v;
            }
            at = end + 1;
        }
        return "";
    }

    static HttpAnswer json(const nlohmann::json& j) {
        return {200, {{"Content-Type", "application/json"}}, j.dump(), -1, false};
    }

    // One database's a3m file for a job: per query ">10k\nSEQ\n" + its hits, NUL-separated.
    std::string a3m(const Job& j, const std::function<std::string(size_t)>& hits) const {
        std::string s;
        for (size_t i = 0; i < j.seqs.size(); ++i) {
            if (i) s += '\0';
            s += ">" + std::to_string(101 + i) + "\n" + j.seqs[i] + "\n" + hits(i);
        }
        return s;
    }

    std::string result(const Job& j) const {
        if (j.mode.rfind("pair", 0) == 0) {
            auto p = pairs_.find(j.seqs);
            return tar_gz({{"pair.a3m", a3m(j, [&](size_t i) {
                                return p == pairs_.end() ? std::string() : p->second.at(i);
                            })}});
        }
        const auto hits = [&](size_t i, bool env) {
            auto h = hits_.find(j.seqs[i]);
            if (h != hits_.end()) return env ? h->second.env : h->second.uniref;
            std::string mutated = j.seqs[i];
            mutated[0] = env ? 'A' : 'G';
            return std::string(env ? ">env_hit\n" : ">uniref_hit\n") + mutated + "\n";
        };
        return tar_gz({{"uniref.a3m", a3m(j, [&](size_t i) { return hits(i, false); })},
                       {"bfd.mgnify30.metaeuk30.smag30.a3m", a3m(j, [&](size_t i) { return hits(i, true); })},
                       {"msa.sh", "#!/bin/bash\n"}});
    }

    HttpAnswer handle(const HttpRequestSeen& r) {
        int delay = 0;
        {
            std::lock_guard<std::mutex> l(mu_);
            delay = delay_ms_;
        }
        if (delay > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay));
        std::lock_guard<std::mutex> l(mu_);
        const std::string mode = r.method == "POST" ? form_value(r.body, "mode") : "";
        log_.push_back(r.method + " " + r.path + (mode.empty() ? "" : " mode=" + mode));
        if (!auth_.first.empty() && r.header(auth_.first) != auth_.second)
            return {401, {}, "{\"error\":\"unauthorized\"}", -1, false};
        if (r.method == "POST" && (r.path == "/ticket/msa" || r.path == "/ticket/pair")) {
            Job j;
            j.mode = mode;
            const std::string q = form_value(r.body, "q");
            for (size_t at = 0; at < q.size();) {
                size_t e = q.find('\n', at);
                if (e == std::string::npos) e = q.size();
                const std::string line = q.substr(at, e - at);
                if (!line.empty() && line[0] != '>') j.seqs.push_back(line);
                at = e + 1;
            }
            submitted_.push_back(j.seqs);
            if (submit_faults_.second > 0) {
                --submit_faults_.second;
                if (submit_faults_.first == "429") return {429, {}, "Too Many Requests", -1, false};
                if (submit_faults_.first == "500") return {500, {}, "Internal Server Error", -1, false};
                return json({{"status", submit_faults_.first}});
            }
            const std::string id = "job" + std::to_string(jobs_.size());
            jobs_[id] = j;
            return json({{"id", id}, {"status", polls_ > 0 ? "PENDING" : "COMPLETE"}});
        }
        if (r.method == "GET" && r.path.rfind("/ticket/", 0) == 0) {
            auto it = jobs_.find(r.path.substr(8));
            if (it == jobs_.end()) return json({{"status", "UNKNOWN"}});
            Job& j = it->second;
            ++j.polls;
            if (job_fails_) return json({{"id", it->first}, {"status", "ERROR"}});
            return json({{"id", it->first}, {"status", j.polls >= polls_ ? "COMPLETE" : "RUNNING"}});
        }
        if (r.method == "GET" && r.path.rfind("/result/download/", 0) == 0) {
            auto it = jobs_.find(r.path.substr(17));
            if (it == jobs_.end()) return {404, {}, "not found", -1, false};
            HttpAnswer a{200, {{"Content-Type", "application/x-gzip"}}, result(it->second), -1, false};
            if (cut_.second > 0) {
                --cut_.second;
                a.cut = std::min<int64_t>(cut_.first, int64_t(a.body.size()));
            }
            return a;
        }
        return {404, {}, "not found", -1, false};
    }

    std::mutex mu_;
    std::map<std::string, Hits> hits_;
    std::map<std::vector<std::string>, std::vector<std::string>> pairs_;
    std::map<std::string, Job> jobs_;
    std::pair<std::string, int> submit_faults_{"", 0};
    std::pair<int64_t, int> cut_{0, 0};
    std::pair<std::string, std::string> auth_;
    int polls_ = 0, delay_ms_ = 0;
    bool job_fails_ = false;
    std::vector<std::string> log_;
    std::vector<std::vector<std::string>> submitted_;
    LocalHttpServer server_;  // last: it serves from the members above
};

}  // namespace bioinfer::test
