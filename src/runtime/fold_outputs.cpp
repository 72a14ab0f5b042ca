// predict's outputs (runtime/fold_outputs.h): per target a structure, PAE and plot per sample
// and the confidence JSON, or the tree boltz predict writes.
#include "runtime/fold_outputs.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "bioinfer/error.h"
#include "io/atomic_file.h"
#include "io/boltz_outputs.h"
#include "io/npy.h"
#include "io/plot.h"
#include "io/structure.h"
#include "runtime/inputs.h"

namespace bioinfer::runtime {

namespace fs = std::filesystem;
using nlohmann::json;

// A prediction holding NaN or Inf (weights loaded with --allow-nonfinite, an overflow) fails
// its target alone, before anything of it is written.
void require_finite(const bio::Prediction& p, const std::string& id) {
    for (size_t k = 0; k < p.samples.size(); ++k) {
        const bio::Sample& s = p.samples[k];
        const std::pair<const char*, const Tensor*> arrays[] = {{"coords", &s.coords},
                                                                {"plddt", &s.plddt},
                                                                {"token_plddt", &s.token_plddt},
                                                                {"pae", &s.pae},
                                                                {"pde", &s.pde}};
        for (const auto& [name, t] : arrays)
            BI_CHECK(!t->defined() || io::first_nonfinite(*t) < 0, id, "sample ", k + 1, ": '",
                     name, "' holds NaN or Inf; nothing written for this target");
        for (const auto& [name, v] : s.scores)
            BI_CHECK(std::isfinite(v), id, "sample ", k + 1, ": score '", name,
                     "' is NaN or Inf; nothing written for this target");
    }
    for (const auto& [name, t] : p.embeddings)
        BI_CHECK(io::first_nonfinite(t) < 0, id, "embedding '", name,
                 "' holds NaN or Inf; nothing written for this target");
}

namespace {

// The (n, n) matrix as nested rows (chain-pair scores in the confidence JSON).
json matrix_json(const Tensor& m) {
    json rows = json::array();
    for (int64_t i = 0; i < m.size(0); ++i)
        rows.push_back(std::vector<float>(m.f32() + i * m.size(1), m.f32() + (i + 1) * m.size(1)));
    return rows;
}

// Writes sample k's structure, PAE (and PDE) and plot under `stem`; returns its confidences
// (mean pLDDT over atoms, per-token pLDDT, the model's named scores) and adds its files to `files`.
json write_sample(const bio::Prediction& out, size_t k, const std::string& id, const std::string& stem,
                  const PredictOptions& opts, json& files) {
    const bio::Sample& s = out.samples[k];
    const std::string structure_file = stem + "." + opts.format;
    io::write_structure(out, k, id, opts.format, structure_file);
    files["structure"] = fs::path(structure_file).filename().string();
    const int64_t n = int64_t(out.tokens.size());
    if (opts.write_pae && s.pae.defined()) {
        io::write_file_atomic(stem + "_pae.npy", io::npy_bytes({n, n}, s.pae.f32()));
        io::write_confidence_png(stem + "_plddt_pae.png", id, out, k);
        files["pae"] = fs::path(stem + "_pae.npy").filename().string();
        files["plot"] = fs::path(stem + "_plddt_pae.png").filename().string();
    }
    if (opts.write_pae && s.pde.defined()) {
        io::write_file_atomic(stem + "_pde.npy", io::npy_bytes({n, n}, s.pde.f32()));
        files["pde"] = fs::path(stem + "_pde.npy").filename().string();
    }
    double plddt_sum = 0;
    for (int64_t a = 0; a < s.plddt.numel(); ++a) plddt_sum += 100.0f * s.plddt.f32()[a];
    std::vector<float> plddt(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) plddt[size_t(i)] = 100.0f * s.token_plddt.f32()[i];
    json conf = {{"mean_plddt", s.plddt.numel() ? plddt_sum / double(s.plddt.numel()) : 0.0},
                 {"plddt", plddt}};
    // the JSON's own keys, which a model's score names must not take
    static const std::set<std::string> own = {"id",         "sequence",   "length", "chains",
                                              "model",      "num_recycles", "runtime_s", "files",
                                              "samples",    "mean_plddt", "plddt"};
    for (const auto& [name, v] : s.scores) {
        BI_CHECK(!own.count(name), "confidence JSON", "score '", name, "' clashes with a key of its own");
        conf[name] = v;
    }
    for (const auto& [name, m] : s.chain_pair_scores) {
        BI_CHECK(!own.count(name) && !s.scores.count(name), "confidence JSON", "chain-pair score '",
                 name, "' clashes with another key");
        conf[name] = matrix_json(m);
    }
    return conf;
}

}  // namespace

// The files boltz predict writes for target `id` (sample 0's; the rest follow the same names).
// With an affinity binder, also the affinity stage's affinity_<id>.json.
json boltz_files(const std::string& id, const PredictOptions& opts, bool affinity) {
    const std::string dir = "predictions/" + safe_file_stem(id) + "/";
    const std::string stem = safe_file_stem(id);
    json files = {{"structure", dir + stem + "_model_0." + (opts.format == "pdb" ? "pdb" : "cif")},
                  {"confidence", dir + "confidence_" + stem + "_model_0.json"},
                  {"plddt", dir + "plddt_" + stem + "_model_0.npz"},
                  {"plot", dir + stem + "_plddt_pae.png"}};
    if (affinity) files["affinity"] = dir + "affinity_" + stem + ".json";
    if (opts.fold.write_embeddings) files["embeddings"] = dir + "embeddings_" + stem + ".npz";
    return files;
}

// Writes a target as boltz predict does (its folder replaced in one step), then the pLDDT/PAE plot
// of the best sample beside it; returns the files relative to out_dir.
json write_boltz_target(const FoldRecord& rec, const bio::Prediction& out,
                        const PredictOptions& opts, const std::string& out_dir) {
    BI_CHECK(!out.samples.empty(), rec.input.where, "the model returned no structure");
    io::BoltzWriteOptions wo;
    wo.output_format = opts.format == "pdb" ? "pdb" : "mmcif";
    wo.affinity = out.properties;
    io::write_boltz_prediction((fs::path(out_dir) / "predictions").string(), safe_file_stem(rec.id),
                               io::boltz_structure_info(out), io::boltz_samples(out), wo);
    json files = boltz_files(rec.id, opts, !out.properties.empty());
    if (opts.fold.write_embeddings) {
        // boltz's embeddings_<name>.npz: the trunk's final s and z (numpy.load reads it as
        // boltz's; stored, where boltz compresses)
        std::vector<io::NamedArray> arrays;
        for (const char* name : {"s", "z"}) {
            const auto it = out.embeddings.find(name);
            BI_CHECK(it != out.embeddings.end(), rec.input.where, "the model returned no '", name,
                     "' embedding");
            arrays.push_back({name, it->second.shape(), it->second.f32()});
        }
        io::write_npz((fs::path(out_dir) / files["embeddings"].get<std::string>()).string(),
                      arrays);
    }
    if (out.samples[0].pae.defined())
        io::write_confidence_png((fs::path(out_dir) / files["plot"].get<std::string>()).string(),
                                 rec.id, out, 0);
    else
        files.erase("plot");
    return files;
}

// Writes a target's files (per sample a structure, PAE and plot; the confidence JSON last);
// returns their names. Sample 0, the model's best, is <id>.<format>; sample k > 0 is
// <id>_sample<k>.<format>.
json write_target(const FoldRecord& rec, const bio::Prediction& out,
                  double seconds, const PredictOptions& opts, const std::string& out_dir) {
    BI_CHECK(!out.samples.empty(), rec.input.where, "the model returned no structure");
    const std::string stem = (fs::path(out_dir) / safe_file_stem(rec.id)).string();
    json samples = json::array();
    for (size_t k = 1; k < out.samples.size(); ++k) {
        json f = json::object();
        json c = write_sample(out, k, rec.id, cat(stem, "_sample", k), opts, f);
        c["files"] = f;
        samples.push_back(c);
    }
    json files = json::object();
    json conf = write_sample(out, 0, rec.id, stem, opts, files);
    json chains = json::array();
    for (const bio::PredictedChain& c : out.chains) chains.push_back({{"id", c.id}, {"length", c.tokens}});
    json runtime = {{"total", seconds}};
    for (const auto& [stage, s] : out.stage_seconds) runtime[stage] = s;
    conf.update({{"id", rec.id},
                 {"sequence", rec.sequence},
                 {"length", int64_t(out.tokens.size())},
                 {"chains", chains},
                 {"model", opts.model_label},
                 {"num_recycles", out.num_recycles},
                 {"runtime_s", runtime}});
    for (const auto& [name, v] : out.properties) conf[name] = v;  // e.g. Boltz-2's affinity
    if (!samples.empty()) conf["samples"] = samples;
    conf["files"] = files;
    io::write_file_atomic(stem + ".json", conf.dump(2) + "\n");
    files["confidence"] = fs::path(stem + ".json").filename().string();
    return files;
}

}  // namespace bioinfer::runtime
