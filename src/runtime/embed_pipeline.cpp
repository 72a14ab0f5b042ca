// Embedding job on the job skeleton (runtime/jobs.h): validation up front so bad input never
// leaves partial outputs; units are batches of records; outputs written under temporary names and
// renamed when complete; manifest.json written last.
#include "runtime/embed_pipeline.h"
#include "runtime/variant_scoring.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "bioinfer/error.h"
#include "io/atomic_file.h"
#include "io/fasta.h"
#include "io/h5.h"
#include "io/model_dir.h"
#include "io/npy.h"
#include "models/esm_alphabet.h"
#include "runtime/batching.h"
#include "runtime/inputs.h"
#include "runtime/progress.h"

namespace bioinfer::runtime {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<EmbedRecord> collect_records(const std::string& input, int64_t truncate,
                                         esm::Vocab vocab) {
    std::vector<EmbedRecord> out;
    for (auto& f : collect_fasta(input)) {
        EmbedRecord r;
        r.id = f.id;
        r.source = f.source;
        r.error = f.error;
        if (r.error.empty()) {
            try {
                r.tokens = esm::tokenize(f.sequence, f.id, vocab);
            } catch (const Error& e) {
                r.error = cat("[", f.source, ":", f.line, "] ", e.what());
            }
        }
        r.original_length = int64_t(r.tokens.size());
        if (truncate > 0 && r.original_length > truncate) {
            r.tokens.resize(size_t(truncate));
            warn(cat("record '", f.id, "': ", r.original_length, " residues truncated to ", truncate));
        }
        out.push_back(std::move(r));
    }
    return out;
}

std::string h5_dataset(const std::string& array, const std::string& stem, size_t n_arrays) {
    return n_arrays == 1 ? "/" + stem : "/" + array + "/" + stem;
}

void parse_include(const std::string& list, EmbedOptions& o) {
    o.per_tok = o.mean = o.bos = o.contacts = o.logits = o.pll = false;
    size_t p = 0;
    while (p <= list.size()) {
        size_t q = list.find(',', p);
        if (q == std::string::npos) q = list.size();
        const std::string w = list.substr(p, q - p);
        if (w == "mean") o.mean = true;
        else if (w == "per_tok") o.per_tok = true;
        else if (w == "bos") o.bos = true;
        else if (w == "contacts") o.contacts = true;
        else if (w == "logits") o.logits = true;
        else if (w == "pll")
            o.pll = true;
        else
            fail("--include", cat("unknown output '", w,
                                  "': expected mean, per_tok, bos, contacts, logits or pll"));
        p = q + 1;
    }
}

std::vector<int> resolve_layers(const std::vector<int>& layers, int64_t n) {
    std::vector<int> out;
    for (int l : layers) {
        BI_CHECK(l >= -(n + 1) && l <= n, "--repr-layers", "layer ", l, " outside [", -(n + 1), ", ", n,
                 "] for a model with ", n, " layers");
        const int r = int((l + n + 1) % (n + 1));
        if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
    }
    return out;
}


namespace {

// The smallest batch the embed pipeline forms when the input has the tokens for it (see
// make_units): large enough that the GEMMs run near their rate.
constexpr int64_t kMinBatchTokens = 1024;

// The arrays each record gets, by npz key, in the order they are written.
std::vector<std::string> array_names(const std::vector<int>& layers, const EmbedOptions& opts) {
    std::vector<std::string> n;
    for (int l : layers) {
        if (opts.per_tok) n.push_back(cat("representations_", l));
        if (opts.mean) n.push_back(cat("mean_representations_", l));
        if (opts.bos) n.push_back(cat("bos_representations_", l));
    }
    if (opts.contacts) n.push_back("contacts");
    if (opts.logits) n.push_back("logits");
    if (opts.pll) n.push_back("pll");
    return n;
}

// Extracts one record's outputs from a batch result (special tokens stripped).
RecordArrays extract(const lm::Output& o, int64_t b, int64_t L, const std::vector<int>& layers,
                     const EmbedOptions& opts, int64_t D, int64_t V, float pll) {
    RecordArrays r;
    const bool any_hidden = opts.per_tok || opts.mean || opts.bos;  // else none was computed
    for (int l : any_hidden ? layers : std::vector<int>{}) {
        const float* h = o.hidden.at(l).f32() + o.offsets[size_t(b)] * D;
        if (opts.per_tok) {
            Tensor t = Tensor::empty({L, D});
            std::copy(h + D, h + (L + 1) * D, t.f32());
            r.arrays.emplace_back(cat("representations_", l), t);
        }
        if (opts.mean) {
            Tensor t = Tensor::empty({D});
            for (int64_t d = 0; d < D; ++d) {
                double s = 0;
                for (int64_t i = 1; i <= L; ++i) s += h[i * D + d];
                t.f32()[d] = float(s / double(L));
            }
            r.arrays.emplace_back(cat("mean_representations_", l), t);
        }
        if (opts.bos) {
            Tensor t = Tensor::empty({D});
            std::copy(h, h + D, t.f32());
            r.arrays.emplace_back(cat("bos_representations_", l), t);
        }
    }
    if (opts.contacts) r.arrays.emplace_back("contacts", o.contacts[size_t(b)]);
    if (opts.logits) {
        Tensor t = Tensor::empty({L, V});
        const float* lg = o.logits.f32() + o.offsets[size_t(b)] * V;
        std::copy(lg + V, lg + (L + 1) * V, t.f32());
        r.arrays.emplace_back("logits", t);
    }
    if (opts.pll) r.arrays.emplace_back("pll", Tensor::of(std::vector<float>{pll}));
    return r;
}

// One run of the embedding job: what it computes and writes, and the state its steps share (the
// records' manifest entries, the HDF5 writer, the stats). spec() hands the steps to run_job.
struct EmbedJob {
    // A batch's forward pass, then each record's arrays (special tokens stripped), extracted once
    // for the record and those with the same sequence.
    struct Batch {
        std::vector<size_t> records;  // the representatives, in batch order
        lm::Output out;
        std::vector<float> pll;         // per representative, with --include pll
        size_t extracted = size_t(-1);  // the position in the batch `arrays` holds
        RecordArrays arrays = {};
    };

