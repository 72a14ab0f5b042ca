// Hub cache layout: <cache>/models--<org>--<name>/{refs/main, snapshots/<revision>/...}.
#include "runtime/hf_cache.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "bioinfer/error.h"

namespace bioinfer::runtime {

namespace fs = std::filesystem;

const std::vector<KnownModel>& known_models() {
    static const std::vector<KnownModel> m = [] {
        std::vector<KnownModel> v;
        for (const char* n : {"esm2_t6_8M_UR50D", "esm2_t12_35M_UR50D", "esm2_t30_150M_UR50D",
                              "esm2_t33_650M_UR50D", "esm2_t36_3B_UR50D", "esm2_t48_15B_UR50D"})
            v.push_back({n, {std::string("facebook/") + n}});
        v.push_back({"esmc-300m", {"biohub/ESMC-300M", "EvolutionaryScale/esmc-300m-2024-12"}});
        v.push_back({"esmc-600m", {"biohub/ESMC-600M", "EvolutionaryScale/esmc-600m-2024-12"}});
        v.push_back({"esmc-6b", {"biohub/ESMC-6B"}});
        v.push_back({"esmfold", {"facebook/esmfold_v1"}});
        v.push_back({"esmfold_v1", {"facebook/esmfold_v1"}});
        return v;
    }();
    return m;
}

static std::vector<fs::path> cache_roots() {
    std::vector<fs::path> r;
    if (const char* c = std::getenv("HF_HUB_CACHE")) r.emplace_back(c);
    if (const char* h = std::getenv("HF_HOME")) r.push_back(fs::path(h) / "hub");
    if (const char* x = std::getenv("XDG_CACHE_HOME")) r.push_back(fs::path(x) / "huggingface" / "hub");
    if (const char* home = std::getenv("HOME")) r.push_back(fs::path(home) / ".cache" / "huggingface" / "hub");
    return r;
}

std::string resolve_cached_model(const std::string& name) {
    std::vector<std::string> repos;
    if (name.find('/') != std::string::npos) {
        repos.push_back(name);
    } else {
        std::string list;
        for (auto& k : known_models()) {
            if (k.name == name) repos = k.repos;
            list += (list.empty() ? "" : ", ") + k.name;
        }
        BI_CHECK(!repos.empty(), "--model", "unknown model '", name, "': known models are ", list,
                 " (or give an org/name repository id)");
    }
    std::string looked;
    for (const auto& repo : repos) {
        const std::string folder =
            "models--" + repo.substr(0, repo.find('/')) + "--" + repo.substr(repo.find('/') + 1);
        for (const auto& root : cache_roots()) {
            const fs::path base = root / folder;
            looked += (looked.empty() ? "" : ", ") + base.string();
            if (!fs::is_directory(base / "snapshots")) continue;
            std::ifstream ref(base / "refs" / "main");
            std::string rev;
            if (ref && std::getline(ref, rev) && fs::is_directory(base / "snapshots" / rev))
                return (base / "snapshots" / rev).string();
            for (auto& e : fs::directory_iterator(base / "snapshots"))
                if (e.is_directory()) return e.path().string();
        }
    }
    std::string which;
    for (auto& r : repos) which += (which.empty() ? "'" : " or '") + r + "'";
    fail("--model", cat(which, " is not in the Hugging Face cache (looked in ", looked,
                        "); download it there or pass --weights DIR"));
}

}  // namespace bioinfer::runtime
