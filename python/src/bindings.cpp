// The Python module `bioinfer._bioinfer`: the engine the CLI runs, bound with nanobind. The
// package's Python layer (python/bioinfer/__init__.py) shapes the API; this file holds the
// models resident, runs the embedding job in process with the GIL released, and hands its
// arrays to NumPy without a copy (each array owns a reference to the engine's buffer).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bioinfer/error.h"
#include "core/threads.h"
#include "io/boltz_outputs.h"
#include "io/model_dir.h"
#include "io/structure.h"
#include "models/esm_alphabet.h"
#include "models/language_model.h"
#include "models/registry.h"
#include "models/structure_model.h"
#include "ops/ops.h"
#include "runtime/embed_pipeline.h"
#include "runtime/design.h"
#include "runtime/fold_pipeline.h"
#include "runtime/hub.h"
#include "runtime/inputs.h"
#include "runtime/jobs.h"
#include "runtime/structure_compare.h"

namespace nb = nanobind;
using namespace nb::literals;
using namespace bioinfer;

namespace {

using Array = nb::ndarray<nb::numpy, float>;

// A NumPy view of a host fp32 tensor that keeps the tensor's buffer alive.
Array to_numpy(const Tensor& t) {
    BI_CHECK(t.is_host() && t.dtype() == DType::F32 && t.is_contiguous(), "python",
             "expected a contiguous host fp32 array");
    auto* keep = new Tensor(t);
    nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
    std::vector<size_t> shape(t.shape().begin(), t.shape().end());
    return Array(keep->f32(), shape.size(), shape.data(), owner);
}

DType compute_dtype(const std::string& precision) {
    if (precision == "fp32") return DType::F32;
    if (precision == "bf16") return DType::BF16;
    if (precision == "int8") return DType::I8;
    throw nb::value_error(
        ("precision: expected 'fp32', 'bf16' or 'int8', got '" + precision + "'").c_str());
}

// `threads` as load() takes it: 0 for all CPUs, else at most max_threads() (ValueError).
int python_threads(int64_t threads) {
    try {
        return checked_thread_count(threads, "threads");
    } catch (const Error& e) {
        throw nb::value_error(e.what());
    }
}

// Ctrl-C, checked from the engine's hooks between its steps: true when Python's signal handler
// raised (its KeyboardInterrupt stays set for the caller to throw). On threads other than the
// main one PyErr_CheckSignals does nothing.
bool interrupted() {
    nb::gil_scoped_acquire gil;
    return PyErr_CheckSignals() != 0;
}

class PyLanguageModel {
  public:
    PyLanguageModel(const std::string& dir, std::string label, const std::string& precision,
                    int64_t threads, bool allow_nonfinite)
        : label_(std::move(label)), precision_(precision), threads_(python_threads(threads)) {
        io::ModelDir md = io::ModelDir::open(dir);
        md.set_allow_nonfinite(allow_nonfinite);
        arch_ = lm::detect_architecture(md);
        vocab_ = lm::vocab_of(md);
        const ops::MatmulPrecisionScope scope(compute_dtype(precision));
        nb::gil_scoped_release release;
        model_ = lm::load(md);
    }

    std::string architecture() const { return arch_; }
    int64_t num_layers() const { return model_->num_layers(); }
    int64_t hidden_size() const { return model_->hidden_size(); }
    bool has_logits() const { return model_->has_logits(); }
    bool has_contacts() const { return model_->has_contacts(); }
    std::string precision() const { return precision_; }
    int threads() const { return threads_; }

