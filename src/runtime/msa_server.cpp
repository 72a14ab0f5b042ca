// The ColabFold MMseqs2 API as boltz's run_mmseqs2 speaks it: submit, poll, download, split the
// a3m files by query, and compute_msa's CSV per sequence. Downloads stay in memory until they
// are whole and read; the cache takes each answer under its final name in one rename.
#include "runtime/msa_server.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "bioinfer/error.h"
#include "io/archive.h"
#include "io/atomic_file.h"
#include "runtime/http.h"
#include "runtime/fold_pipeline.h"
#include "runtime/hub.h"
#include "models/structure_model.h"

namespace bioinfer::runtime {

namespace fs = std::filesystem;

namespace {

constexpr int kFirstQuery = 101;         // ColabFold numbers the queries from 101
constexpr size_t kMaxPairedRows = 8192;  // boltz's const.max_paired_seqs
constexpr size_t kMaxRows = 16384;       // boltz's const.max_msa_seqs
const char* const kUniref = "uniref.a3m";
const char* const kEnv = "bfd.mgnify30.metaeuk30.smag30.a3m";
const char* const kPair = "pair.a3m";

// Whitespace trimmed at both ends (Python's str.strip()).
std::string strip(const std::string& s) {
    size_t a = 0, b = s.size();
    while (a < b && std::isspace((unsigned char)s[a])) ++a;
    while (b > a && std::isspace((unsigned char)s[b - 1])) --b;
    return s.substr(a, b - a);
}

// The sequences of an a3m block as boltz reads them: block.strip().splitlines()[1::2].
std::vector<std::string> block_rows(const std::string& block) {
    std::vector<std::string> lines;
    std::istringstream in(strip(block));
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        lines.push_back(line);
    }
    std::vector<std::string> rows;
    for (size_t i = 1; i < lines.size(); i += 2) rows.push_back(lines[i]);
    return rows;
}

class Client {
public:
    explicit Client(const MsaServerOptions& o) : o_(o), rng_(std::random_device{}()) {
        while (!o_.url.empty() && o_.url.back() == '/') o_.url.pop_back();
        BI_CHECK(o_.username.empty() == o_.password.empty(), "--msa_server_username",
                 "basic authentication needs both a user name and a password");
        BI_CHECK(o_.username.empty() || o_.api_key_value.empty(), "--api_key_value",
                 "give either basic authentication (--msa_server_username/--msa_server_password) "
                 "or an API key, not both");
        BI_CHECK(o_.pairing == "greedy" || o_.pairing == "complete", "--msa_pairing_strategy",
                 "expected greedy or complete, got '", o_.pairing, "'");
    }