    lm::LanguageModel& model;
    const std::vector<EmbedRecord>& records;
    const EmbedOptions& opts;
    const bool write_outputs;
    const std::vector<int> layers;
    bool any_hidden = false, any_forward = false;
    lm::Request req;
    std::vector<std::string> names;
    fs::path out_dir;
    std::string format, h5_path;
    json layers_json;
    std::vector<std::string> include;
    EmbedStats stats;
    std::vector<json> rec_json;
    // Outputs already there: an npz holding every requested array, or those datasets in the
    // existing embeddings.h5 (carried over into the new file).
    std::map<size_t, std::vector<std::pair<std::string, io::LoadedArray>>> carried;  // h5 only
    std::unique_ptr<io::H5Writer> h5;
    std::mutex mu;  // the HDF5 writer, the manifest and the stats

    // Checks the request against the model before anything runs.
    EmbedJob(lm::LanguageModel& model_, const std::vector<EmbedRecord>& records_,
             const EmbedOptions& opts_, bool write_outputs_)
        : model(model_),
          records(records_),
          opts(opts_),
          write_outputs(write_outputs_),
          layers(resolve_layers(opts_.repr_layers, model_.num_layers())) {
        BI_CHECK(opts.per_tok || opts.mean || opts.bos || opts.contacts || opts.logits || opts.pll,
                 "--include", "nothing to output");
        BI_CHECK(opts.format == "npz" || opts.format == "h5", "--format", "unknown format '",
                 opts.format, "': expected npz or h5");
        BI_CHECK((!opts.logits && !opts.pll) || model.has_logits(), "--include",
                 opts.logits ? "logits" : "pll", " need an LM head, and the ",
                 "checkpoint has none (use a masked-LM checkpoint)");
        BI_CHECK(!opts.contacts || model.has_contacts(), "--include",
                 "contacts need a contact head, and ", model.no_contacts_reason());
        any_hidden = opts.per_tok || opts.mean || opts.bos;
        if (any_hidden) req.layers = layers;
        req.logits = opts.logits;
        req.contacts = opts.contacts;
        names = array_names(layers, opts);
        // A shard writes npz into its own folder; `bioinfer merge` makes the single output.
        const Shard& shard = opts.shard;
        out_dir = fs::path(shard_dir(opts.out_dir, shard));
        format = shard.sharded() ? "npz" : opts.format;
        h5_path = (out_dir / "embeddings.h5").string();
        layers_json = any_hidden ? json(layers) : json::array();
        if (opts.mean) include.push_back("mean");
        if (opts.per_tok) include.push_back("per_tok");
        if (opts.bos) include.push_back("bos");
        if (opts.contacts) include.push_back("contacts");
        if (opts.logits) include.push_back("logits");
        if (opts.pll) include.push_back("pll");
        any_forward = any_hidden || opts.logits || opts.contacts;
        for (size_t i = 0; i < records.size(); ++i)
            stats.results.push_back(
                target_result(i, records[i].id, records[i].source, records[i].error));
        rec_json.resize(records.size());
    }

