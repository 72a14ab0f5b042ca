// The Hugging Face hub cache for the models the registry names (models/registry.h): where their
// files live on disk (the hub's own cache layout, shared with Python's huggingface_hub), and the
// downloader that fills it (resumable, verified, renamed into place only when complete).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace bioinfer::runtime {

// A folder holding the registry model `name` in its own tool's cache layout (boltz's ~/.boltz:
// boltz2_conf.ckpt and mols/, or mols.tar, unpacked here), as given with --cache; "" when it is
// not one.
std::string model_in_own_cache(const std::string& name, const std::string& folder);

struct HubOptions {
    std::string endpoint;   // $HF_ENDPOINT, else https://huggingface.co
    std::string cache_dir;  // where downloads go: $HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/...
    std::string token;      // $HF_TOKEN, else $HF_HOME/token
    std::string revision = "main";
    bool offline = false;   // $HF_HUB_OFFLINE=1 or --offline
    int retries = 5;        // resumed attempts per file after an interrupted transfer
    bool quiet = false;
    // From the environment; cache_dir_override (--cache-dir) wins over it.
    static HubOptions from_env(const std::string& cache_dir_override = "", bool offline = false);
};

// What a download reads from the hub's answers, checked (errors name `url`): every name that
// becomes a path in the cache is a plain relative path inside it. Exposed for the fuzz target.
struct HttpResponse;
struct HubListing {
    std::string commit;              // the revision's commit (a folder name under snapshots/)
    std::vector<std::string> files;  // the repository's files
};
// The model API's answer for a revision: {"sha": ..., "siblings": [{"rfilename": ...}, ...]}.
HubListing parse_listing(const std::string& body, const std::string& url);
struct HubFileHead {
    std::string etag;   // the blob's name (an LFS file's SHA-256)
    int64_t size = -1;  // -1 when the hub sent none
};
// A file's HEAD answer: X-Linked-Etag or ETag (weak prefix and quotes dropped), X-Linked-Size or
// Content-Length.
HubFileHead parse_file_head(const HttpResponse& head, const std::string& url);
// The shard files a model.safetensors.index.json names (its weight_map's values), sorted, unique.
std::vector<std::string> index_shards(const std::string& text, const std::string& where);

// Cache folders searched for a repository, the download target first.
std::vector<std::string> cache_roots(const HubOptions& o);

// What is on disk for one repository.
struct CachedRepo {
    std::string repo;
    std::string snapshot;               // snapshot folder; empty when none
    std::vector<std::string> files;     // files the model needs, relative to the snapshot
    std::vector<std::string> missing;   // what it still lacks ("config.json", "model.safetensors")
    int64_t bytes = 0;                  // size of the needed files present
    int64_t partial_bytes = 0;          // *.incomplete blobs
    bool complete() const { return !snapshot.empty() && missing.empty(); }
};

// The best cached copy of `repo` across the cache roots (a complete one if any).
// `only`: these files rather than those chosen from the listing (HubModel::files).
CachedRepo inspect_cache(const HubOptions& o, const std::string& repo,
                         const std::vector<std::string>& only = {});

// --model NAME (registry name or "org/name") -> a complete snapshot folder, downloading what is
// missing unless offline. Offline and incomplete: an error naming exactly what is missing.
std::string ensure_model(const HubOptions& o, const std::string& name);

// Downloads (or completes) one repository's needed files into o.cache_dir; returns the snapshot.
std::string download_repo(const HubOptions& o, const std::string& repo,
                          const std::vector<std::string>& only = {});

// Removes partial downloads (*.incomplete) and snapshots other than the one refs/main names,
// with blobs nothing links to any more, in the known models' cache folders. Returns lines saying
// what was removed and the bytes freed.
std::vector<std::string> prune_cache(const HubOptions& o, int64_t* freed_bytes);

// Hex SHA-256 of a file.
std::string sha256_file(const std::string& path);
// Hex SHA-256 of bytes.
std::string sha256_hex(const std::string& bytes);

}  // namespace bioinfer::runtime
