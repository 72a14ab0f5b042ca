// Hub cache layout (shared with huggingface_hub):
//   <cache>/models--<org>--<name>/refs/<revision>          the commit a revision points to
//   <cache>/models--<org>--<name>/blobs/<etag>             file contents, named by ETag
//   <cache>/models--<org>--<name>/blobs/<etag>.incomplete  a download in progress
//   <cache>/models--<org>--<name>/snapshots/<commit>/<file> -> ../../blobs/<etag>
// The ETag of a large (LFS) file is its SHA-256, which is checked after download.
#include "runtime/hub.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "bioinfer/error.h"
#include "io/atomic_file.h"
#include "io/untrusted.h"
#include "models/registry.h"
#include "runtime/boltz_cache.h"
#include "runtime/http.h"
#include "runtime/progress.h"

namespace bioinfer::runtime {

namespace fs = std::filesystem;
using nlohmann::json;

std::string model_in_own_cache(const std::string& name, const std::string& folder) {
    const models::HubModel* m = models::find_hub_model(name);
    const bool boltz2 = m && m->files.empty() && m->repos == std::vector<std::string>{boltz2::kHubRepo};
    return boltz2 && open_boltz2_cache(folder) ? folder : std::string();
}

HubListing parse_listing(const std::string& body, const std::string& url) {
    const json j = json::parse(body, nullptr, false);
    BI_CHECK(j.is_object() && j.contains("sha") && j["sha"].is_string() && j.contains("siblings") &&
                 j["siblings"].is_array(),
             url, "unexpected answer from the hub (no sha / siblings)");
    HubListing l;
    l.commit = j["sha"].get<std::string>();
    BI_CHECK(!l.commit.empty() && l.commit.size() <= 128 &&
                 std::all_of(l.commit.begin(), l.commit.end(),
                             [](char c) { return std::isalnum((unsigned char)c); }),
             url, "the hub's commit id '", l.commit, "' is not a plain name");
    for (const auto& s : j["siblings"]) {
        if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string()) continue;
        std::string f = s["rfilename"].get<std::string>();
        BI_CHECK(io::is_plain_relative_path(f), url,
                 "the hub lists a file outside the repository: '", f, "'");
        l.files.push_back(std::move(f));
    }
    return l;
}

HubFileHead parse_file_head(const HttpResponse& head, const std::string& url) {
    HubFileHead h;
    h.etag = head.header("x-linked-etag");
    if (h.etag.empty()) h.etag = head.header("etag");
    if (h.etag.rfind("W/", 0) == 0) h.etag = h.etag.substr(2);
    h.etag.erase(std::remove(h.etag.begin(), h.etag.end(), '"'), h.etag.end());
    // the blob's file name: the hub's ETags are hex digests, with a "-N" suffix for some
    BI_CHECK(!h.etag.empty() && h.etag.size() <= 128 &&
                 std::all_of(
                     h.etag.begin(), h.etag.end(),
                     [](char c) { return std::isalnum((unsigned char)c) || c == '-' || c == '_'; }),
             url, "the hub sent no usable ETag ('", h.etag, "')");
    std::string size_s = head.header("x-linked-size");
    if (size_s.empty()) size_s = head.header("content-length");
    if (!size_s.empty()) {
        BI_CHECK(io::parse_decimal(size_s, 18, h.size), url,
                 "the hub sent a file size that is not a number: '", size_s, "'");
    }
    return h;
}

std::vector<std::string> index_shards(const std::string& text, const std::string& where) {
    std::set<std::string> shards;
    const json idx = json::parse(text, nullptr, false);
    if (idx.is_object() && idx.contains("weight_map") && idx["weight_map"].is_object())
        for (auto& [k, v] : idx["weight_map"].items())
            if (v.is_string()) {
                const std::string f = v.get<std::string>();
                BI_CHECK(io::is_plain_relative_path(f), where,
                         "names a shard outside the repository: '", f, "'");
                shards.insert(f);
            }
    return {shards.begin(), shards.end()};
}