    // Runs the embedding job over (id, sequence) pairs as `bioinfer embed` batches them: per
    // record (id, residues, residues before truncation, {npz key: array}). A sequence with a
    // letter outside the alphabet raises ValueError naming its record.
    nb::list embed(const std::vector<std::pair<std::string, std::string>>& inputs,
                   const std::vector<int>& layers, const std::string& include,
                   int64_t toks_per_batch, int64_t truncate, bool progress, nb::object on_record) {
        std::vector<runtime::EmbedRecord> records;
        records.reserve(inputs.size());
        for (const auto& [id, seq] : inputs) {
            runtime::EmbedRecord r;
            r.id = id;
            r.source = "<python>";
            try {
                r.tokens = esm::tokenize(seq, id, vocab_);
            } catch (const Error& e) {
                throw nb::value_error(e.what());
            }
            if (r.tokens.empty())
                throw nb::value_error(("record '" + id + "': empty sequence").c_str());
            r.original_length = int64_t(r.tokens.size());
            if (truncate > 0 && r.original_length > truncate) r.tokens.resize(size_t(truncate));
            records.push_back(std::move(r));
        }
        runtime::EmbedOptions opts;
        opts.model_label = label_;
        opts.precision = precision_;
        opts.repr_layers = layers;
        runtime::parse_include(include, opts);
        opts.toks_per_batch = toks_per_batch;
        opts.quiet = !progress;
        opts.workers = runtime::cpu_workers(1, threads_);
        std::vector<runtime::RecordArrays> got(records.size());
        size_t done = 0;
        bool callback_raised = false;  // on_record's exception stops the job as Ctrl-C does
        opts.sink = [&](size_t i, runtime::RecordArrays a) {
            got[i] = std::move(a);
            ++done;
            if (on_record.is_none() || callback_raised) return;
            nb::gil_scoped_acquire gil;
            try {
                on_record(done, records.size());
            } catch (nb::python_error& e) {
                e.restore();  // raised by the caller once the engine has stopped
                callback_raised = true;
            }
        };
        opts.cancelled = [&] { return callback_raised || interrupted(); };
        runtime::EmbedStats stats;
        {
            nb::gil_scoped_release release;
            std::lock_guard<std::mutex> one_at_a_time(*run_mu_);
            try {
                stats = runtime::run_embed(*model_, records, opts, /*write_outputs=*/false);
            } catch (const runtime::Cancelled&) {
                nb::gil_scoped_acquire gil;
                throw nb::python_error();
            }
        }
        nb::list out;
        for (size_t i = 0; i < records.size(); ++i) {
            const runtime::TargetResult& r = stats.results[i];
            if (r.status != "ok") throw std::runtime_error("record '" + r.id + "': " + r.error);
            nb::dict arrays;
            for (auto& [key, t] : got[i].arrays) arrays[key.c_str()] = to_numpy(t);
            out.append(nb::make_tuple(records[i].id, int64_t(records[i].tokens.size()),
                                      records[i].original_length, arrays));
        }
        return out;
    }