    // tokens with <cls> and <eos>
    int64_t length(size_t i) const { return int64_t(records[i].tokens.size()) + 2; }

    // A record whose outputs are written (or already there): its manifest entry; returns its
    // files.
    json manifest_entry(size_t i, const std::vector<std::pair<std::string, Shape>>& shapes) {
        const EmbedRecord& rec = records[i];
        const std::string stem = safe_file_stem(rec.id);
        json arrays = json::object();
        for (auto& [k, sh] : shapes) arrays[k] = sh;
        json rj = {{"id", rec.id},
                   {"source", rec.source},
                   {"length", int64_t(rec.tokens.size())},
                   {"original_length", rec.original_length},
                   {"truncated", rec.original_length != int64_t(rec.tokens.size())},
                   {"arrays", arrays}};
        if (!stats.results[i].duplicate_of.empty())
            rj["duplicate_of"] = stats.results[i].duplicate_of;
        if (format == "npz") {
            rj["file"] = stem + ".npz";
        } else {
            rj["file"] = "embeddings.h5";
            rj["datasets"] = json::array();
            for (auto& [k, sh] : shapes)
                rj["datasets"].push_back(h5_dataset(k, stem, shapes.size()));
        }
        rec_json[i] = rj;
        return json{{"file", rj["file"]}};
    }

    // Batches are formed over the whole input, then dealt to shards, so a sequence is computed in
    // the same batch (to the bit) whatever the number of shards and however often a run resumes.
    // At least 32 batches when the input allows (smaller ones for a small input), so that dealing
    // them gives the shards similar work; this depends on the input alone, not on the shards.
    // Never below kMinBatchTokens, though: one sequence a batch ran every linear layer as a
    // 258-row GEMM on 8 x 256 tokens, at half the rate of a packed batch, streaming the weights
    // once per sequence (ESM C 600M fp32 on a 2-core AVX2 CPU went from 0.67x to 1.15x
    // transformers with this floor: bench/results/lm_cpu_int8.json and docs/performance.md).
    std::vector<std::vector<size_t>> make_units(const std::vector<size_t>& reps) const {
        std::vector<int64_t> lengths;
        int64_t all_tokens = 0;
        for (size_t r : reps) {
            lengths.push_back(length(r));
            all_tokens += lengths.back();
        }
        const int64_t per_batch = std::min<int64_t>(
            opts.toks_per_batch, std::max<int64_t>(kMinBatchTokens, (all_tokens + 31) / 32));
        std::vector<std::vector<size_t>> batches = make_batches(lengths, per_batch);
        for (auto& b : batches)
            for (auto& j : b) j = reps[j];
        return batches;
    }