namespace {

std::string env(const char* k) {
    const char* v = std::getenv(k);
    return v ? v : "";
}

bool truthy(const std::string& v) {
    std::string s = v;
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s == "1" || s == "true" || s == "yes" || s == "on";
}

std::string repo_folder(const std::string& repo) {
    const size_t slash = repo.find('/');
    return "models--" + repo.substr(0, slash) + "--" + repo.substr(slash + 1);
}

std::string read_line(const fs::path& p) {
    std::ifstream f(p);
    std::string s;
    if (f) std::getline(f, s);
    while (!s.empty() && std::isspace((unsigned char)s.back())) s.pop_back();
    return s;
}

bool is_sha256(const std::string& s) {
    return s.size() == 64 &&
           std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit((unsigned char)c); });
}

// Which of a repository's files a model needs: config.json when there is one, and one set of
// weights: model.safetensors, else the sharded safetensors (index + shards), else
// pytorch_model.bin, else the esm package's data/weights/*.pth. `exists` says whether a file is
// available; `read` gives a file's text (for the shard index). Returns the needed files and, for
// a set that is not all there, what is missing.
struct Selection {
    std::vector<std::string> files, missing;
};

Selection select_files(const std::function<bool(const std::string&)>& exists,
                       const std::vector<std::string>& listing,
                       const std::function<std::string(const std::string&)>& read_index,
                       const std::vector<std::string>& only = {}) {
    Selection s;
    auto need = [&](const std::string& f) {
        s.files.push_back(f);
        if (!exists(f)) s.missing.push_back(f);
    };
    if (!only.empty()) {
        for (const auto& f : only) need(f);
        return s;
    }
    std::vector<std::string> pth;
    for (const auto& f : listing)
        if (f.rfind("data/weights/", 0) == 0 && (f.ends_with(".pth") || f.ends_with(".pt"))) pth.push_back(f);
    auto listed = [&](const std::string& f) {
        return std::find(listing.begin(), listing.end(), f) != listing.end();
    };
    // Boltz-2 (boltz's own cache layout): the checkpoint and the molecules, as an archive until
    // it is unpacked to mols/
    if (listed(boltz2::kCheckpoint) || listed(boltz2::kMolsTar)) {
        need(boltz2::kCheckpoint);
        if (!exists(boltz2::kMolsDir)) need(boltz2::kMolsTar);
        return s;
    }
    if (listed("config.json")) need("config.json");
    if (listed("model.safetensors")) {
        need("model.safetensors");
    } else if (listed("model.safetensors.index.json")) {
        need("model.safetensors.index.json");
        const std::string text = read_index("model.safetensors.index.json");
        if (!text.empty()) {
            for (const auto& sh : index_shards(text, "model.safetensors.index.json")) need(sh);
        }
    } else if (listed("pytorch_model.bin")) {
        need("pytorch_model.bin");
    } else if (!pth.empty()) {
        for (const auto& f : pth) need(f);
    } else {
        s.missing.push_back(
            "model weights (model.safetensors, model.safetensors.index.json with its shards, "
            "pytorch_model.bin or data/weights/*.pth)");
    }
    if (!listed("config.json") && pth.empty()) s.missing.insert(s.missing.begin(), "config.json");
    return s;
}

std::vector<std::string> list_files(const fs::path& dir) {
    std::vector<std::string> out;
    std::error_code ec;
    // a snapshot may link whole folders (data/ in the esm package's layout)
    for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        if (fs::is_regular_file(it->path())) out.push_back(it->path().lexically_relative(dir).generic_string());
    std::sort(out.begin(), out.end());
    return out;
}

CachedRepo inspect_snapshot(const std::string& repo, const fs::path& snap,
                            const std::vector<std::string>& only) {
    CachedRepo c;
    c.repo = repo;
    c.snapshot = snap.string();
    const std::vector<std::string> listing = list_files(snap);
    Selection s = select_files(
        [&](const std::string& f) { return fs::exists(snap / f); }, listing,
        [&](const std::string& f) { return io::read_file((snap / f).string()); }, only);
    c.files = s.files;
    c.missing = s.missing;
    std::error_code dir_ec;
    if (std::find(c.files.begin(), c.files.end(), boltz2::kCheckpoint) != c.files.end() &&
        !fs::is_directory(snap / boltz2::kMolsDir, dir_ec))
        c.missing.push_back(std::string(boltz2::kMolsDir) + "/ (unpacked from " + boltz2::kMolsTar + ")");
    for (const auto& f : c.files) {
        std::error_code ec;
        const auto n = fs::file_size(snap / f, ec);
        if (!ec) c.bytes += int64_t(n);
    }
    return c;
}

