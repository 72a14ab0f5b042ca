// bioinfer predict: structures and confidences for a FASTA file, a folder of them, or a sequence.
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>

#include "args.h"
#include "bioinfer/error.h"
#include "io/boltz_outputs.h"
#include "io/model_dir.h"
#include "models/structure_model.h"
#include "runtime/boltz_cache.h"
#include "runtime/fold_pipeline.h"
#include "runtime/inputs.h"
#include "runtime/msa_server.h"
#include "runtime/screening.h"

namespace bioinfer::cli {

static const char* kPredictHelp =
    R"(usage: bioinfer predict INPUT (--model esmfold|esmfold2|esmfold2-fast|boltz2 | --weights DIR) --out-dir DIR [options]

ESMFold: INPUT is a FASTA file, a folder of FASTA files, or a bare protein sequence. Chains of a
complex are separated by ':' (joined by a 25-glycine linker that the outputs leave out). Writes
per target <id>.pdb (or .cif) with pLDDT (0-100) as B-factors and one chain id per chain, and
<id>.json: mean pLDDT, pTM, per-residue pLDDT, timings.

ESMFold2: INPUT as for ESMFold; chains separated by ':' fold as separate chains (no linker),
every heavy atom written. --diffusion-samples N writes <id>.pdb and <id>_sample<k>.pdb, best
first by pTM; --num-recycles sets its loops; --seed, --sampling-steps, --max-parallel-samples and
--step-scale apply as for Boltz-2. MSAs are optional: --msa-dir DIR holds ID.a3m for a one-chain
record ID, or ID_A.a3m, ID_B.a3m, ... per chain (rows paired across chains by the headers'
key=N, as the esm package pairs them); --max-msa-seqs N keeps the first N rows of the paired MSA
(default 1024, the official model's depth).

Boltz-2: INPUT is an input file as `boltz predict` reads it, or a folder of them: boltz's YAML
(version 1; sequences of protein, dna, rna with id, sequence, msa: PATH.a3m|PATH.csv|empty) or
FASTA with one record per chain (>A|protein|PATH.a3m). Each file is one target named after it.
Writes boltz's layout: DIR/boltz_results_<INPUT>/predictions/<name>/<name>_model_<k>.cif (or
.pdb) ranked by confidence score with pLDDT as B-factors, confidence_<name>_model_<k>.json,
pae_/pde_/plddt_<name>_model_<k>.npz, and <name>_plddt_pae.png; results.json beside predictions/.