    // Record i's manifest entry when its outputs are already there (its h5 datasets carried).
    std::optional<json> done(size_t i) {
        const std::string stem = safe_file_stem(records[i].id);
        std::vector<std::pair<std::string, Shape>> shapes;
        try {
            if (format == "npz") {
                const fs::path f = out_dir / (stem + ".npz");
                if (!fs::exists(f)) return std::nullopt;
                const auto arrays = io::npz_shapes(f.string());  // headers only
                for (const auto& n : names) {
                    auto it = arrays.find(n);
                    if (it == arrays.end()) break;
                    shapes.emplace_back(n, it->second);
                }
            } else {
                if (!fs::exists(h5_path)) return std::nullopt;
                std::vector<std::pair<std::string, io::LoadedArray>> got;
                for (const auto& n : names) {
                    io::LoadedArray a;
                    a.data = io::h5_read(h5_path, h5_dataset(n, stem, names.size()), &a.shape);
                    shapes.emplace_back(n, a.shape);
                    got.emplace_back(n, std::move(a));
                }
                carried[i] = std::move(got);
            }
        } catch (const Error&) {  // missing or unreadable: computed again
            shapes.clear();
        }
        if (shapes.size() != names.size()) {
            carried.erase(i);
            return std::nullopt;
        }
        return manifest_entry(i, shapes);
    }

    std::string label(const std::vector<size_t>& batch) const {
        int64_t ntok = 0;
        for (size_t i : batch) ntok += length(i);
        return cat(batch.size() == 1 ? records[batch[0]].id : cat(batch.size(), " sequences"), " (",
                   ntok, " tokens)");
    }

    // The batch's forward pass and, with --include pll, each record's pseudo-log-likelihood.
    Batch compute(const std::vector<size_t>& batch, const StageFn& stage) {
        std::vector<std::vector<int32_t>> toks;
        int64_t ntok = 0;
        for (size_t i : batch) {
            toks.push_back(esm::with_specials(records[i].tokens));
            ntok += int64_t(toks.back().size());
        }
        Batch b{batch, {}};
        if (any_forward) {
            stage("language model");
            b.out = model.forward(toks, req);
        }
        if (opts.pll) {
            stage("pseudo-log-likelihood");
            ScoreOptions so;
            so.toks_per_batch = opts.toks_per_batch;
            for (size_t i : batch)
                b.pll.push_back(float(pseudo_log_likelihood(model, records[i].tokens, so)));
        }
        std::lock_guard<std::mutex> lock(mu);
        stats.sequences += int64_t(batch.size());
        stats.tokens += ntok;
        return b;
    }

    // Record m's arrays (the batch's representative at bi): written (npz, or datasets of the
    // HDF5 file) or handed to the sink; returns its files.
    json write(Batch& b, size_t bi, size_t m) {
        if (!write_outputs && !opts.sink) return json::object();
        if (b.extracted != bi) {
            const int64_t L = int64_t(records[b.records[bi]].tokens.size());
            b.arrays = extract(b.out, int64_t(bi), L, layers, opts, model.hidden_size(),
                               model.logits_width(), opts.pll ? b.pll[bi] : 0.0f);
            b.extracted = bi;
        }
        const RecordArrays& ra = b.arrays;
        // NaN or Inf (weights loaded with --allow-nonfinite, overflow): this record fails
        // alone, nothing of it written
        for (const auto& [k, t] : ra.arrays)
            BI_CHECK(io::first_nonfinite(t) < 0, records[m].id, "output '", k,
                     "' holds NaN or Inf; nothing written for this record");
        if (!write_outputs) {
            opts.sink(m, ra);
            return json::object();
        }
        const std::string stem = safe_file_stem(records[m].id);
        std::vector<std::pair<std::string, Shape>> shapes;
        for (auto& [k, t] : ra.arrays) shapes.emplace_back(k, t.shape());
        if (format == "npz") {
            std::vector<io::NamedArray> na;
            for (auto& [k, t] : ra.arrays) na.push_back({k, t.shape(), t.f32()});
            io::write_npz((out_dir / (stem + ".npz")).string(), na);
        } else {
            std::lock_guard<std::mutex> lock(mu);
            for (auto& [k, t] : ra.arrays)
                h5->write(h5_dataset(k, stem, ra.arrays.size()), t.shape(), t.f32());
        }
        std::lock_guard<std::mutex> lock(mu);
        return manifest_entry(m, shapes);
    }