// An exclusive lock on .locks/<repo folder>/<name>.lock, as huggingface_hub takes, so that two
// processes do not write one blob at once.
class BlobLock {
public:
    BlobLock(const fs::path& cache, const std::string& folder, const std::string& name) {
        const fs::path dir = cache / ".locks" / folder;
        fs::create_directories(dir);
        fd_ = ::open((dir / (name + ".lock")).c_str(), O_CREAT | O_RDWR, 0644);
        if (fd_ >= 0) ::flock(fd_, LOCK_EX);
    }
    ~BlobLock() {
        if (fd_ >= 0) ::close(fd_);
    }

private:
    int fd_ = -1;
};

}  // namespace

HubOptions HubOptions::from_env(const std::string& cache_dir_override, bool offline) {
    HubOptions o;
    o.endpoint = env("HF_ENDPOINT").empty() ? "https://huggingface.co" : env("HF_ENDPOINT");
    while (!o.endpoint.empty() && o.endpoint.back() == '/') o.endpoint.pop_back();
    const std::string home = env("HF_HOME").empty()
                                 ? (env("XDG_CACHE_HOME").empty() ? env("HOME") + "/.cache"
                                                                  : env("XDG_CACHE_HOME")) + "/huggingface"
                                 : env("HF_HOME");
    o.cache_dir = !cache_dir_override.empty() ? cache_dir_override
                  : !env("HF_HUB_CACHE").empty() ? env("HF_HUB_CACHE")
                                                 : home + "/hub";
    o.token = env("HF_TOKEN");
    if (o.token.empty()) o.token = read_line(fs::path(home) / "token");
    o.offline = offline || truthy(env("HF_HUB_OFFLINE"));
    return o;
}

std::vector<std::string> cache_roots(const HubOptions& o) {
    std::vector<std::string> r{o.cache_dir};
    auto add = [&](const std::string& p) {
        if (!p.empty() && std::find(r.begin(), r.end(), p) == r.end()) r.push_back(p);
    };
    if (!env("HF_HUB_CACHE").empty()) add(env("HF_HUB_CACHE"));
    if (!env("HF_HOME").empty()) add(env("HF_HOME") + "/hub");
    if (!env("XDG_CACHE_HOME").empty()) add(env("XDG_CACHE_HOME") + "/huggingface/hub");
    if (!env("HOME").empty()) add(env("HOME") + "/.cache/huggingface/hub");
    return r;
}

CachedRepo inspect_cache(const HubOptions& o, const std::string& repo,
                         const std::vector<std::string>& only) {
    CachedRepo best;
    best.repo = repo;
    for (const auto& root : cache_roots(o)) {
        const fs::path base = fs::path(root) / repo_folder(repo);
        std::error_code ec;
        if (fs::is_directory(base / "blobs", ec))
            for (auto& e : fs::directory_iterator(base / "blobs", ec))
                if (e.path().extension() == ".incomplete") best.partial_bytes += int64_t(e.file_size(ec));
        if (!fs::is_directory(base / "snapshots", ec)) continue;
        // the snapshot refs/<revision> names first, then any other
        std::vector<fs::path> snaps;
        const std::string rev = read_line(base / "refs" / o.revision);
        if (!rev.empty() && fs::is_directory(base / "snapshots" / rev)) snaps.push_back(base / "snapshots" / rev);
        for (auto& e : fs::directory_iterator(base / "snapshots", ec))
            if (e.is_directory() && std::find(snaps.begin(), snaps.end(), e.path()) == snaps.end())
                snaps.push_back(e.path());
        for (const auto& s : snaps) {
            CachedRepo c = inspect_snapshot(repo, s, only);
            c.partial_bytes = best.partial_bytes;
            if (c.complete()) return c;
            if (best.snapshot.empty()) best = c;
        }
    }
    return best;
}

namespace {
std::string hex_digest(EVP_MD_CTX* ctx) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx, md, &n);
    static const char* hex = "0123456789abcdef";
    std::string s;
    for (unsigned int i = 0; i < n; ++i) {
        s += hex[md[i] >> 4];
        s += hex[md[i] & 15];
    }
    return s;
}
using DigestCtx = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;
}  // namespace