    // The a3m blocks of one job over `seqs` (unique), one per sequence in order: for the
    // unpaired mode uniref's block followed by the environmental databases' block.
    std::vector<std::string> run(const std::vector<std::string>& seqs, bool pairing) {
        const std::string mode = pairing ? "pair" + o_.pairing + "-env" : "env";
        BI_CHECK(!o_.offline, where(),
                 cat("offline (--offline or HF_HUB_OFFLINE=1): ", seqs.size(),
                     " MSA(s) are not in the MSA cache (", o_.cache_dir.empty() ? "none" : o_.cache_dir,
                     "); run once online, or give the MSAs in the input (msa: PATH)"));
        std::string q;
        for (size_t i = 0; i < seqs.size(); ++i) q += cat('>', kFirstQuery + int(i), '\n', seqs[i], '\n');
        const std::string endpoint = pairing ? "/ticket/pair" : "/ticket/msa";
        const auto start = std::chrono::steady_clock::now();
        const auto waited = [&] {
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        };
        nlohmann::json out = submit(endpoint, q, mode);
        while (status_of(out) == "RATELIMIT" || status_of(out) == "UNKNOWN") {
            note(cat("MSA server: ", status_of(out), " answer to the submission; submitting again"));
            give_up_after(waited(), status_of(out) == "RATELIMIT" ? "kept answering RATELIMIT (rate limit)"
                                                                   : "kept answering UNKNOWN");
            pause(o_.poll_s * (1 + unit_(rng_)));
            out = submit(endpoint, q, mode);
        }
        check_final(out, "the submission");
        BI_CHECK(out.contains("id") && out["id"].is_string() && !out["id"].get<std::string>().empty(),
                 where(), "answered the submission without a job id");
        const std::string id = out["id"].get<std::string>();
        BI_CHECK(id.find_first_of("/?#% ") == std::string::npos, where(), "answered a job id '", id,
                 "' that is not a plain name");
        note(cat("MSA server: job ", id, " (", seqs.size(), " sequence(s), mode ", mode, ") ",
                 status_of(out)));
        std::string last = status_of(out);
        while (status_of(out) == "PENDING" || status_of(out) == "RUNNING" ||
               status_of(out) == "UNKNOWN") {
            give_up_after(waited(), cat("job ", id, " was still ", status_of(out)));
            pause(o_.poll_s * (1 + unit_(rng_)));
            out = request_json([&] {
                return http_get(request(o_.url + "/ticket/" + id));
            }, "the job's status");
            if (status_of(out) != last) note(cat("MSA server: job ", id, " ", status_of(out)));
            last = status_of(out);
        }
        check_final(out, cat("job ", id));
        const std::map<std::string, std::string> files = download(id);
        // the blocks per query number, uniref's first
        std::map<int, std::string> blocks;
        const std::vector<std::string> names =
            pairing ? std::vector<std::string>{kPair} : std::vector<std::string>{kUniref, kEnv};
        for (const std::string& name : names) {
            auto f = files.find(name);
            BI_CHECK(f != files.end(), where(), "job ", id, ": the result has no ", name);
            for (auto& [m, text] : split_colabfold_a3m(f->second, cat(where(), " job ", id, " ", name)))
                blocks[m] += text;
        }
        std::vector<std::string> result;
        for (size_t i = 0; i < seqs.size(); ++i) {
            auto b = blocks.find(kFirstQuery + int(i));
            BI_CHECK(b != blocks.end(), where(), "job ", id, ": the result has no MSA for query ",
                     kFirstQuery + int(i));
            result.push_back(b->second);
        }
        return result;
    }

private:
    std::string where() const { return "MSA server " + o_.url; }

    void note(const std::string& line) const {
        if (o_.log) o_.log(line);
    }

    void check_cancelled() const {
        BI_CHECK(!(o_.cancelled && o_.cancelled()), where(), "cancelled; no MSA was kept");
    }

    void pause(double seconds) const {
        const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        while (std::chrono::steady_clock::now() < until) {
            check_cancelled();
            std::this_thread::sleep_for(std::chrono::milliseconds(
                std::max<int64_t>(1, std::min<int64_t>(100, int64_t(seconds * 1000)))));
        }
        check_cancelled();
    }

    void give_up_after(double waited, const std::string& what) const {
        BI_CHECK(waited < o_.max_wait_s, where(), what, " after ", int64_t(waited),
                 " s; given up (try again later)");
    }

    HttpRequest request(const std::string& url) const {
        HttpRequest r;
        r.url = url;
        r.timeout_s = std::max(1L, long(o_.request_timeout_s + 0.5));
        r.connect_timeout_s = std::min(r.timeout_s, 20L);
        r.headers.push_back("User-Agent: boltz");  // as boltz identifies itself to the server
        if (!o_.api_key_value.empty())
            r.headers.push_back(o_.api_key_header + ": " + o_.api_key_value);
        if (!o_.username.empty()) r.basic_auth = o_.username + ":" + o_.password;
        return r;
    }

    // One request, retried on transport errors and 5xx answers; an answer refused for
    // authentication or another 4xx is an error at once; 429 is a rate-limit answer.
    HttpResponse send(const std::function<HttpResponse()>& call, const std::string& what) {
        std::string last;
        for (int attempt = 0;; ++attempt) {
            check_cancelled();
            try {
                HttpResponse r = call();
                if (r.status == 401 || r.status == 403)
                    fail(where(), cat("refused ", what, " (HTTP ", r.status,
                                      "): check --msa_server_username/--msa_server_password or "
                                      "--api_key_header/--api_key_value"));
                if (r.status < 500) return r;
                last = cat("HTTP ", r.status);
            } catch (const Error& e) {
                if (std::string(e.what()).rfind("[" + where() + "]", 0) == 0) throw;  // our refusal
                last = e.what();
            }
            if (attempt >= o_.retries)
                fail(where(), cat(what, " failed ", attempt + 1, " times (last: ", last,
                                  "); is the server reachable? (--msa_server_url)"));
            note(cat("MSA server: ", what, " failed (", last, "); retrying (", attempt + 1, "/",
                     o_.retries, ")"));
            pause(o_.retry_wait_s);
        }
    }