    // The HDF5 file completed (carried datasets added, committed, its records journaled) and
    // manifest.json written, once the batches are done.
    void finish(Journal* journal) {
        const std::vector<TargetResult>& results = stats.results;
        json manifest_records = json::array();
        bool any_output = false;
        for (size_t i = 0; i < records.size(); ++i) {
            if (results[i].status != "ok" && results[i].status != "skipped") continue;
            manifest_records.push_back(rec_json[i]);
            any_output = true;
        }
        if (h5) {  // the journal lists h5 records once the file is in place
            for (auto& [i, arrays] : carried)
                for (auto& [k, a] : arrays)
                    h5->write(h5_dataset(k, safe_file_stem(records[i].id), arrays.size()), a.shape,
                              a.data.data());
            if (any_output) h5->commit();
            std::vector<const TargetResult*> written;
            for (const auto& r : results)
                if (r.status == "ok") written.push_back(&r);
            journal->add(written);
        }
        json manifest = {
            {"tool", "bioinfer embed"},
            {"model", opts.model_label},
            {"architecture", model.architecture()},
            {"num_layers", model.num_layers()},
            {"hidden_size", model.hidden_size()},
            {"layers", layers_json},
            {"include", include},
            {"dtype", "float32"},
            {"precision", opts.precision},
            {"format", format},
            {"records", manifest_records},
        };
        if (format == "h5")
            manifest["h5_layout"] = "one array per record: /<id>; several: /<array>/<id>";
        if (any_output)
            io::write_file_atomic((out_dir / "manifest.json").string(), manifest.dump(2) + "\n");
    }

    // The job's hooks for run_job, each one of the steps above.
    JobSpec spec() {
        JobSpec spec;
        spec.tool = "bioinfer embed";
        spec.job = {{"format", opts.format},
                    {"include", include},
                    {"layers", layers_json},
                    {"precision", opts.precision}};
        spec.progress = write_outputs
                            ? embed_progress_options(opts)
                            : ProgressOptions{.label = "embed", .quiet = true, .log_path = ""};
        spec.write_outputs = write_outputs;
        // h5: every record's arrays go into one file, in place once committed at the end
        spec.journal_when_written = format == "npz";
        spec.run_time = RunTime::ComputeShare;
        // identical inputs: the same tokens after truncation
        spec.dedup_key = [this](size_t i) {
            return std::string(reinterpret_cast<const char*>(records[i].tokens.data()),
                               records[i].tokens.size() * 4);
        };
        spec.cost = [this](size_t i) { return length(i); };
        spec.work = [this](size_t i) { return length(i); };
        spec.make_units = [this](const std::vector<size_t>& reps) { return make_units(reps); };
        spec.done = [this](size_t i) { return done(i); };
        spec.label = [this](const std::vector<size_t>& batch) { return label(batch); };
        spec.start = [this] {
            if (write_outputs && format == "h5") h5 = std::make_unique<io::H5Writer>(h5_path);
        };
        spec.unit =
            unit_of_work<Batch>([this](const Worker&, const std::vector<size_t>& batch,
                                       const StageFn& stage) { return compute(batch, stage); },
                                [this](Batch& b, size_t bi, size_t m, const StageFn&) -> json {
                                    return write(b, bi, m);
                                });
        spec.finish = [this](Journal* journal) { finish(journal); };
        return spec;
    }
};

}  // namespace

ProgressOptions embed_progress_options(const EmbedOptions& o) {
    return {.label = "embed", .items = "sequences", .tokens = "tokens", .quiet = o.quiet, .log_path = o.log_path};
}

EmbedStats run_embed(lm::LanguageModel& model, const std::vector<EmbedRecord>& records,
                     const EmbedOptions& opts, bool write_outputs) {
    EmbedJob job(model, records, opts, write_outputs);
    const JobSpec spec = job.spec();
    job.stats.seconds = run_job(opts, spec, job.stats.results);
    return std::move(job.stats);
}

}  // namespace bioinfer::runtime
