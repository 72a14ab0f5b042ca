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

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bioinfer/error.h"
#include "io/model_dir.h"
#include "models/esm_alphabet.h"
#include "models/language_model.h"
#include "ops/ops.h"
#include "runtime/embed_pipeline.h"
#include "runtime/hub.h"
#include "runtime/inputs.h"
#include "runtime/jobs.h"

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

class PyLanguageModel {
  public:
    PyLanguageModel(const std::string& dir, std::string label, const std::string& precision,
                    int threads)
        : label_(std::move(label)), precision_(precision), threads_(threads) {
        const io::ModelDir md = io::ModelDir::open(dir);
        arch_ = lm::detect_architecture(md);
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
                   int64_t toks_per_batch, int64_t truncate, bool progress) {
        std::vector<runtime::EmbedRecord> records;
        records.reserve(inputs.size());
        for (const auto& [id, seq] : inputs) {
            runtime::EmbedRecord r;
            r.id = id;
            r.source = "<python>";
            try {
                r.tokens = esm::tokenize(seq, id, lm::vocab_of(arch_));
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
        opts.sink = [&](size_t i, runtime::RecordArrays a) { got[i] = std::move(a); };
        opts.cancelled = [] {
            nb::gil_scoped_acquire gil;
            return PyErr_CheckSignals() != 0;  // Ctrl-C: its KeyboardInterrupt stays set
        };
        runtime::EmbedStats stats;
        {
            nb::gil_scoped_release release;
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
    int threads_;
    std::unique_ptr<lm::LanguageModel> model_;
};

}  // namespace

NB_MODULE(_bioinfer, m) {
    m.doc() = "bioinfer's engine: the C++ library the bioinfer CLI runs.";

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
    m.def(
        "known_model", [](const std::string& name) { return runtime::find_model(name) != nullptr; },
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

    nb::class_<PyLanguageModel>(m, "LanguageModel")
        .def(nb::init<const std::string&, std::string, const std::string&, int>(), "dir"_a,
             "label"_a, "precision"_a = "fp32", "threads"_a = 0)
        .def_prop_ro("architecture", &PyLanguageModel::architecture)
        .def_prop_ro("num_layers", &PyLanguageModel::num_layers)
        .def_prop_ro("hidden_size", &PyLanguageModel::hidden_size)
        .def_prop_ro("has_logits", &PyLanguageModel::has_logits)
        .def_prop_ro("has_contacts", &PyLanguageModel::has_contacts)
        .def_prop_ro("precision", &PyLanguageModel::precision)
        .def_prop_ro("threads", &PyLanguageModel::threads)
        .def("embed", &PyLanguageModel::embed, "inputs"_a, "layers"_a, "include"_a,
             "toks_per_batch"_a = 4096, "truncate"_a = 1022, "progress"_a = false);
}