    static std::string status_of(const nlohmann::json& j) {
        return j.contains("status") && j["status"].is_string() ? j["status"].get<std::string>()
                                                               : "ERROR";
    }

    nlohmann::json request_json(const std::function<HttpResponse()>& call, const std::string& what) {
        const HttpResponse r = send(call, what);
        if (r.status == 429) return {{"status", "RATELIMIT"}};
        BI_CHECK(r.status >= 200 && r.status < 300, where(), what, ": HTTP ", r.status, " ",
                 strip(r.body).substr(0, 200));
        nlohmann::json j = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
        BI_CHECK(j.is_object(), where(), what, ": the answer is not JSON: '",
                 strip(r.body).substr(0, 200), "'");
        return j;
    }

    nlohmann::json submit(const std::string& endpoint, const std::string& q, const std::string& mode) {
        return request_json([&] {
            return http_post_form(request(o_.url + endpoint), {{"q", q}, {"mode", mode}});
        }, "the submission");
    }

    void check_final(const nlohmann::json& out, const std::string& what) const {
        const std::string s = status_of(out);
        BI_CHECK(s != "ERROR", where(), what,
                 " answered ERROR: the server could not search these sequences (check that they "
                 "are valid protein sequences; if it persists, try again later)");
        BI_CHECK(s != "MAINTENANCE", where(), "is under maintenance; try again in a few minutes");
        BI_CHECK(s == "COMPLETE" || s == "PENDING" || s == "RUNNING", where(), what,
                 " answered an unknown status '", s, "'");
    }

    // out.tar.gz, read whole in memory and unpacked: the files by name (folders dropped).
    std::map<std::string, std::string> download(const std::string& id) {
        const std::string what = "the download of job " + id;
        for (int attempt = 0;; ++attempt) {
            const HttpResponse r =
                send([&] { return http_get(request(o_.url + "/result/download/" + id)); }, what);
            BI_CHECK(r.status == 200, where(), what, ": HTTP ", r.status);
            try {
                std::istringstream tar(io::gunzip(r.body, o_.max_download_bytes, what));
                std::map<std::string, std::string> files;
                io::read_tar(tar, what, [&](const io::TarEntry& e, std::istream& in) {
                    if (e.directory) return;
                    files[fs::path(e.path).filename().string()] =
                        io::read_tar_body(e, in, o_.max_download_bytes, what);
                });
                return files;
            } catch (const Error& e) {
                // a body cut short without a transport error (no Content-Length) arrives corrupt
                if (attempt >= o_.retries)
                    fail(where(), cat(what, " arrived incomplete ", attempt + 1, " times (last: ",
                                      e.what(), "); no MSA was kept"));
                note(cat("MSA server: ", what, " arrived incomplete; downloading again"));
                pause(o_.retry_wait_s);
            }
        }
    }