std::string sha256_file(const std::string& path) {
    DigestCtx ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    BI_CHECK(ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1, path, "SHA-256 unavailable");
    std::ifstream f(path, std::ios::binary);
    BI_CHECK(f.good(), path, "cannot read");
    std::vector<char> buf(size_t(1) << 20);
    while (f) {
        f.read(buf.data(), std::streamsize(buf.size()));
        if (f.gcount() > 0) EVP_DigestUpdate(ctx.get(), buf.data(), size_t(f.gcount()));
    }
    return hex_digest(ctx.get());
}

std::string sha256_hex(const std::string& bytes) {
    DigestCtx ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    BI_CHECK(ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1, "sha256",
             "SHA-256 unavailable");
    EVP_DigestUpdate(ctx.get(), bytes.data(), bytes.size());
    return hex_digest(ctx.get());
}

namespace {

struct Hub {
    const HubOptions& o;
    std::string repo;

    HttpRequest req(const std::string& url, bool follow = true) const {
        HttpRequest r;
        r.url = url;
        r.follow_redirects = follow;
        if (!o.token.empty()) r.headers.push_back("Authorization: Bearer " + o.token);
        return r;
    }

    void check_status(const HttpResponse& r, const std::string& url, const std::string& what) const {
        if (r.status < 400) return;
        if (r.status == 401 || r.status == 403)
            fail(url, cat("HTTP ", r.status, ": '", repo, "' is gated or private: accept its license ",
                          "on the model page and set HF_TOKEN"));
        if (r.status == 404) fail(url, cat("HTTP 404: ", what, " not found on the hub"));
        fail(url, cat("HTTP ", r.status, " fetching ", what));
    }

    // The revision's commit and file list (the hub's model API).
    HubListing listing() const {
        const std::string url = o.endpoint + "/api/models/" + repo + "/revision/" + o.revision;
        const HttpResponse r = http_get(req(url));
        check_status(r, url, "repository '" + repo + "'");
        return parse_listing(r.body, url);
    }

