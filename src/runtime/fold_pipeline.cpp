// bioinfer predict's job on the job skeleton (runtime/jobs.h): validation, memory check, folding,
// outputs.
#include "runtime/fold_pipeline.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "bioinfer/error.h"
#include "io/atomic_file.h"
#include "io/npy.h"
#include "io/plot.h"
#include "io/structure.h"
#include "models/esmfold/residue_constants.h"
#include "runtime/inputs.h"
#include "runtime/progress.h"

namespace bioinfer::runtime {

namespace fs = std::filesystem;
namespace rc = esmfold::rc;
using nlohmann::json;

std::vector<FoldRecord> collect_fold_records(const std::string& input) {
    std::vector<FoldRecord> out;
    for (const InputRecord& f : collect_fasta(input)) {
        const std::string where = cat(f.source, ":", f.line, ": record '", f.id, "'");
        FoldRecord r;
        r.id = f.id;
        r.source = f.source;
        r.error = f.error;
        try {
            for (size_t i = 0; i < f.sequence.size() && r.error.empty(); ++i) {
                const char c = f.sequence[i];
                BI_CHECK(std::isalpha((unsigned char)c) || c == ':', where, "character '", c,
                         "' at position ", i + 1, " is not an amino-acid letter or ':' (chain break)");
                r.sequence += char(std::toupper((unsigned char)c));
            }
            if (r.error.empty()) {
                r.encoded = esmfold::encode_sequence(r.sequence, where);
                for (uint8_t l : r.encoded.is_linker) r.residues += !l;
            }
        } catch (const Error& e) {
            r.error = e.what();
        }
        out.push_back(std::move(r));
    }
    return out;
}

int64_t fold_memory_bytes(const esmfold::EsmFoldConfig& c, int64_t L) {
    const int64_t pair = L * L * 4;  // bytes per pair channel
    const int64_t chunk = int64_t(256) << 20;
    // trunk: z, the triangle multiplication's two operands, product and output gate, chunk
    // temporaries
    const int64_t trunk = pair * c.trunk.c_z * 5 + chunk;
    // structure module: z, the projected pair, its normalised copy and the IPA bias
    const int64_t sm = pair * (c.trunk.c_z + 2 * c.sm.c_z + c.sm.heads);
    // heads: z, distogram logits (and their symmetric copy), pTM probabilities, PAE
    const int64_t heads = pair * (c.trunk.c_z + 3 * 64 + 1);
    const int64_t stem = L * 4 * 4096 * 8;  // the ESM stem's hidden states and activations
    // The caching allocator keeps the trunk's blocks while the structure module allocates its
    // own, so the two add up (1024 residues: 4.7 GB estimated, 4.1 GB measured above the
    // weights, docs/performance.md).
    return std::max(trunk + sm, heads) + stem;
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

std::string fold_memory_error(const esmfold::EsmFoldConfig& c, const FoldRecord& r, int64_t budget) {
    if (budget <= 0 || !r.error.empty()) return "";
    const int64_t L = int64_t(r.encoded.target.aatype.size());
    const int64_t need = fold_memory_bytes(c, L);
    if (need <= budget) return "";
    return cat("[", r.source, ": record '", r.id, "'] ", L, " residues need about ",
               (need + (1 << 29)) >> 30, " GiB to fold, but only ", budget >> 30, " GiB are available");
}

namespace {

std::string chain_id(int32_t c) {  // A..Z, then a..z, then 0..9, then two letters
    static const std::string k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    if (c < int32_t(k.size())) return std::string(1, k[size_t(c)]);
    return std::string(1, k[size_t(c / int32_t(k.size()) - 1)]) + k[size_t(c % int32_t(k.size()))];
}

// Folds one target and writes its files; returns their names.
struct Folded {
    esmfold::FoldOutput out;
    double seconds = 0;
};

// Folds one target, reporting its stages.
Folded fold_one(const esmfold::EsmFoldModel& model, const FoldRecord& rec, const PredictOptions& opts,
                const std::function<void(const std::string&)>& stage) {
    const auto t0 = std::chrono::steady_clock::now();
    esmfold::FoldOptions fo;
    fo.num_recycles = opts.num_recycles;
    fo.chunk = opts.chunk;
    fo.progress = [&](const std::string& what, int step, int steps) {
        stage(step < steps ? cat(what, " pass ", step + 1, "/", steps) : "structure module and heads");
    };
    stage("language model");
    Folded f{model.fold(rec.encoded.target, fo), 0.0};
    f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return f;
}

// Writes a target's files (structure, PAE and plot, the confidence JSON last); returns their names.
json write_target(const esmfold::EsmFoldModel& model, const FoldRecord& rec, const esmfold::FoldOutput& out,
                  double seconds, const PredictOptions& opts, const std::string& out_dir) {
    const std::vector<int32_t>& aatype = rec.encoded.target.aatype;
    const int64_t L = int64_t(aatype.size());
    // Residues kept (linkers dropped), numbered from 1 within each chain.
    std::vector<int64_t> keep, chain_starts;
    std::vector<io::AtomSite> atoms;
    std::vector<int32_t> number(size_t(L), 0);
    int32_t prev_chain = -1, n_in_chain = 0;
    double plddt_sum = 0;
    int64_t plddt_atoms = 0;
    std::vector<float> plddt_ca;
    json chains = json::array();
    for (int64_t i = 0; i < L; ++i) {
        if (rec.encoded.is_linker[size_t(i)]) continue;
        const int32_t ch = rec.encoded.chain[size_t(i)];
        if (ch != prev_chain) {
            chain_starts.push_back(int64_t(keep.size()));
            chains.push_back({{"id", chain_id(ch)}, {"length", 0}});
            prev_chain = ch;
            n_in_chain = 0;
        }
        chains.back()["length"] = ++n_in_chain;
        keep.push_back(i);
        const int r = aatype[size_t(i)];
        for (int a = 0; a < rc::kNumAtom37; ++a) {
            if (out.atom37_exists.f32()[i * 37 + a] == 0.0f) continue;
            const float* xyz = out.atom37.f32() + (i * 37 + a) * 3;
            const float b = 100.0f * out.plddt.f32()[i * 37 + a];
            atoms.push_back({chain_id(ch), n_in_chain, rc::kResnames[r], rc::kAtomTypes[a],
                             std::string(1, rc::kAtomTypes[a][0]), xyz[0], xyz[1], xyz[2], b});
            plddt_sum += b;
            ++plddt_atoms;
        }
        plddt_ca.push_back(100.0f * out.plddt.f32()[i * 37 + 1]);
    }
    chain_starts.erase(chain_starts.begin());  // the first chain starts at 0

    const std::string stem = (fs::path(out_dir) / safe_file_stem(rec.id)).string();
    const std::string structure_file = stem + "." + opts.format;
    io::write_structure(atoms, rec.id, opts.format, structure_file);
    const int64_t n = int64_t(keep.size());
    json files = {{"structure", fs::path(structure_file).filename().string()}};
    if (opts.write_pae) {
        std::vector<float> pae(size_t(n * n));
        for (int64_t a = 0; a < n; ++a)
            for (int64_t b = 0; b < n; ++b)
                pae[size_t(a * n + b)] = out.pae.f32()[keep[size_t(a)] * L + keep[size_t(b)]];
        io::write_file_atomic(stem + "_pae.npy", io::npy_bytes({n, n}, pae.data()));
        io::write_confidence_png(stem + "_plddt_pae.png", rec.id, plddt_ca, pae, chain_starts);
        files["pae"] = fs::path(stem + "_pae.npy").filename().string();
        files["plot"] = fs::path(stem + "_plddt_pae.png").filename().string();
    }
    const json conf = {
        {"id", rec.id},
        {"sequence", rec.sequence},
        {"length", n},
        {"chains", chains},
        {"model", opts.model_label},
        {"mean_plddt", plddt_atoms ? plddt_sum / double(plddt_atoms) : 0.0},
        {"ptm", out.ptm},
        {"plddt", plddt_ca},
        {"num_recycles", opts.num_recycles < 0 ? int(model.config().trunk.max_recycles) - 1
                                               : opts.num_recycles},
        {"runtime_s",
         {{"total", seconds},
          {"language_model", out.seconds_stem},
          {"trunk", out.seconds_trunk},
          {"structure_module", out.seconds_structure},
          {"heads", out.seconds_heads}}},
        {"files", files}};
    io::write_file_atomic(stem + ".json", conf.dump(2) + "\n");
    files["confidence"] = fs::path(stem + ".json").filename().string();
    return files;
}

}  // namespace

ProgressOptions predict_progress_options(const PredictOptions& o) {
    return {.label = "predict", .items = "targets", .tokens = "residues", .quiet = o.quiet, .log_path = o.log_path};
}

PredictStats run_predict(const esmfold::EsmFoldModel& model, const std::vector<FoldRecord>& recs,
                         const PredictOptions& opts) {
    BI_CHECK(opts.format == "pdb" || opts.format == "cif", "--output-format",
             "expected pdb or cif, got '", opts.format, "'");
    const std::string out_dir = shard_dir(opts.out_dir, opts.shard);
    fs::create_directories(out_dir);
    PredictStats stats;
    std::vector<TargetResult>& results = stats.results;
    // each worker folds one target at a time: the budget is theirs to share
    const int64_t budget = opts.memory_budget / int64_t(workers_or_default(opts.workers).size());
    for (size_t i = 0; i < recs.size(); ++i) {
        const FoldRecord& r = recs[i];
        results.push_back(target_result(
            i, r.id, r.source,
            r.error.empty() ? fold_memory_error(model.config(), r, budget) : r.error));
    }
    const int num_recycles =
        opts.num_recycles < 0 ? int(model.config().trunk.max_recycles) - 1 : opts.num_recycles;

    JobSpec spec;
    spec.tool = "bioinfer predict";
    spec.job = {{"output_format", opts.format},
                {"write_pae", opts.write_pae},
                {"num_recycles", num_recycles}};
    spec.progress = predict_progress_options(opts);
    spec.mpi_queue = true;
    spec.run_time = RunTime::UntilWritten;
    spec.dedup_key = [&](size_t i) { return recs[i].sequence; };  // identical sequences fold once
    spec.cost = [&](size_t i) { return int64_t(recs[i].encoded.target.aatype.size()); };
    spec.work = [&](size_t i) { return recs[i].residues; };
    // A target whose files are all there is skipped (the confidence JSON is written last).
    spec.done = [&](size_t i) -> std::optional<json> {
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
    spec.label = [&](const std::vector<size_t>& unit) {
        return cat(recs[unit[0]].id, " (", recs[unit[0]].residues, " aa)");
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
            stage("writing");
            return write_target(model, recs[m], f.out, f.seconds, opts, out_dir);
        });
    stats.seconds = run_job(opts, spec, results);
    return stats;
}

}  // namespace bioinfer::runtime