    MsaServerOptions o_;
    std::mt19937_64 rng_;
    std::uniform_real_distribution<double> unit_{0.0, 1.0};
};

// A cache entry's file: the answer for query `index` of the job over `seqs` in `mode`.
std::string cache_file(const MsaServerOptions& o, const std::string& mode,
                       const std::vector<std::string>& seqs, size_t index) {
    std::string key = o.url + "\n" + mode + "\n" + std::to_string(index);
    for (const std::string& s : seqs) key += "\n" + s;
    return (fs::path(o.cache_dir) / (sha256_hex(key) + ".a3m")).string();
}

// Blocks for `seqs` in `mode`, from the cache where it has them, else from one job over the
// missing ones (unpaired) or all of them (paired: the answer depends on the whole set).
std::vector<std::string> blocks_for(Client& client, const MsaServerOptions& o,
                                    const std::vector<std::string>& seqs, bool pairing) {
    const std::string mode = pairing ? "pair" + o.pairing + "-env" : "env";
    // unpaired answers are per sequence; paired ones per position in the ordered set
    const auto file_of = [&](size_t i) {
        return pairing ? cache_file(o, mode, seqs, i) : cache_file(o, mode, {seqs[i]}, 0);
    };
    std::vector<std::string> out(seqs.size());
    std::vector<size_t> missing;
    for (size_t i = 0; i < seqs.size(); ++i) {
        std::error_code ec;
        if (!o.cache_dir.empty() && fs::is_regular_file(file_of(i), ec))
            out[i] = io::read_file(file_of(i));
        else
            missing.push_back(i);
    }
    if (missing.empty()) return out;
    if (pairing) missing = [&] {
        std::vector<size_t> all(seqs.size());
        for (size_t i = 0; i < all.size(); ++i) all[i] = i;
        return all;
    }();
    std::vector<std::string> ask;
    for (size_t i : missing) ask.push_back(seqs[i]);
    const std::vector<std::string> got = client.run(ask, pairing);
    for (size_t k = 0; k < missing.size(); ++k) {
        out[missing[k]] = got[k];
        if (!o.cache_dir.empty()) {
            fs::create_directories(o.cache_dir);
            io::write_file_atomic(file_of(missing[k]), got[k]);
        }
    }
    return out;
}

}  // namespace

std::vector<std::pair<int, std::string>> split_colabfold_a3m(const std::string& text,
                                                             const std::string& where) {
    std::vector<std::pair<int, std::string>> blocks;
    std::map<int, size_t> index;
    bool new_block = true;  // the next header names a query
    int current = -1;
    size_t at = 0;
    while (at < text.size()) {
        size_t end = text.find('\n', at);
        if (end == std::string::npos) end = text.size() - 1;
        std::string line = text.substr(at, end - at + 1);
        at = end + 1;
        if (line.find('\0') != std::string::npos) {
            line.erase(std::remove(line.begin(), line.end(), '\0'), line.end());
            new_block = true;
        }
        if (!line.empty() && line[0] == '>' && new_block) {
            const std::string num = strip(line.substr(1));
            size_t used = 0;
            int m = -1;
            try {
                m = std::stoi(num, &used);
            } catch (const std::exception&) {
                used = 0;
            }
            BI_CHECK(used > 0 && used == num.size(), where, "a query block headed '",
                     strip(line).substr(0, 60), "' (expected a query number such as >101)");
            current = m;
            new_block = false;
            if (!index.count(m)) {
                index[m] = blocks.size();
                blocks.push_back({m, ""});
            }
        }
        if (current < 0) {
            BI_CHECK(strip(line).empty(), where, "text before the first query header");
            continue;
        }
        blocks[index[current]].second += line;
    }
    return blocks;
}

std::vector<std::string> server_msa_csvs(const std::vector<std::string>& sequences,
                                         const MsaServerOptions& opts) {
    BI_CHECK(!sequences.empty(), "MSA server", "no sequences to query");
    for (const std::string& s : sequences)
        BI_CHECK(!s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isalpha((unsigned char)c); }),
                 "MSA server", "not a protein sequence: '", s.substr(0, 40), "'");
    BI_CHECK(std::set<std::string>(sequences.begin(), sequences.end()).size() == sequences.size(),
             "MSA server", "the sequences of one query must be unique");
    Client client(opts);
    std::vector<std::string> paired(sequences.size());
    if (sequences.size() > 1) paired = blocks_for(client, opts, sequences, true);
    const std::vector<std::string> unpaired = blocks_for(client, opts, sequences, false);
    std::vector<std::string> csvs;
    for (size_t i = 0; i < sequences.size(); ++i) {
        std::vector<std::string> prows = block_rows(paired[i]);
        if (prows.size() > kMaxPairedRows) prows.resize(kMaxPairedRows);
        std::vector<std::string> rows;
        std::vector<long> keys;
        for (size_t r = 0; r < prows.size(); ++r)
            if (prows[r].find_first_not_of('-') != std::string::npos) {
                rows.push_back(prows[r]);
                keys.push_back(long(r));
            }
        std::vector<std::string> urows = block_rows(unpaired[i]);
        const size_t room = kMaxRows - std::min(kMaxRows, rows.size());
        if (urows.size() > room) urows.resize(room);
        // the query already leads the paired rows
        if (!rows.empty() && !urows.empty()) urows.erase(urows.begin());
        std::string csv = "key,sequence";
        for (size_t r = 0; r < rows.size(); ++r) csv += cat('\n', keys[r], ',', rows[r]);
        for (const std::string& u : urows) csv += cat("\n-1,", u);
        csvs.push_back(std::move(csv));
    }
    return csvs;
}