    // Fetches one file of the commit into the cache and links it into the snapshot.
    void fetch(const fs::path& base, const std::string& commit, const std::string& file,
               Progress& progress) const {
        const fs::path link = base / "snapshots" / commit / file;
        if (fs::exists(link)) return;
        const std::string url = o.endpoint + "/" + repo + "/resolve/" + commit + "/" + file;
        const HttpResponse head = http_head(req(url, /*follow=*/false));
        check_status(head, url, "'" + file + "' in '" + repo + "'");
        const HubFileHead fh = parse_file_head(head, url);
        const std::string& etag = fh.etag;
        const int64_t size = fh.size;

        const fs::path blob = base / "blobs" / etag;
        fs::create_directories(base / "blobs");
        BlobLock lock(fs::path(o.cache_dir), repo_folder(repo), etag);
        std::error_code ec;
        if (!(fs::exists(blob) && (size < 0 || int64_t(fs::file_size(blob, ec)) == size))) {
            const std::string part = blob.string() + ".incomplete";
            const auto t0 = std::chrono::steady_clock::now();
            progress.stage(file, size >= 0 ? "downloading " + format_bytes(size) : "downloading");
            int64_t have = fs::exists(part) ? int64_t(fs::file_size(part, ec)) : 0;
            if (size >= 0 && have > size) {  // not a prefix of this file
                fs::remove(part, ec);
                have = 0;
            }
            if (have > 0) progress.tokens(have);
            for (int attempt = 0;; ++attempt) {
                if (size >= 0 && have == size) break;
                try {
                    const HttpResponse r = http_download(req(url), part, have,
                                                         [&](int64_t n) { progress.tokens(n); });
                    if (r.status == 416) {  // the range starts at the end: nothing left to send
                        fs::remove(part, ec);
                        have = 0;
                        BI_CHECK(attempt < o.retries, url, "the server refused to resume the download");
                        continue;
                    }
                    check_status(r, url, "'" + file + "' in '" + repo + "'");
                    const int64_t now = int64_t(fs::file_size(part));
                    if (r.status == 200 && have > 0) progress.tokens(-have);  // sent from the start
                    have = now;
                    if (size < 0 || have >= size) break;
                    BI_CHECK(attempt < o.retries, url, "the transfer ended after ", have, " of ",
                             size, " bytes; run again to resume");
                } catch (const Error& e) {
                    have = fs::exists(part) ? int64_t(fs::file_size(part, ec)) : 0;
                    if (std::string(e.what()).find("HTTP ") != std::string::npos || attempt >= o.retries)
                        fail(file, cat(e.what(), " (", have, " of ", size, " bytes kept in ", part,
                                       "; run again to resume)"));
                    warn(cat(file, ": transfer interrupted at ", have, " bytes; resuming"));
                }
            }
            const int64_t got = int64_t(fs::file_size(part));
            if (size >= 0 && got != size) {
                fs::remove(part, ec);
                fail(file, cat("downloaded ", got, " bytes, the hub says ", size,
                               "; the partial file was removed, run again"));
            }
            if (is_sha256(etag)) {
                progress.stage(file, "verifying SHA-256");
                const std::string sum = sha256_file(part);
                if (sum != etag) {
                    fs::remove(part, ec);
                    fail(file, cat("checksum mismatch: SHA-256 ", sum, ", the hub says ", etag,
                                   "; the download was removed, run again"));
                }
            }
            fs::rename(part, blob);
            progress.done(file, 0, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        } else {
            progress.skipped(file, size > 0 ? size : 0);
        }
        fs::create_directories(link.parent_path());
        const fs::path target = fs::relative(blob, link.parent_path());
        fs::create_symlink(target, link, ec);
        if (ec) fs::copy_file(blob, link, fs::copy_options::overwrite_existing);  // no symlinks here
    }
};

}  // namespace

std::string download_repo(const HubOptions& o, const std::string& repo,
                          const std::vector<std::string>& only) {
    BI_CHECK(!o.offline, repo, "offline (HF_HUB_OFFLINE=1 or --offline): not downloading");
    Hub hub{o, repo};
    const HubListing listing = hub.listing();  // commit and file names checked as plain paths
    const std::string& commit = listing.commit;
    const std::vector<std::string>& files = listing.files;
    const fs::path base = fs::path(o.cache_dir) / repo_folder(repo);
    const fs::path snap = base / "snapshots" / commit;
    fs::create_directories(snap);

    // the shard index first: it names the shards
    Progress progress({.label = "download " + repo, .items = "files", .tokens = "bytes", .bytes = true,
                       .quiet = o.quiet, .log_path = ""},
                      0);
    auto has = [&](const std::string& f) { return fs::exists(snap / f); };
    auto read = [&](const std::string& f) {
        hub.fetch(base, commit, f, progress);
        return io::read_file((snap / f).string());
    };
    for (const auto& f : only)
        BI_CHECK(std::find(files.begin(), files.end(), f) != files.end(), repo,
                 "the repository has no ", f);
    const Selection sel = select_files(has, files, read, only);
    for (const auto& m : sel.missing)
        BI_CHECK(std::find(sel.files.begin(), sel.files.end(), m) != sel.files.end(), repo,
                 "the repository has no ", m);
    progress.set_total(int64_t(sel.files.size()), 0);
    for (const auto& f : sel.files) hub.fetch(base, commit, f, progress);
    progress.finish();
    if (std::find(sel.files.begin(), sel.files.end(), boltz2::kMolsTar) != sel.files.end())
        unpack_boltz2_mols(snap.string());
    if (o.revision != commit) {
        fs::create_directories(base / "refs");
        io::write_file_atomic((base / "refs" / o.revision).string(), commit);
    }
    return snap.string();
}

std::string ensure_model(const HubOptions& o, const std::string& name) {
    std::vector<std::string> repos, only;
    if (const models::HubModel* k = models::find_hub_model(name)) {
        repos = k->repos;
        only = k->files;
    } else {
        std::string list;
        for (const auto& m : models::hub_models()) list += (list.empty() ? "" : ", ") + m.name;
        BI_CHECK(name.find('/') != std::string::npos, "--model", "unknown model '", name,
                 "': known models are ", list, " (or give an org/name repository id)");
        repos.push_back(name);
    }
    std::vector<CachedRepo> cached;
    for (const auto& r : repos) {
        cached.push_back(inspect_cache(o, r, only));
        if (cached.back().complete()) return cached.back().snapshot;
    }
    // Boltz-2 that `boltz predict` already downloaded into its own cache
    const bool boltz2 = repos == std::vector<std::string>{boltz2::kHubRepo};
    if (boltz2 && only.empty() && open_boltz2_cache(boltz_cache_path()))
        return boltz_cache_path();
    if (boltz2 && !only.empty()) {
        bool all = true;
        for (const auto& f : only) all &= fs::is_regular_file(fs::path(boltz_cache_path()) / f);
        if (all) return boltz_cache_path();
    }
    if (o.offline) {
        std::string msg;
        for (const auto& c : cached) {
            msg += msg.empty() ? "" : "; ";
            if (c.snapshot.empty()) {
                msg += "'" + c.repo + "' is not in the cache";
            } else {
                std::string miss;
                for (const auto& m : c.missing) miss += (miss.empty() ? "" : ", ") + m;
                msg += "'" + c.repo + "' in " + c.snapshot + " lacks " + miss;
            }
        }
        std::string roots;
        for (const auto& r : cache_roots(o)) roots += (roots.empty() ? "" : ", ") + r;
        if (boltz2 && only.empty())
            roots += cat(", and boltz's cache ", boltz_cache_path(), " for ", boltz2::kCheckpoint, " + ",
                         boltz2::kMolsDir, "/");
        else if (boltz2)
            roots += cat(", and boltz's cache ", boltz_cache_path(), " for ", only.front());
        fail("--model", cat("offline and ", msg, " (looked in ", roots, "); run `bioinfer weights ",
                            "--download ", name, "` with network access, or pass --weights DIR"));
    }
    std::string errors;
    for (const auto& r : repos) {
        try {
            return download_repo(o, r, only);
        } catch (const Error& e) {
            // the next repository holding the model, when this one does not exist
            if (std::string(e.what()).find("HTTP 404") == std::string::npos || &r == &repos.back()) {
                if (errors.empty()) throw;
                fail("--model", errors + "; " + e.what());
            }
            errors += (errors.empty() ? "" : "; ") + std::string(e.what());
        }
    }
    fail("--model", errors);
}

std::vector<std::string> prune_cache(const HubOptions& o, int64_t* freed_bytes) {
    std::vector<std::string> lines;
    int64_t freed = 0;
    std::set<std::string> folders;
    for (const auto& k : models::hub_models())
        for (const auto& r : k.repos) folders.insert(repo_folder(r));
    for (const auto& root : cache_roots(o)) {
        for (const auto& folder : folders) {
            const fs::path base = fs::path(root) / folder;
            std::error_code ec;
            if (!fs::is_directory(base, ec)) continue;
            // snapshots no ref points to
            std::set<std::string> kept;
            if (fs::is_directory(base / "refs", ec))
                for (auto& e : fs::directory_iterator(base / "refs", ec)) kept.insert(read_line(e.path()));
            if (fs::is_directory(base / "snapshots", ec) && !kept.empty()) {
                for (auto& e : fs::directory_iterator(base / "snapshots", ec)) {
                    if (kept.count(e.path().filename().string())) continue;
                    fs::remove_all(e.path(), ec);
                    lines.push_back("removed superseded snapshot " + e.path().string());
                }
            }
            // blobs: partial ones, and those no remaining snapshot links to
            std::set<std::string> used;
            if (fs::is_directory(base / "snapshots", ec))
                for (auto it = fs::recursive_directory_iterator(base / "snapshots", ec);
                     !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
                    if (it->is_symlink()) used.insert(fs::read_symlink(it->path()).filename().string());
            if (!fs::is_directory(base / "blobs", ec)) continue;
            for (auto& e : fs::directory_iterator(base / "blobs", ec)) {
                const std::string n = e.path().filename().string();
                const bool partial = e.path().extension() == ".incomplete";
                if (!partial && used.count(n)) continue;
                const int64_t sz = int64_t(e.file_size(ec));
                fs::remove(e.path(), ec);
                freed += sz;
                lines.push_back((partial ? "removed partial download " : "removed unused blob ") +
                                e.path().string() + " (" + format_bytes(sz) + ")");
            }
        }
    }
    if (freed_bytes) *freed_bytes = freed;
    return lines;
}

}  // namespace bioinfer::runtime