  private:
    std::string label_, precision_, arch_;
    esm::Vocab vocab_ = esm::Vocab::Esm2;
    int threads_;
    std::unique_ptr<lm::LanguageModel> model_;
    // Calls on one model run one at a time (taken with the GIL released); calls on different
    // models run side by side. (Added while two threads got wrong arrays from oneDNN's shared
    // scratchpad, since fixed in linear_dnnl.cpp; kept so one model's calls never interleave.)
    std::unique_ptr<std::mutex> run_mu_ = std::make_unique<std::mutex>();
};

// A Python error set while the engine ran (Ctrl-C seen by a progress hook), carried out of it.
struct Interrupted : std::exception {};

// Text of sample `k` of a prediction as a structure file ("pdb" or "cif"): the writer the CLI
// uses, through a temporary file.
std::string structure_text(const bio::Prediction& p, size_t k, const std::string& name,
                           const std::string& format) {
    namespace fs = std::filesystem;
    std::string tmpl = (fs::temp_directory_path() / "bioinfer_py_XXXXXX").string();
    const int fd = mkstemp(tmpl.data());
    BI_CHECK(fd >= 0, "python", "cannot create a temporary file in ", fs::temp_directory_path());
    close(fd);
    const std::string path = tmpl + "." + format;
    fs::remove(tmpl);
    io::write_structure(p, k, name, format, path);
    std::ifstream f(path, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    fs::remove(path);
    return text;
}

nb::dict comparison_dict(const runtime::Comparison& c) {
    nb::dict d;
    d["matched_by"] = c.matched_by;
    d["pred_residues"] = c.pred_residues;
    d["truth_residues"] = c.truth_residues;
    d["aligned"] = c.aligned;
    d["identical"] = c.identical;
    d["rmsd"] = c.rmsd;
    d["tm_score"] = c.tm_score;
    d["lddt"] = c.lddt;
    return d;
}

runtime::Match match_of(const std::string& how) {
    if (how == "auto") return runtime::Match::Auto;
    if (how == "number") return runtime::Match::Number;
    if (how == "sequence") return runtime::Match::Sequence;
    throw nb::value_error(
        ("match: expected 'auto', 'number' or 'sequence', got '" + how + "'").c_str());
}

// One prediction, held for its arrays (NumPy views) and its structure text.
class PyPrediction {
  public:
    // boltz: the files are boltz's (Boltz-2), else bioinfer's own writer's
    // boltz: written as boltz's writers write (the model's output layout is boltz predict's)
    PyPrediction(std::string id, std::shared_ptr<const bio::Prediction> p, bool boltz)
        : id_(std::move(id)), p_(std::move(p)), boltz_(boltz) {}
    std::string id() const { return id_; }
    size_t num_samples() const { return p_->samples.size(); }
    int num_recycles() const { return p_->num_recycles; }
    const bio::Sample& sample(size_t k) const {
        if (k >= p_->samples.size())
            throw nb::index_error(
                ("sample " + std::to_string(k) + " of " + std::to_string(p_->samples.size()))
                    .c_str());
        return p_->samples[k];
    }
    nb::object array(size_t k, const std::string& what) const {
        const bio::Sample& s = sample(k);
        const Tensor& t = what == "coords"        ? s.coords
                          : what == "plddt"       ? s.plddt
                          : what == "token_plddt" ? s.token_plddt
                          : what == "pae"         ? s.pae
                                                  : s.pde;
        if (!t.defined()) return nb::none();
        return nb::cast(to_numpy(t));
    }
    nb::dict scores(size_t k) const {
        nb::dict d;
        for (const auto& [name, v] : sample(k).scores) d[name.c_str()] = v;
        return d;
    }
    // (chain id, kind, first token, tokens) per chain.
    nb::list chains() const {
        nb::list out;
        for (const auto& c : p_->chains)
            out.append(
                nb::make_tuple(c.id, bio::molecule_type_name(c.type), c.first_token, c.tokens));
        return out;
    }
    // (chain index, residue number, residue name, one-letter code) per token.
    nb::list tokens() const {
        nb::list out;
        for (const auto& t : p_->tokens)
            out.append(nb::make_tuple(t.chain, t.residue, t.name, std::string(1, t.letter)));
        return out;
    }
    // (token index, atom name, element) per atom.
    nb::list atoms() const {
        nb::list out;
        for (const auto& a : p_->atoms) out.append(nb::make_tuple(a.token, a.name, a.element));
        return out;
    }
    std::string text(size_t k, const std::string& format) const {
        const bio::Sample& s = sample(k);
        if (!boltz_) return structure_text(*p_, k, id_, format);
        const io::BoltzStructureInfo info = io::boltz_structure_info(*p_);
        const std::vector<float> xyz(s.coords.f32(), s.coords.f32() + s.coords.numel()),
            plddt(s.token_plddt.f32(), s.token_plddt.f32() + s.token_plddt.numel());
        return format == "pdb" ? io::boltz_pdb(info, xyz, plddt)
                               : io::boltz_mmcif(info, xyz, plddt);
    }
    nb::dict compare(const std::string& truth, size_t k, const std::string& how) const {
        sample(k);
        const runtime::Match m = match_of(how);
        return comparison_dict(runtime::compare_structures(runtime::ca_residues(*p_, k),
                                                           io::read_ca_residues(truth), m));
    }

  private:
    std::string id_;
    std::shared_ptr<const bio::Prediction> p_;
    bool boltz_;
};

// The MPNN models (ProteinMPNN, LigandMPNN, SolubleMPNN, ...) resident: design and score.py's
// scoring of one structure per call, options as a JSON object of runtime::DesignOptions' names.
class PyDesignModel {
  public:
    PyDesignModel(const std::string& name_or_path, int64_t threads) : threads_(python_threads(threads)) {
        std::error_code ec;
        if (std::filesystem::is_regular_file(name_or_path, ec)) {
            path_ = name_or_path;
        } else {
            path_ = runtime::resolve_mpnn_model(name_or_path, &kind_);
        }
        nb::gil_scoped_release release;
        model_ = mpnn::ProteinMpnn::load(path_);
        kind_ = mpnn::model_kind_name(model_->kind());
    }
    std::string path() const { return path_; }
    std::string kind() const { return kind_; }

    nb::dict design(const std::string& structure, const std::string& options, const std::string& out_dir) {
        runtime::DesignOptions o = options_of(options);
        runtime::DesignResult r;
        {
            nb::gil_scoped_release release;
            set_num_threads(threads_);
            runtime::check_design_input(structure, o);
            if (o.pack_side_chains && !packer_) {
                const std::string dir = runtime::mpnn_package_dir("ligandmpnn");
                BI_CHECK(!dir.empty(), "pack_side_chains", "needs the ligandmpnn package's ligandmpnn_sc_v_32_002_16.pt");
                packer_ = mpnn::SideChainPacker::load(dir + "/ligandmpnn_sc_v_32_002_16.pt");
            }
            r = runtime::design_structure(*model_, structure, o, out_dir, packer_.get());
        }
        const int64_t N = int64_t(r.sequences.size()), L = r.residues;
        nb::dict d;
        d["name"] = r.name;
        d["native"] = r.native;
        d["seed"] = r.seed;
        d["sequences"] = r.sequences;
        d["overall_confidence"] = r.overall_confidence;
        d["ligand_confidence"] = r.ligand_confidence;
        d["seq_rec"] = r.seq_rec;
        d["log_probs"] = to_numpy(Tensor::of(r.log_probs, {N, L, mpnn::kTokens}));
        d["sampling_probs"] = to_numpy(Tensor::of(r.sampling_probs, {N, L, 20}));
        std::vector<float> order(r.order.begin(), r.order.end());
        d["decoding_order"] = to_numpy(Tensor::of(order, {N, L}));
        return d;
    }

    nb::dict score(const std::string& structure, const std::string& options, const std::string& out_dir) {
        runtime::DesignOptions o = options_of(options);
        runtime::ScoreResult r;
        {
            nb::gil_scoped_release release;
            set_num_threads(threads_);
            r = runtime::score_structure(*model_, structure, o, out_dir);
        }
        nb::dict d;
        d["sequence"] = r.sequence;
        d["residue_names"] = r.residue_names;
        d["log_probs"] = to_numpy(Tensor::of(r.log_probs, {r.N, r.L, mpnn::kTokens}));
        d["mean_of_probs"] = to_numpy(Tensor::of(r.mean_of_probs, {r.L, mpnn::kTokens}));
        d["std_of_probs"] = to_numpy(Tensor::of(r.std_of_probs, {r.L, mpnn::kTokens}));
        return d;
    }

  private:
    runtime::DesignOptions options_of(const std::string& text) const {
        const nlohmann::json j = nlohmann::json::parse(text);
        runtime::DesignOptions o;
        o.model_path = path_;
        o.model_kind = kind_;
        o.temperature = j.value("temperature", o.temperature);
        o.seed = j.value("seed", o.seed);
        o.batch_size = j.value("batch_size", o.batch_size);
        o.number_of_batches = j.value("number_of_batches", o.number_of_batches);
        o.chains_to_design = j.value("chains_to_design", o.chains_to_design);
        o.parse_these_chains_only = j.value("parse_these_chains_only", o.parse_these_chains_only);
        o.fixed_residues = j.value("fixed_residues", o.fixed_residues);
        o.redesigned_residues = j.value("redesigned_residues", o.redesigned_residues);
        for (const auto& [k, v] : j.value("bias_AA", nlohmann::json::object()).items()) {
            BI_CHECK(k.size() == 1 && std::strchr(mpnn::kAlphabet, k[0]), "bias_AA", "'", k,
                     "' is not one of the letters ", mpnn::kAlphabet);
            o.bias_AA[k[0]] = v.get<double>();
        }
        o.bias_AA_per_residue = j.value("bias_AA_per_residue", o.bias_AA_per_residue);
        o.omit_AA = j.value("omit_AA", o.omit_AA);
        for (char c : o.omit_AA)
            BI_CHECK(std::strchr(mpnn::kAlphabet, c), "omit_AA", "'", std::string(1, c), "' is not one of the letters ",
                     mpnn::kAlphabet);
        o.omit_AA_per_residue = j.value("omit_AA_per_residue", o.omit_AA_per_residue);
        o.symmetry_residues = j.value("symmetry_residues", o.symmetry_residues);
        o.symmetry_weights = j.value("symmetry_weights", o.symmetry_weights);
        o.homo_oligomer = j.value("homo_oligomer", o.homo_oligomer);
        o.use_atom_context = j.value("ligand_mpnn_use_atom_context", o.use_atom_context);
        o.cutoff_for_score = j.value("ligand_mpnn_cutoff_for_score", o.cutoff_for_score);
        o.use_side_chain_context = j.value("ligand_mpnn_use_side_chain_context", o.use_side_chain_context);
        o.allow_missing_backbone = j.value("allow_missing_backbone", o.allow_missing_backbone);
        o.pack_side_chains = j.value("pack_side_chains", o.pack_side_chains);
        o.packs_per_design = j.value("number_of_packs_per_design", o.packs_per_design);
        o.save_stats = j.value("save_stats", o.save_stats);
        o.autoregressive_score = j.value("autoregressive_score", o.autoregressive_score);
        o.single_aa_score = j.value("single_aa_score", o.single_aa_score);
        o.use_sequence = j.value("use_sequence", o.use_sequence);
        BI_CHECK(o.temperature > 0, "temperature", "expected > 0, got ", o.temperature);
        BI_CHECK(o.batch_size >= 1 && o.number_of_batches >= 1, "batch_size", "batch_size and number_of_batches must be >= 1");
        return o;
    }
    std::string path_, kind_;
    int threads_ = 0;
    std::unique_ptr<mpnn::ProteinMpnn> model_;
    std::unique_ptr<mpnn::SideChainPacker> packer_;
};

class PyStructureModel {
  public:
    PyStructureModel(const std::string& dir, int64_t threads, bool allow_nonfinite)
        : threads_(python_threads(threads)) {
        io::ModelDir md = io::ModelDir::open(dir);
        md.set_allow_nonfinite(allow_nonfinite);
        nb::gil_scoped_release release;
        model_ = fold::load(md);
    }
    std::string architecture() const { return model_->spec().architecture(); }
    int default_num_recycles() const { return model_->spec().default_num_recycles(); }
    bool reads_whole_files() const { return model_->spec().reads_whole_files(); }

    // inputs: (id, sequence with ':' between chains) pairs, or (id, input file) for a model that
    // reads whole files (from_files). A bad input raises ValueError naming it.
    std::vector<PyPrediction> fold(const std::vector<std::pair<std::string, std::string>>& inputs,
                                   bool from_files, int num_recycles, int num_samples,
                                   int sampling_steps, uint64_t seed, nb::object on_stage) {
        const fold::ModelSpec& spec = model_->spec();
        std::vector<fold::Input> prepared;
        for (const auto& [id, what] : inputs) {
            try {
                if (from_files) {
                    fold::Input in = spec.from_file(what);
                    in.id = id;
                    // what reading forgave (an MSA not headed by its query), as Python warnings
                    for (const std::string& w : in.target.warnings)
                        if (PyErr_WarnEx(PyExc_UserWarning, w.c_str(), 1) < 0) throw nb::python_error();
                    prepared.push_back(std::move(in));
                } else {
                    io::FastaRecord rec{id, id, what, "<python>", 0};
                    prepared.push_back(spec.from_fasta(rec, "record '" + id + "'"));
                }
            } catch (const Error& e) {
                throw nb::value_error(e.what());
            }
        }
        fold::Options o;
        o.num_recycles = num_recycles;
        o.num_samples = num_samples;
        o.sampling_steps = sampling_steps;
        o.seed = seed;
        std::string current;  // the input being folded, for on_stage
        o.progress = [&](const std::string& stage, int step, int steps) {
            if (interrupted()) throw Interrupted();
            if (on_stage.is_none()) return;
            nb::gil_scoped_acquire gil;
            try {
                on_stage(current, stage, step, steps);
            } catch (nb::python_error& e) {
                e.restore();  // raised by the caller once the engine has stopped
                throw Interrupted();
            }
        };
        std::vector<PyPrediction> out;
        for (const fold::Input& in : prepared) {
            current = in.id;
            std::shared_ptr<const bio::Prediction> p;
            {
                nb::gil_scoped_release release;
                std::lock_guard<std::mutex> one_at_a_time(*run_mu_);
                set_num_threads(threads_);
                try {
                    p = std::make_shared<const bio::Prediction>(model_->predict(in, o));
                } catch (const Interrupted&) {
                    nb::gil_scoped_acquire gil;
                    throw nb::python_error();
                }
            }
            out.emplace_back(in.id, std::move(p),
                             spec.output_layout() == fold::ModelSpec::Layout::Boltz);
        }
        return out;
    }

  private:
    int threads_;
    std::unique_ptr<fold::StructureModel> model_;
    std::unique_ptr<std::mutex> run_mu_ = std::make_unique<std::mutex>();  // as PyLanguageModel's
};

}  // namespace

NB_MODULE(_bioinfer, m) {
    m.doc() = "bioinfer's engine: the C++ library the bioinfer CLI runs.";
    m.attr("__version__") = BIOINFER_VERSION;  // the CMake project's version, as `bioinfer --version`
    // a filesystem error raises OSError with "[path] what failed: reason", as the CLI prints it
    nb::register_exception_translator([](const std::exception_ptr& p, void*) {
        try {
            std::rethrow_exception(p);
        } catch (const std::filesystem::filesystem_error& e) {
            PyErr_SetString(PyExc_OSError, error_line(e).c_str());
        }
    });

    m.def(
        "resolve_model",
        [](const std::string& name, bool offline, const std::string& cache_dir) {
            auto o = runtime::HubOptions::from_env(cache_dir, offline);
            o.quiet = true;
            nb::gil_scoped_release release;
            return runtime::ensure_model(o, name);
        },
        "name"_a, "offline"_a = false, "cache_dir"_a = "",
        "The local directory of a registry model or org/name repository, downloaded into the "
        "Hugging Face cache on first use.");
    m.def("max_threads", &max_threads,
          "The most threads a model may use: 4 per CPU this process may run on.");
    m.def(
        "known_model", [](const std::string& name) { return models::find_hub_model(name) != nullptr; },
        "name"_a, "Whether `name` is in bioinfer's model registry.");
    m.def(
        "architecture",
        [](const std::string& dir) {
            const io::ModelDir md = io::ModelDir::open(dir);
            return lm::detect_architecture(md);
        },
        "dir"_a, "The language-model architecture a model directory holds ('esm2', 'esmc').");
    m.def(
        "read_fasta",
        [](const std::string& path) {
            std::vector<std::pair<std::string, std::string>> out;
            for (const auto& r : runtime::collect_fasta(path)) {
                if (!r.error.empty()) throw nb::value_error(r.error.c_str());
                out.emplace_back(r.id, r.sequence);
            }
            return out;
        },
        "path"_a,
        "The (id, sequence) records of a FASTA file or a folder of them, as `bioinfer embed` reads "
        "them.");

    m.def(
        "model_kind",
        [](const std::string& dir) -> std::string {
            const io::ModelDir md = io::ModelDir::open(dir);
            // ESMFold's config is an ESM config too: the structure models are asked first
            if (models::is_structure_model(md)) return "structure_model";
            lm::detect_architecture(md);  // an error naming config.json when neither
            return "language_model";
        },
        "dir"_a,
        "'language_model' (ESM-2, ESM C) or 'structure_model' (ESMFold, ESMFold2, Boltz-2).");
    m.def(
        "compare_files",
        [](const std::string& pred, const std::string& truth, const std::string& how) {
            const runtime::Match m = match_of(how);
            return comparison_dict(runtime::compare_structures(io::read_ca_residues(pred),
                                                               io::read_ca_residues(truth), m));
        },
        "pred"_a, "truth"_a, "match"_a = "auto",
        "Calpha RMSD after superposition, TM-score and lDDT of a predicted structure file against "
        "a reference, as `bioinfer compare`.");

    nb::class_<PyPrediction>(m, "Prediction")
        .def_prop_ro("id", &PyPrediction::id)
        .def_prop_ro("num_samples", &PyPrediction::num_samples)
        .def_prop_ro("num_recycles", &PyPrediction::num_recycles)
        .def("array", &PyPrediction::array, "sample"_a, "what"_a)
        .def("scores", &PyPrediction::scores, "sample"_a)
        .def("chains", &PyPrediction::chains)
        .def("tokens", &PyPrediction::tokens)
        .def("atoms", &PyPrediction::atoms)
        .def("text", &PyPrediction::text, "sample"_a, "format"_a)
        .def("compare", &PyPrediction::compare, "truth"_a, "sample"_a, "match"_a);

    nb::class_<PyStructureModel>(m, "StructureModel")
        .def(nb::init<const std::string&, int64_t, bool>(), "dir"_a, "threads"_a = 0,
             "allow_nonfinite"_a = false)
        .def_prop_ro("architecture", &PyStructureModel::architecture)
        .def_prop_ro("default_num_recycles", &PyStructureModel::default_num_recycles)
        .def_prop_ro("reads_whole_files", &PyStructureModel::reads_whole_files)
        .def("fold", &PyStructureModel::fold, "inputs"_a, "from_files"_a, "num_recycles"_a,
             "num_samples"_a, "sampling_steps"_a, "seed"_a, "on_stage"_a = nb::none());

    m.def("is_mpnn_model_name", &runtime::is_mpnn_model_name, "name"_a,
          "Whether `name` is an MPNN model name `bioinfer design --model` takes.");
    m.def("add_mpnn_search_paths", &runtime::add_mpnn_search_paths, "dirs"_a,
          "Folders (sys.path) where the ligandmpnn / proteinmpnn packages' weights are looked for.");
    m.def(
        "mpnn_model_names",
        [] {
            std::vector<std::string> out;
            for (const auto& n : runtime::mpnn_model_names()) {
                out.push_back(n.name);
                out.push_back(n.kind);
            }
            return out;
        },
        "The names `bioinfer design --model` takes (and run.py's --model_type names).");
    nb::class_<PyDesignModel>(m, "DesignModel")
        .def(nb::init<const std::string&, int64_t>(), "name_or_path"_a, "threads"_a = 0)
        .def_prop_ro("path", &PyDesignModel::path)
        .def_prop_ro("kind", &PyDesignModel::kind)
        .def("design", &PyDesignModel::design, "structure"_a, "options"_a, "out_dir"_a = "")
        .def("score", &PyDesignModel::score, "structure"_a, "options"_a, "out_dir"_a = "");

    nb::class_<PyLanguageModel>(m, "LanguageModel")
        .def(nb::init<const std::string&, std::string, const std::string&, int64_t, bool>(),
             "dir"_a, "label"_a, "precision"_a = "fp32", "threads"_a = 0,
             "allow_nonfinite"_a = false)
        .def_prop_ro("architecture", &PyLanguageModel::architecture)
        .def_prop_ro("num_layers", &PyLanguageModel::num_layers)
        .def_prop_ro("hidden_size", &PyLanguageModel::hidden_size)
        .def_prop_ro("has_logits", &PyLanguageModel::has_logits)
        .def_prop_ro("has_contacts", &PyLanguageModel::has_contacts)
        .def_prop_ro("precision", &PyLanguageModel::precision)
        .def_prop_ro("threads", &PyLanguageModel::threads)
        .def("embed", &PyLanguageModel::embed, "inputs"_a, "layers"_a, "include"_a,
             "toks_per_batch"_a = 4096, "truncate"_a = 1022, "progress"_a = false,
             "on_record"_a = nb::none());
}
