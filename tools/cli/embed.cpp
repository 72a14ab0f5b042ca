// bioinfer embed: ESM-2 / ESM C embeddings for a FASTA file, a folder of them, or a bare sequence.
#include <cstdio>

#include "args.h"
#include "bioinfer/error.h"
#include "io/model_dir.h"
#include "models/language_model.h"
#include "runtime/embed_pipeline.h"

namespace bioinfer::cli {

static const char* kEmbedHelp =
    R"(usage: bioinfer embed INPUT (--weights DIR | --model NAME) --out-dir DIR [options]

INPUT is a FASTA file, a folder of FASTA files, or a bare protein sequence.

  --weights DIR        Hugging Face ESM-2 or ESM C directory (config.json + model.safetensors)
  --model NAME         e.g. esm2_t33_650M_UR50D or esmc-300m (see `bioinfer weights`): taken
                       from the Hugging Face cache, downloaded there on first use
  --out-dir DIR        where <id>.npz (or embeddings.h5), manifest.json and results.json go
  --repr-layers L,...  layers to output, negative counts from the end (default -1)
  --include LIST       mean,per_tok,bos,contacts,logits,pll (default mean); pll: the sequence's
                       pseudo-log-likelihood, sum of log p(residue) with it masked (L passes)
  --toks-per-batch N   tokens per batch, run packed (default 4096)
  --truncate N         keep the first N residues of longer records (default 1022; 0 = off)
  --format npz|h5      one npz per record, or one HDF5 file for all (default npz)
  --precision P        fp32 (exact, default); bf16: linear layers on bf16 weights with fp32
                       accumulation (AMX / AVX-512-BF16 where present); int8: linear layers on
                       int8 weights (per output channel) and activations (per token, on the
                       fly), int32 accumulation; norms, attention and the LM head stay fp32
  --fast               same as --precision bf16
)";

static const char* kEmbedHelpTail = R"(
A record that cannot run (a letter outside the alphabet, a duplicate id) is reported and the
others go on. Exit status: 0 all records done, 1 all failed, 2 some failed (results.json lists them).
Snake-case spellings (--out_dir, --repr_layers, --toks_per_batch) are accepted too.
)";

int embed_main(int argc, char** argv) {
    Args a = parse_job_args(argc, argv,
                            {"weights", "model", "out-dir", "repr-layers", "include", "toks-per-batch",
                             "truncate", "format", "precision"},
                            {"fast"});
    if (a.has("help")) {
        std::fputs(kEmbedHelp, stdout);
        std::fputs(job_options_help(), stdout);
        std::fputs(kEmbedHelpTail, stdout);
        return 0;
    }
    BI_CHECK(a.positional.size() == 1, "arguments", "expected one INPUT, got ", a.positional.size(),
             " (see --help)");
    runtime::EmbedOptions opts;
    apply_job_options(a, opts);
    opts.repr_layers = a.get_int_list("repr-layers", {-1});
    if (a.has("include")) runtime::parse_include(a.get("include"), opts);
    opts.toks_per_batch = a.get_int_in("toks-per-batch", 4096, 1, kMaxTokensOption);
    const long long truncate = a.get_int_in("truncate", 1022, 0, kMaxTokensOption);
    opts.format = a.get("format", "npz");
    BI_CHECK(opts.format == "npz" || opts.format == "h5", "--format", "expected npz or h5, got '",
             opts.format, "'");
    opts.precision = apply_precision(a, /*allow_int8=*/true);

    const std::string dir = weights_dir_from(a);
    opts.model_label = a.has("model") ? a.get("model") : dir;
    // Validate every input before loading weights or writing anything: opening the directory
    // reads config.json and the safetensors headers only.
    const io::ModelDir model_dir = io::ModelDir::open(dir);
    auto records = runtime::collect_records(a.positional[0], truncate, lm::vocab_of(model_dir));
    runtime::require_some_valid(records);
    runtime::Progress progress(runtime::embed_progress_options(opts), int64_t(records.size()));
    progress.stage(opts.model_label, "loading weights", 0, /*plain_line=*/false);
    const double t_load = progress.elapsed();
    auto model = lm::load(model_dir);
    opts.load_seconds = progress.elapsed() - t_load;
    opts.progress = &progress;
    auto stats = runtime::run_embed(*model, records, opts, /*write_outputs=*/true);
    runtime::print_results_summary("embed", stats.results,
                                   runtime::shard_dir(opts.out_dir, opts.shard), opts.quiet);
    return runtime::exit_status(stats.results);
}

}  // namespace bioinfer::cli