  (boltz's line runs as is: without --model or --weights, --cache DIR, $BOLTZ_CACHE or a YAML
  INPUT selects Boltz-2 from boltz's cache, and --out-dir defaults to ./ for it)
  --model NAME         esmfold (facebook/esmfold_v1), esmfold2 / esmfold2-fast (biohub/ESMFold2,
                       biohub/ESMFold2-Fast) or boltz2 (boltz-community/boltz-2, or boltz's own
                       cache ~/.boltz when it holds boltz2_conf.ckpt and mols/): taken from the
                       Hugging Face cache, downloaded there on first use
  --weights DIR        an EsmForProteinFolding or EsmFold2Model directory (config.json +
                       safetensors), or a folder (or file) with a Boltz-2 checkpoint
                       (boltz2_conf.ckpt)
  --out-dir DIR        where the outputs go
  --output-format F    pdb or cif (mmcif is accepted for cif; default pdb for ESMFold, cif for
                       Boltz-2)
  --write-pae          ESMFold: also <id>_pae.npy (predicted aligned error, L x L) and
                       <id>_plddt_pae.png (Boltz-2 always writes its pae_/pde_ files)
  --num-recycles N     extra trunk passes (default: the model's: 3 for ESMFold and Boltz-2)
  --chunk-size N       pair rows processed at a time in the trunk (default: automatic)
  --max-memory GIB     memory a fold may use (default: what the system has available); longer
                       targets are refused before any work starts

Boltz-2 sampling (boltz 2.2's defaults):
  --sampling-steps N        diffusion steps (200)
  --diffusion-samples N     structures per target (1)
  --max-parallel-samples N  samples denoised in one batch (5); results equal one at a time
  --step-scale X            the sampler's step scale (1.5)
  --seed N                  seeds every random draw (0)
  --use-potentials          boltz's inference-time potentials: physical terms (chain overlap,
                            covalent connections, ligand geometry, chirality, stereo and planar
                            bonds) steer the sampler, and 3 particles per sample are resampled by
                            their energies (Feynman-Kac steering); about 3x the sampler's time
  --max-msa-seqs N          MSA rows kept per chain, unique rows in file order (8192; ESMFold2:
                            the first N rows of the paired MSA, 1024)
  --subsample-msa           each trunk pass's MSA module keeps --num-subsampled-msa rows drawn
                            at random (boltz's --subsample_msa), seeded by --seed; boltz draws
                            them from torch's global random stream, which cannot be reproduced:
                            the same distribution, other rows
  --num-subsampled-msa N    rows kept with --subsample-msa (1024)
  --method NAME             the experimental method the structure is conditioned on (boltz's
                            method conditioning; any case): x-ray diffraction (default), md,
                            electron microscopy, solution nmr, afdb, other, ...; an unknown name
                            is refused with boltz's list
  --write-embeddings        also predictions/<name>/embeddings_<name>.npz as boltz writes it: the
                            trunk's final single (s: 1 x N x token_s) and pair (z: 1 x N x N x
                            token_z) representations, float32

MSA server (Boltz-2 and ESMFold2; boltz's flags): proteins that name no MSA get the ColabFold
MMseqs2 server's, unpaired per protein and paired across a target's proteins (Boltz-2: boltz's
CSVs in OUT/boltz_results_<INPUT>/msa/; ESMFold2: OUT/msa/<id>_<chain>.a3m).
  --use_msa_server          ask the server
  --msa_server_url URL      the server (https://api.colabfold.com)
  --msa_pairing_strategy S  greedy or complete (greedy)
  --msa_server_username U, --msa_server_password P
                            basic authentication ($BOLTZ_MSA_USERNAME, $BOLTZ_MSA_PASSWORD)
  --api_key_header H, --api_key_value V
                            an API key header (X-API-Key; $MSA_API_KEY_VALUE)
  --msa-cache DIR           answers cached by sequence ($XDG_CACHE_HOME/bioinfer/msa, else
                            ~/.cache/bioinfer/msa); --offline answers from it alone

Boltz-2 binding affinity (inputs with `properties: - affinity: binder: <ligand chain>`):
boltz's affinity stage runs the affinity model on the best structure, cropped around the binder,
and writes predictions/<name>/affinity_<name>.json (affinity_pred_value: log10 IC50 in uM;
affinity_probability_binary; and per ensemble member).
  --affinity-checkpoint F   the affinity model (default: boltz2_aff.ckpt beside the structure
                            checkpoint, as in boltz's cache)
  --sampling-steps-affinity N     its diffusion steps (200)
  --diffusion-samples-affinity N  its samples, the one with the best ipTM is scored (5)
  --affinity-mw-correction  boltz's molecular-weight correction of affinity_pred_value

Boltz-2 screening:
  --ligands FILE            one target per ligand of FILE (a SMILES per line, then an optional
                            name): INPUT (one file) with the ligand added as a chain; writes
                            screening.csv (every ligand's confidence scores, and its affinity
                            with --affinity) beside results.json
  --ligand-chain ID         the ligand's chain id (default: the first of L..Z, A..K that INPUT
                            does not use)
  --affinity                predict each ligand's binding affinity (the ligand is the binder)
)";

static const char* kPredictHelpTail = R"(
A target that fails (bad letters, too long for the memory) is reported and the others go on.
Exit status: 0 all targets done, 1 all failed, 2 some failed (results.json lists them).
Boltz's spellings work too: --out_dir, --output_format, --recycling_steps, --sampling_steps,
--diffusion_samples, --max_parallel_samples, --step_scale, --max_msa_seqs, --cache, --devices,
--write_full_pae, --write_full_pde, --override, --affinity_checkpoint,
--sampling_steps_affinity, --diffusion_samples_affinity, --affinity_mw_correction,
--use_potentials, --subsample_msa, --num_subsampled_msa, --write_embeddings.
Accepted and changing nothing: --num_workers N and --preprocessing-threads N (boltz's data-loader
workers and preprocessing pool; bioinfer reads every input in-process, once) and --no_kernels
(boltz's cuEquivariance kernels switch; this build runs on the CPU).
)";

// The options of predict that belong to one model or another (ModelSpec::options says which).
static const char* const kModelOptions[] = {
    "sampling-steps",          "diffusion-samples",          "max-parallel-samples",
    "step-scale",              "seed",                       "max-msa-seqs",
    "msa-dir",                 "use-potentials",             "sampling-steps-affinity",
    "diffusion-samples-affinity", "affinity-mw-correction",  "affinity-checkpoint",
    "affinity",                "ligands",                    "ligand-chain",
    "method",                  "subsample-msa",              "num-subsampled-msa",
    "write-embeddings",        "use-msa-server"};

// Set while an MSA server is asked: Ctrl-C (or a TERM) stops the client between requests, and
// the run ends with one line and no partial MSA.
static std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted = true; }

// The MSA server client's options from boltz's flags and environment variables.
static runtime::MsaServerOptions msa_server_options(const Args& a, bool quiet) {
    runtime::MsaServerOptions o;
    o.url = a.get("msa-server-url", o.url);
    o.pairing = a.get("msa-pairing-strategy", o.pairing);
    o.username = a.get("msa-server-username", "");
    o.password = a.get("msa-server-password", "");
    o.api_key_header = a.get("api-key-header", o.api_key_header);
    o.api_key_value = a.get("api-key-value", "");
    runtime::msa_server_options_from_env(o);
    o.offline = hub_options(a).offline;
    o.cache_dir = a.get("msa-cache", runtime::default_msa_cache_dir());
    if (!quiet) o.log = [](const std::string& line) { std::fprintf(stderr, "predict: %s\n", line.c_str()); };
    o.cancelled = [] { return g_interrupted.load(); };
    return o;
}

int predict_main(int argc, char** argv) {
    Args a = parse_job_args(
        argc, argv,
        {"model", "weights", "out-dir", "output-format", "num-recycles", "chunk-size", "max-memory",
         "sampling-steps", "diffusion-samples", "max-parallel-samples", "step-scale", "seed",
         "max-msa-seqs", "msa-dir", "ligands", "ligand-chain", "affinity-checkpoint",
         "sampling-steps-affinity", "diffusion-samples-affinity", "method", "num-subsampled-msa",
         "num-workers", "preprocessing-threads", "msa-server-url", "msa-pairing-strategy",
         "msa-server-username", "msa-server-password", "api-key-header", "api-key-value",
         "msa-cache"},
        {"write-pae", "write-full-pde", "affinity", "affinity-mw-correction", "use-potentials",
         "subsample-msa", "write-embeddings", "no-kernels", "use-msa-server"});
    if (a.has("help")) {
        std::fputs(kPredictHelp, stdout);
        std::fputs(job_options_help(), stdout);
        std::fputs(kPredictHelpTail, stdout);
        return 0;
    }
    BI_CHECK(a.positional.size() == 1, "arguments", "expected one INPUT, got ", a.positional.size(),
             " (see --help)");
    // boltz's command line names no model and no output folder: --cache DIR, $BOLTZ_CACHE or a
    // YAML input (only Boltz-2 reads YAML) select Boltz-2 from boltz's cache, and the outputs go
    // under ./ as boltz writes them (checked below: only Boltz-2's layout has that default)
    const std::string input_ext = std::filesystem::path(a.positional[0]).extension().string();
    const char* boltz_cache_env = std::getenv("BOLTZ_CACHE");
    if (!a.has("model") && !a.has("weights") &&
        (a.has("cache-dir") || (boltz_cache_env && *boltz_cache_env) || input_ext == ".yaml" ||
         input_ext == ".yml"))
        a.opts["model"] = "boltz2";
    const bool out_defaulted = !a.has("out-dir");
    if (out_defaulted) a.opts["out-dir"] = ".";
    runtime::PredictOptions opts;
    apply_job_options(a, opts);
    const std::string format_given = a.get("output-format", "");
    opts.format = format_given == "mmcif" ? "cif" : format_given;
    BI_CHECK(opts.format.empty() || opts.format == "pdb" || opts.format == "cif",
             "--output-format", "expected pdb or cif, got '", opts.format, "'");
    opts.write_pae = a.has("write-pae");
    fold::Options& fo = opts.fold;
    fo.num_recycles = int(a.get_int_in("num-recycles", -1, 0, 64));
    fo.chunk = a.get_int_in("chunk-size", 0, 0, kMaxTokensOption);
    const auto positive = [&](const char* key, long long dflt, long long max) {
        return a.get_int_in(key, dflt, 1, max);
    };
    fo.sampling_steps = int(positive("sampling-steps", -1, 100000));
    fo.num_samples = int(positive("diffusion-samples", 1, 1000));
    fo.max_parallel_samples = int(positive("max-parallel-samples", -1, 1000));
    fo.max_msa_seqs = positive("max-msa-seqs", -1, 1 << 24);
    if (a.has("msa-dir")) {
        opts.msa_dir = a.get("msa-dir");
        BI_CHECK(std::filesystem::is_directory(opts.msa_dir), "--msa-dir", opts.msa_dir,
                 " is not a folder");
    }
    fo.affinity_sampling_steps = int(positive("sampling-steps-affinity", -1, 100000));
    fo.affinity_samples = int(positive("diffusion-samples-affinity", -1, 1000));
    fo.affinity_mw_correction = a.has("affinity-mw-correction");
    fo.use_potentials = a.has("use-potentials");
    // boltz's --num_subsampled_msa applies with --subsample_msa only (checked either way)
    const long long subsampled = positive("num-subsampled-msa", 1024, 1 << 24);
    fo.msa_subsample = a.has("subsample-msa") ? subsampled : 0;
    fo.write_embeddings = a.has("write-embeddings");
    fo.method = a.get("method", "");
    BI_CHECK(!a.has("method") || !fo.method.empty(), "--method", "needs a method name");
    // boltz's data-loader workers and preprocessing pool: accepted, checked, changing nothing
    a.get_int_in("num-workers", 0, 0, 1 << 16);
    a.get_int_in("preprocessing-threads", 1, 1, 1 << 16);
    fo.seed = uint64_t(a.get_int_in("seed", 0, 0, std::numeric_limits<long long>::max()));
    if (a.has("step-scale")) {
        const std::string v = a.get("step-scale");
        char* end = nullptr;
        fo.step_scale = std::strtod(v.c_str(), &end);
        BI_CHECK(end && *end == 0 && fo.step_scale > 0 && fo.step_scale < 100, "--step-scale",
                 "expected a positive number, got '", v, "'");
    }

    // a model's own cache given as --cache (boltz's: boltz2_conf.ckpt and mols/) is the model
    std::string dir = a.has("model") && a.has("cache-dir")
                          ? runtime::model_in_own_cache(a.get("model"), a.get("cache-dir"))
                          : std::string();
    if (dir.empty()) dir = weights_dir_from(a);
    opts.model_label = a.has("model") ? a.get("model") : dir;
    // Everything is checked before weights load or anything is written.
    const io::ModelDir model_dir = io::ModelDir::open(dir);
    const std::unique_ptr<fold::ModelSpec> spec = fold::load_spec(model_dir);
    // the options one model or another takes: each refused for a model that does not
    for (const char* k : kModelOptions)
        if (a.has(k) && !spec->takes_option(k)) {
            std::string own;
            for (const std::string& o : spec->options()) own += (own.empty() ? "--" : ", --") + o;
            fail(std::string("--") + k, cat("not an option of ", spec->architecture(),
                                            own.empty() ? " (it takes none of the models' own "
                                                          "options)"
                                                        : " (its own: " + own + ")"));
        }
    spec->check_options(fo);
    BI_CHECK(!out_defaulted || spec->output_layout() == fold::ModelSpec::Layout::Boltz, "arguments",
             "--out-dir is required");
    if (opts.format.empty()) opts.format = spec->default_output_format();
    // boltz predict's layout goes under DIR/boltz_results_<INPUT>
    if (spec->output_layout() == fold::ModelSpec::Layout::Boltz)
        opts.out_dir = io::boltz_results_dir(opts.out_dir, a.positional[0]);
    BI_CHECK(a.has("ligands") || !a.has("ligand-chain"), "--ligand-chain", "needs --ligands");
    BI_CHECK(a.has("ligands") || !a.has("affinity"), "--affinity",
             "needs --ligands (an input file names its binder under `properties`)");
    if (a.has("affinity-checkpoint"))
        BI_CHECK(std::filesystem::is_regular_file(a.get("affinity-checkpoint")),
                 "--affinity-checkpoint", a.get("affinity-checkpoint"), " is not a file");
    std::vector<runtime::ScreeningLigand> ligands;
    std::vector<runtime::FoldRecord> records;
    // every input is read once, here, as the options say (Boltz-2's MSA rows)
    fold::ReadOptions read;
    read.max_msa_seqs = fo.max_msa_seqs;
    // boltz's --use_msa_server: proteins without an MSA get the server's, written under msa/
    std::optional<runtime::MsaServerOptions> server;
    if (a.has("use-msa-server")) {
        server = msa_server_options(a, opts.quiet);
        std::signal(SIGINT, on_interrupt);
        std::signal(SIGTERM, on_interrupt);
        if (spec->reads_whole_files()) read.msa_fetch = runtime::boltz_msa_fetch(*server, opts.out_dir + "/msa");
    }
    if (a.has("ligands")) {
        ligands = runtime::read_screening_ligands(a.get("ligands"));
        const runtime::ScreeningInput input =
            runtime::read_screening_input(a.positional[0], *spec, read);
        const std::string chain =
            a.has("ligand-chain") ? a.get("ligand-chain") : runtime::free_ligand_chain(input);
        records =
            runtime::collect_screening_records(input, ligands, chain, *spec, a.has("affinity"));
    } else {
        records = runtime::collect_fold_records(a.positional[0], *spec, read);
    }
    if (!opts.msa_dir.empty()) runtime::attach_msa_dir(records, opts.msa_dir, *spec);
    if (server && !spec->reads_whole_files())
        runtime::attach_server_msas(records, *server, runtime::shard_dir(opts.out_dir, opts.shard) + "/msa", *spec);
    if (server) {
        BI_CHECK(!g_interrupted, "predict", "interrupted");
        std::signal(SIGINT, SIG_DFL);
        std::signal(SIGTERM, SIG_DFL);
    }
    int64_t budget = runtime::available_memory_bytes();
    if (a.has("max-memory")) {
        const long long gib = a.get_int_in("max-memory", 0, 1, 1 << 20);  // GiB
        budget = budget > 0 ? std::min<int64_t>(budget, int64_t(gib) << 30) : int64_t(gib) << 30;
    }
    // the memory estimate needs only the spec: targets too long fail before weights load
    fo.memory_budget = budget;
    for (auto& r : records)
        if (r.error.empty())
            r.error = runtime::fold_memory_error(*spec, r, budget / int64_t(opts.workers.size()));
    runtime::require_some_valid(records);
    runtime::Progress progress(runtime::predict_progress_options(opts), int64_t(records.size()));
    progress.stage(opts.model_label, "loading weights", 0, /*plain_line=*/false);
    const double t_load = progress.elapsed();
    auto model = fold::load(model_dir);
    // what the targets need beside the weights (Boltz-2's affinity model for a binder)
    fold::StructureModel::RunNeeds needs;
    for (const std::string& o : spec->options())
        if (a.has(o)) needs.given[o] = a.get(o);
    if (a.has("model"))  // a registry model's companions come from the registry too
        needs.fetch = [&](const std::string& name) { return runtime::ensure_model(hub_options(a), name); };
    needs.stage = [&](const std::string& what) {
        progress.stage(opts.model_label, what, 0, /*plain_line=*/false);
    };
    std::vector<const fold::Input*> targets;
    for (const auto& r : records)
        if (r.error.empty()) targets.push_back(&r.input);
    model->load_run_needs(targets, needs);
    opts.load_seconds = progress.elapsed() - t_load;
    opts.progress = &progress;
    const auto stats = runtime::run_predict(*model, records, opts);
    if (!ligands.empty()) {
        const std::string csv = runtime::write_screening_summary(
            ligands, stats.results, runtime::shard_dir(opts.out_dir, opts.shard));
        if (!opts.quiet) std::fprintf(stderr, "predict: screening summary %s\n", csv.c_str());
    }
    runtime::print_results_summary("predict", stats.results,
                                   runtime::shard_dir(opts.out_dir, opts.shard), opts.quiet);
    return runtime::exit_status(stats.results);
}

}  // namespace bioinfer::cli
