// bioinfer predict: structures and confidences for a FASTA file, a folder of them, or a sequence.
#include <algorithm>
#include <cstdio>

#include "args.h"
#include "bioinfer/error.h"
#include "io/model_dir.h"
#include "models/structure_model.h"
#include "runtime/fold_pipeline.h"
#include "runtime/inputs.h"

namespace bioinfer::cli {

static const char* kPredictHelp = R"(usage: bioinfer predict INPUT (--model esmfold | --weights DIR) --out-dir DIR [options]

INPUT is a FASTA file, a folder of FASTA files, or a bare protein sequence. Chains of a complex
are separated by ':' (joined by a 25-glycine linker that the outputs leave out).

Writes per target <id>.pdb (or .cif) with pLDDT (0-100) as B-factors and one chain id per chain,
and <id>.json: mean pLDDT, pTM, per-residue pLDDT, timings.

  --model NAME         esmfold (facebook/esmfold_v1): taken from the Hugging Face cache,
                       downloaded there on first use
  --weights DIR        an EsmForProteinFolding directory (config.json + model.safetensors)
  --out-dir DIR        where the outputs go
  --output-format F    pdb or cif (mmcif is accepted for cif; default pdb)
  --write-pae          also <id>_pae.npy (predicted aligned error, L x L) and <id>_plddt_pae.png
  --num-recycles N     extra trunk passes (default: the model's, 3 for ESMFold: 4 passes)
  --chunk-size N       pair rows processed at a time in the trunk (default: automatic)
  --max-memory GIB     memory a fold may use (default: what the system has available); longer
                       targets are refused before any work starts
)";

static const char* kPredictHelpTail = R"(
A target that fails (bad letters, too long for the memory) is reported and the others go on.
Exit status: 0 all targets done, 1 all failed, 2 some failed (results.json lists them).
Boltz's spellings work too: --out_dir, --output_format, --recycling_steps, --cache, --devices,
--write_full_pae, --override.
)";

int predict_main(int argc, char** argv) {
    Args a = parse_job_args(argc, argv,
                            {"model", "weights", "out-dir", "output-format", "num-recycles",
                             "chunk-size", "max-memory"},
                            {"write-pae"});
    if (a.has("help")) {
        std::fputs(kPredictHelp, stdout);
        std::fputs(job_options_help(), stdout);
        std::fputs(kPredictHelpTail, stdout);
        return 0;
    }
    BI_CHECK(a.positional.size() == 1, "arguments", "expected one INPUT, got ", a.positional.size(),
             " (see --help)");
    runtime::PredictOptions opts;
    apply_job_options(a, opts);
    opts.format = a.get("output-format", "pdb");
    if (opts.format == "mmcif") opts.format = "cif";
    BI_CHECK(opts.format == "pdb" || opts.format == "cif", "--output-format",
             "expected pdb or cif, got '", opts.format, "'");
    opts.write_pae = a.has("write-pae");
    const long long recycles = a.get_int("num-recycles", -1);
    BI_CHECK(recycles >= -1 && recycles <= 64, "--num-recycles", "expected 0..64, got ", recycles);
    opts.num_recycles = int(recycles);
    opts.chunk = a.get_int("chunk-size", 0);
    BI_CHECK(opts.chunk >= 0, "--chunk-size", "must be >= 0");

    const std::string dir = weights_dir_from(a);
    opts.model_label = a.has("model") ? a.get("model") : dir;
    // Everything is checked before weights load or anything is written.
    const io::ModelDir model_dir = io::ModelDir::open(dir);
    const std::unique_ptr<fold::ModelSpec> spec = fold::load_spec(model_dir);
    auto records = runtime::collect_fold_records(a.positional[0], *spec);
    int64_t budget = runtime::available_memory_bytes();
    if (a.has("max-memory")) {
        const long long gib = a.get_int("max-memory", 0);
        BI_CHECK(gib > 0, "--max-memory", "expected a positive number of GiB, got ", gib);
        budget = budget > 0 ? std::min<int64_t>(budget, int64_t(gib) << 30) : int64_t(gib) << 30;
    }
    // the memory estimate needs only the spec: targets too long fail before weights load
    opts.memory_budget = budget;
    for (auto& r : records)
        if (r.error.empty())
            r.error = runtime::fold_memory_error(*spec, r, budget / int64_t(opts.workers.size()));
    runtime::require_some_valid(records);
    runtime::Progress progress(runtime::predict_progress_options(opts), int64_t(records.size()));
    progress.stage(opts.model_label, "loading weights", 0, /*plain_line=*/false);
    const double t_load = progress.elapsed();
    auto model = fold::load(model_dir);
    opts.load_seconds = progress.elapsed() - t_load;
    opts.progress = &progress;
    const auto stats = runtime::run_predict(*model, records, opts);
    if (!opts.quiet)
        std::fprintf(stderr, "%s\n", runtime::results_summary("predict", stats.results, runtime::shard_dir(opts.out_dir, opts.shard)).c_str());
    return runtime::exit_status(stats.results);
}

}  // namespace bioinfer::cli