io::MsaFetch boltz_msa_fetch(const MsaServerOptions& opts, const std::string& msa_dir) {
    return [opts, msa_dir](const std::string& target,
                           const std::vector<std::pair<int, std::string>>& entities) {
        std::vector<std::string> seqs;
        for (const auto& e : entities) seqs.push_back(e.second);
        if (opts.log)
            opts.log(cat("MSA server: target ", target, ", ", seqs.size(), " protein entit",
                         seqs.size() == 1 ? "y" : "ies", " (", opts.url, ", pairing ", opts.pairing, ")"));
        const std::vector<std::string> csvs = server_msa_csvs(seqs, opts);
        fs::create_directories(msa_dir);
        std::vector<std::string> paths;
        for (size_t k = 0; k < entities.size(); ++k) {
            paths.push_back((fs::path(msa_dir) / cat(target, "_", entities[k].first, ".csv")).string());
            io::write_file_atomic(paths.back(), csvs[k]);
        }
        return paths;
    };
}

void attach_server_msas(std::vector<FoldRecord>& records, const MsaServerOptions& opts,
                        const std::string& msa_dir, const fold::ModelSpec& spec) {
    for (FoldRecord& r : records) {
        if (!r.error.empty()) continue;
        std::vector<bio::Chain>& chains = r.input.target.chains;
        std::vector<std::string> seqs;
        for (const bio::Chain& c : chains)
            if (c.type == bio::MoleculeType::Protein && !c.msa &&
                std::find(seqs.begin(), seqs.end(), c.sequence) == seqs.end())
                seqs.push_back(c.sequence);
        if (seqs.empty()) continue;
        try {
            if (opts.log) opts.log(cat("MSA server: record ", r.input.id, ", ", seqs.size(), " sequence(s)"));
            const std::vector<std::string> csvs = server_msa_csvs(seqs, opts);
            fs::create_directories(msa_dir);
            for (bio::Chain& c : chains) {
                if (c.type != bio::MoleculeType::Protein || c.msa) continue;
                const size_t k = size_t(std::find(seqs.begin(), seqs.end(), c.sequence) - seqs.begin());
                // the CSV's rows as a3m records: paired rows carry their key in the header
                std::string a3m;
                std::istringstream in(csvs[k]);
                std::string line;
                std::getline(in, line);  // key,sequence
                for (int row = 0; std::getline(in, line); ++row) {
                    const size_t comma = line.find(',');
                    const std::string key = line.substr(0, comma);
                    a3m += cat('>', row == 0 ? std::string("query") : cat("row", row),
                               key == "-1" ? std::string() : " key=" + key, '\n',
                               line.substr(comma + 1), '\n');
                }
                const std::string path = (fs::path(msa_dir) / cat(r.input.id, "_", c.id, ".a3m")).string();
                io::write_file_atomic(path, a3m);
                c.msa_kind = bio::MsaKind::File;
                c.msa_path = path;
                c.msa = spec.read_msa(path);
            }
        } catch (const std::exception& e) {
            r.error = error_line(e);
        }
    }
}

std::string default_msa_cache_dir() {
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    const std::string root = xdg && *xdg ? std::string(xdg) : std::string(home ? home : ".") + "/.cache";
    return root + "/bioinfer/msa";
}

void msa_server_options_from_env(MsaServerOptions& o) {
    const auto env = [](const char* k) {
        const char* v = std::getenv(k);
        return std::string(v ? v : "");
    };
    if (o.username.empty()) o.username = env("BOLTZ_MSA_USERNAME");
    if (o.password.empty()) o.password = env("BOLTZ_MSA_PASSWORD");
    if (o.api_key_value.empty()) o.api_key_value = env("MSA_API_KEY_VALUE");
}

}  // namespace bioinfer::runtime
