// bioinfer bench embed: warm timing of the embedding forward on an input set; JSON on stdout.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <nlohmann/json.hpp>

#include "args.h"
#include "bioinfer/error.h"
#include "core/threads.h"
#include "io/model_dir.h"
#include "models/language_model.h"
#include "ops/ops.h"
#include "runtime/embed_pipeline.h"

namespace bioinfer::cli {

static const char* kBenchHelp = R"(usage: bioinfer bench embed INPUT (--weights DIR | --model NAME) [options]

Loads the model once, runs one warm-up pass over INPUT, then --repeat timed passes (forward
only, outputs not written) and prints JSON: tokens/s of the fastest pass and peak RSS.

  --repeat N           timed passes (default 3)
  --toks-per-batch N   padded tokens per batch (default 4096)
  --include LIST       as for embed (default mean)
  --threads N          worker threads (default: all cores)
  --precision P        fp32 (default) or bf16 (--fast)
)";

int bench_main(int argc, char** argv) {
    Args a = parse_args(argc, argv, {"weights", "model", "repeat", "toks-per-batch", "threads", "include", "precision"},
                        {"help", "fast"});
    if (a.has("help") || a.positional.empty()) {
        std::fputs(kBenchHelp, a.has("help") ? stdout : stderr);
        return a.has("help") ? 0 : 2;
    }
    BI_CHECK(a.positional.size() == 2 && a.positional[0] == "embed", "arguments",
             "expected 'bench embed INPUT'");
    set_num_threads(int(a.get_int("threads", 0)));
    runtime::EmbedOptions opts;
    opts.precision = apply_precision(a);
    opts.toks_per_batch = a.get_int("toks-per-batch", 4096);
    if (a.has("include")) runtime::parse_include(a.get("include"), opts);
    const int repeat = int(a.get_int("repeat", 3));
    BI_CHECK(repeat > 0, "--repeat", "must be positive");
    const io::ModelDir model_dir = io::ModelDir::open(weights_dir_from(a));
    auto records = runtime::collect_records(a.positional[1], 1022,
                                            lm::vocab_of(lm::detect_architecture(model_dir)));
    auto model = lm::load(model_dir);
    runtime::run_embed(*model, records, opts, false);  // warm-up
    double best = 1e300;
    runtime::EmbedStats st;
    for (int r = 0; r < repeat; ++r) {
        st = runtime::run_embed(*model, records, opts, false);
        best = std::min(best, st.seconds);
    }
    // VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss across fork and exec, so a
    // benchmark driver's own peak would leak into ours.
    double peak_mb = 0;
    {
        std::ifstream st("/proc/self/status");
        for (std::string line; std::getline(st, line);)
            if (line.rfind("VmHWM:", 0) == 0) peak_mb = std::stod(line.substr(6)) / 1024.0;
    }
    nlohmann::json j = {{"impl", "bioinfer"},
                        {"kernels", ops::backend_name()},
                        {"threads", num_threads()},
                        {"precision", opts.precision},
                        {"sequences", st.sequences},
                        {"tokens", st.tokens},
                        {"seconds", best},
                        {"tokens_per_s", double(st.tokens) / best},
                        {"peak_rss_mb", peak_mb},
                        {"repeat", repeat}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
}

}  // namespace bioinfer::cli
