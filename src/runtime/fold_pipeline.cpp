// bioinfer predict's job on the job skeleton (runtime/jobs.h): validation, memory check, folding;
// each target's files are written by runtime/fold_outputs.
#include "runtime/fold_pipeline.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "bioinfer/error.h"
#include "io/model_dir.h"
#include "runtime/fold_outputs.h"
#include "runtime/inputs.h"
#include "runtime/progress.h"

namespace bioinfer::runtime {

namespace fs = std::filesystem;
using nlohmann::json;

// Reads a record's input with `read` (the model's reader); its error becomes the record's.
template <typename F>
static void read_record_input(FoldRecord& r, F read) {
    try {
        r.input = read();
        for (const std::string& w : r.input.target.warnings) warn(w);
        r.sequence = r.input.sequence;
        r.residues = r.input.residues;
    } catch (const Error& e) {
        r.error = e.what();
    }
}

// Whole-file targets: INPUT a file, or a folder of input files.
static std::vector<FoldRecord> collect_file_records(const std::string& input,
                                                    const fold::ModelSpec& spec,
                                                    const fold::ReadOptions& ro) {
    static const std::set<std::string> exts = {".yaml", ".yml", ".fasta", ".fa", ".fas", ".faa"};
    std::error_code ec;
    std::vector<std::string> files;
    if (fs::is_directory(input, ec)) {
        for (const auto& e : fs::directory_iterator(input, ec))
            if (e.is_regular_file() && exts.count(e.path().extension().string()))
                files.push_back(e.path().string());
        std::sort(files.begin(), files.end());
        BI_CHECK(!files.empty(), input, "holds no input files (.yaml, .yml, .fasta, .fa, .fas, .faa)");
    } else {
        BI_CHECK(fs::is_regular_file(input, ec), input, spec.architecture(),
                 " reads an input file (YAML or FASTA) or a folder of them; no such file or folder");
        files.push_back(input);
    }
    std::vector<FoldRecord> out;
    std::set<std::string> stems;
    for (const std::string& f : files) {
        FoldRecord r;
        r.id = fs::path(f).stem().string();
        r.source = f;
        r.input.where = f;
        if (!stems.insert(safe_file_stem(r.id)).second) {
            r.error = cat("[", f, "] another input file has the name '", r.id, "'");
        } else {
            read_record_input(r, [&] {
                fold::Input in = spec.from_file(f, ro);
                in.id = r.id;
                return in;
            });
        }
        out.push_back(std::move(r));
    }
    return out;
}

std::vector<FoldRecord> collect_fold_records(const std::string& input, const fold::ModelSpec& spec,
                                             const fold::ReadOptions& ro) {
    if (spec.reads_whole_files()) return collect_file_records(input, spec, ro);
    std::vector<FoldRecord> out;
    for (const InputRecord& f : collect_fasta(input)) {
        const std::string where = cat(f.source, ":", f.line, ": record '", f.id, "'");
        FoldRecord r;
        r.id = f.id;
        r.source = f.source;
        r.error = f.error;
        if (r.error.empty()) read_record_input(r, [&] { return spec.from_fasta(f, where); });
        out.push_back(std::move(r));
    }
    return out;
}

int64_t available_memory_bytes() {
    std::ifstream f("/proc/meminfo");
    std::string key;
    int64_t kb = 0;
    std::string unit;
    while (f >> key >> kb >> unit)
        if (key == "MemAvailable:") return kb * 1024;
    return 0;
}

void attach_msa_dir(std::vector<FoldRecord>& records, const std::string& dir,
                    const fold::ModelSpec& spec) {
    for (FoldRecord& r : records) {
        if (!r.error.empty()) continue;
        std::vector<bio::Chain>& chains = r.input.target.chains;
        try {
            for (bio::Chain& c : chains) {
                if (!c.msa_path.empty()) continue;
                const std::string base = dir + "/" + r.input.id;
                for (const std::string& p : {chains.size() == 1 ? base + ".a3m" : std::string(),
                                             base + "_" + c.id + ".a3m"})
                    if (!p.empty() && std::filesystem::is_regular_file(p)) {
                        c.msa_kind = bio::MsaKind::File;
                        c.msa_path = p;
                        c.msa = spec.read_msa(p);
                        break;
                    }
            }
        } catch (const std::exception& e) {
            r.error = error_line(e);
        }
    }
}

std::string fold_memory_error(const fold::ModelSpec& spec, const FoldRecord& r, int64_t budget) {
    if (budget <= 0 || !r.error.empty()) return "";
    const int64_t L = r.input.tokens;
    const int64_t need = spec.memory_bytes(r.input);
    if (need <= budget) return "";
    return cat("[", r.source, ": record '", r.id, "'] ", L, " residues need about ",
               (need + (1 << 29)) >> 30, " GiB to fold, but only ", budget >> 30, " GiB are available");
}

namespace {

// A target's prediction and the seconds it took.
struct Folded {
    bio::Prediction out;
    double seconds = 0;
};

// Folds one target, reporting its stages.
Folded fold_one(const fold::StructureModel& model, const FoldRecord& rec, const PredictOptions& opts,
                const std::function<void(const std::string&)>& stage) {
    const auto t0 = std::chrono::steady_clock::now();
    fold::Options fo = opts.fold;
    fo.memory_budget = opts.fold.memory_budget / int64_t(workers_or_default(opts.workers).size());
    fo.progress = [&](const std::string& what, int step, int steps) {
        stage(steps > 0 ? cat(what, " ", step + 1, "/", steps) : what);
    };
    Folded f{model.predict(rec.input, fo), 0.0};
    f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return f;
}

}  // namespace

// The value results.json records for a model option of the run (null: not a setting).
static json model_option_value(const std::string& option, const PredictOptions& o) {
    const fold::Options& f = o.fold;
    if (option == "sampling-steps") return f.sampling_steps;
    if (option == "diffusion-samples") return f.num_samples;
    if (option == "max-parallel-samples") return f.max_parallel_samples;
    if (option == "step-scale") return f.step_scale;
    if (option == "seed") return f.seed;
    if (option == "max-msa-seqs") return f.max_msa_seqs;
    if (option == "msa-dir") return o.msa_dir;
    if (option == "use-potentials") return f.use_potentials;
    if (option == "sampling-steps-affinity") return f.affinity_sampling_steps;
    if (option == "diffusion-samples-affinity") return f.affinity_samples;
    if (option == "affinity-mw-correction") return f.affinity_mw_correction;
    if (option == "method") return f.method.empty() ? json(nullptr) : json(f.method);
    if (option == "subsample-msa") return f.msa_subsample > 0;
    if (option == "num-subsampled-msa")
        return f.msa_subsample > 0 ? json(f.msa_subsample) : json(nullptr);
    if (option == "write-embeddings") return f.write_embeddings;
    return nullptr;
}

ProgressOptions predict_progress_options(const PredictOptions& o) {
    return {.label = "predict", .items = "targets", .tokens = "residues", .quiet = o.quiet, .log_path = o.log_path};
}

PredictStats run_predict(const fold::StructureModel& model, const std::vector<FoldRecord>& recs,
                         const PredictOptions& opts) {
    BI_CHECK(opts.format == "pdb" || opts.format == "cif", "--output-format",
             "expected pdb or cif, got '", opts.format, "'");
    const std::string out_dir = shard_dir(opts.out_dir, opts.shard);
    fs::create_directories(out_dir);
    PredictStats stats;
    std::vector<TargetResult>& results = stats.results;
    // each worker folds one target at a time: the budget is theirs to share
    const int64_t budget = opts.fold.memory_budget / int64_t(workers_or_default(opts.workers).size());
    for (size_t i = 0; i < recs.size(); ++i) {
        const FoldRecord& r = recs[i];
        results.push_back(target_result(
            i, r.id, r.source,
            r.error.empty() ? fold_memory_error(model.spec(), r, budget) : r.error));
    }
    const int num_recycles =
        opts.fold.num_recycles < 0 ? model.spec().default_num_recycles() : opts.fold.num_recycles;

    JobSpec spec;
    spec.tool = "bioinfer predict";
    spec.job = {{"output_format", opts.format},
                {"write_pae", opts.write_pae},
                {"num_recycles", num_recycles}};
    // the model's own options, under their names (merge checks that shards agree on them)
    const bool boltz_layout = model.spec().output_layout() == fold::ModelSpec::Layout::Boltz;
    if (boltz_layout) spec.job["layout"] = "boltz";
    for (const std::string& o : model.spec().options()) {
        json v = model_option_value(o, opts);
        if (v.is_null()) continue;  // not a setting of the run (--ligands, --affinity-checkpoint)
        std::string key = o;
        std::replace(key.begin(), key.end(), '-', '_');
        spec.job[key] = std::move(v);
    }
    spec.progress = predict_progress_options(opts);
    spec.mpi_queue = true;
    spec.run_time = RunTime::UntilWritten;
    spec.dedup_key = [&](size_t i) { return fold::input_key(recs[i].input); };  // identical inputs fold once
    spec.cost = [&](size_t i) { return recs[i].input.tokens; };
    spec.work = [&](size_t i) { return recs[i].residues + recs[i].input.ligand_atoms; };
    // A target whose files are all there is skipped (the confidence JSON is written last).
    spec.done = [&](size_t i) -> std::optional<json> {
        if (boltz_layout) {
            json files = boltz_files(recs[i].id, opts, !recs[i].input.affinity_binder.empty());
            for (auto& [k, f] : files.items())
                if (!fs::exists(fs::path(out_dir) / f.get<std::string>())) return std::nullopt;
            return files;
        }
        const std::string stem = safe_file_stem(recs[i].id);
        json files = {{"structure", stem + "." + opts.format}, {"confidence", stem + ".json"}};
        if (opts.write_pae) {
            files["pae"] = stem + "_pae.npy";
            files["plot"] = stem + "_plddt_pae.png";
        }
        for (auto& [k, f] : files.items())
            if (!fs::exists(fs::path(out_dir) / f.get<std::string>())) return std::nullopt;
        return files;
    };
    // "T1 (120 aa)", or with ligands "T2 (120 aa, 27 ligand atoms)"
    spec.label = [&](const std::vector<size_t>& unit) {
        const FoldRecord& r = recs[unit[0]];
        const int64_t atoms = r.input.ligand_atoms;
        const std::string ligands =
            atoms ? cat(", ", atoms, atoms == 1 ? " ligand atom" : " ligand atoms") : "";
        return cat(r.id, " (", r.residues, " aa", ligands, ")");
    };
    std::mutex mu;  // the stats
    // A unit is one target: folded once, its files written for it and each duplicate.
    spec.unit = unit_of_work<Folded>(
        [&](const Worker&, const std::vector<size_t>& unit, const StageFn& stage) {
            {
                std::lock_guard<std::mutex> lock(mu);
                ++stats.targets;
                stats.residues += recs[unit[0]].residues;
            }
            return fold_one(model, recs[unit[0]], opts, stage);
        },
        [&](Folded& f, size_t, size_t m, const StageFn& stage) {
            require_finite(f.out, recs[m].id);
            stage("writing");
            if (boltz_layout) return write_boltz_target(recs[m], f.out, opts, out_dir);
            return write_target(recs[m], f.out, f.seconds, opts, out_dir);
        });
    stats.seconds = run_job(opts, spec, results);
    return stats;
}

}  // namespace bioinfer::runtime
