// bioinfer weights: the models bioinfer knows, what of them is in the Hugging Face cache, and
// downloading or pruning it.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "args.h"
#include "bioinfer/error.h"
#include "models/registry.h"
#include "runtime/hub.h"
#include "runtime/progress.h"

namespace bioinfer::cli {

static const char* kWeightsHelp = R"(usage: bioinfer weights [--download NAME...] [--prune] [--json] [options]

Without arguments, lists every model bioinfer knows: name, Hugging Face repository, parameters,
download size, license, and whether (and where) it is in the cache.

  --download NAME...   download these models (names from the list, or org/name repositories)
                       into the cache, resuming partial downloads and verifying each file
  --prune              remove partial downloads and superseded snapshots of the known models
  --json               the list as JSON
  --cache-dir DIR      the hub cache (default: $HF_HUB_CACHE, else $HF_HOME/hub, else
                       ~/.cache/huggingface/hub: models downloaded with Python are found there)
  --offline            never use the network (as HF_HUB_OFFLINE=1)
  --quiet              no progress output

The hub is $HF_ENDPOINT (default https://huggingface.co); $HF_TOKEN (or $HF_HOME/token) is sent
for gated repositories.
)";

int weights_main(int argc, char** argv) {
    Args a = parse_args(argc, argv, {"cache-dir"}, {"help", "download", "prune", "json", "offline", "quiet"});
    if (a.has("help")) {
        std::fputs(kWeightsHelp, stdout);
        return 0;
    }
    const runtime::HubOptions hub = hub_options(a);
    BI_CHECK(a.has("download") || a.positional.empty(), "arguments",
             "model names go after --download (see --help)");
    if (a.has("download")) {
        BI_CHECK(!a.positional.empty(), "--download", "name at least one model (see `bioinfer weights`)");
        for (const auto& name : a.positional) {
            const std::string dir = runtime::ensure_model(hub, name);
            std::printf("%s\t%s\n", name.c_str(), dir.c_str());
        }
        return 0;
    }
    if (a.has("prune")) {
        int64_t freed = 0;
        for (const auto& line : runtime::prune_cache(hub, &freed)) std::printf("%s\n", line.c_str());
        std::printf("freed %s\n", runtime::format_bytes(freed).c_str());
        return 0;
    }
    nlohmann::json list = nlohmann::json::array();
    for (const auto& k : models::hub_models()) {
        // the first repository with a complete copy, else the first with anything
        runtime::CachedRepo found;
        for (const auto& r : k.repos) {
            runtime::CachedRepo c = runtime::inspect_cache(hub, r, k.files);
            if (c.complete()) {
                found = c;
                break;
            }
            if (found.repo.empty() || (found.snapshot.empty() && found.partial_bytes == 0)) found = c;
        }
        std::string status = found.complete()      ? "complete"
                             : !found.snapshot.empty() ? "incomplete"
                             : found.partial_bytes > 0 ? "partial download"
                                                       : "not cached";
        nlohmann::json files = found.files;
        list.push_back({{"name", k.name},
                        {"family", k.family},
                        {"repos", k.repos},
                        {"params", k.params},
                        {"size", found.complete() ? runtime::format_bytes(found.bytes) : k.approx_size},
                        {"license", k.license},
                        {"status", status},
                        {"repo", found.repo},
                        {"path", found.snapshot},
                        {"files", files},
                        {"missing", found.complete() ? nlohmann::json::array() : nlohmann::json(found.missing)},
                        {"partial_bytes", found.partial_bytes}});
    }
    if (a.has("json")) {
        std::printf("%s\n", nlohmann::json({{"cache", hub.cache_dir}, {"endpoint", hub.endpoint}, {"models", list}})
                                .dump(2)
                                .c_str());
        return 0;
    }
    std::printf("%-22s %-38s %-6s %-9s %-12s %s\n", "MODEL", "REPOSITORY", "PARAMS", "SIZE", "CACHE",
                "LICENSE");
    for (const auto& m : list) {
        std::string repos;
        for (const auto& r : m["repos"]) repos += (repos.empty() ? "" : " | ") + r.get<std::string>();
        std::printf("%-22s %-38s %-6s %-9s %-12s %s\n", m["name"].get<std::string>().c_str(), repos.c_str(),
                    m["params"].get<std::string>().c_str(), m["size"].get<std::string>().c_str(),
                    m["status"].get<std::string>().c_str(), m["license"].get<std::string>().c_str());
        if (!m["path"].get<std::string>().empty())
            std::printf("%-22s   %s\n", "", m["path"].get<std::string>().c_str());
    }
    std::printf("\ncache: %s (a model already there, downloaded by Python or bioinfer, is used as is)\n",
                hub.cache_dir.c_str());
    std::printf("download: bioinfer weights --download NAME, or --model NAME on first use\n");
    return 0;
}

}  // namespace bioinfer::cli
