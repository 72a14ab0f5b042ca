// Embedding job: validation up front so bad input never leaves partial outputs; outputs written
// under temporary names and renamed when complete; manifest.json written last.
#include "runtime/embed_pipeline.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "bioinfer/error.h"
#include "io/atomic_file.h"
#include "io/fasta.h"
#include "io/h5.h"
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
        r.tokens = esm::tokenize(f.sequence, f.id, vocab);
        r.original_length = int64_t(r.tokens.size());
        if (truncate > 0 && r.original_length > truncate) {
            r.tokens.resize(size_t(truncate));
            warn(cat("record '", f.id, "': ", r.original_length, " residues truncated to ", truncate));
        }
        out.push_back(std::move(r));
    }
    return out;
}

void parse_include(const std::string& list, EmbedOptions& o) {
    o.per_tok = o.mean = o.bos = o.contacts = o.logits = false;
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
        else fail("--include", cat("unknown output '", w, "': expected mean, per_tok, bos, contacts or logits"));
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

struct RecordArrays {
    std::vector<std::pair<std::string, Tensor>> arrays;  // npz key -> array
};

// Extracts one record's outputs from a batch result (special tokens stripped).
RecordArrays extract(const lm::Output& o, int64_t b, int64_t L, const std::vector<int>& layers,
                     const EmbedOptions& opts, int64_t D, int64_t V) {
    RecordArrays r;
    for (int l : layers) {
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
    return r;
}

}  // namespace

EmbedStats run_embed(lm::LanguageModel& model, const std::vector<EmbedRecord>& records,
                     const EmbedOptions& opts, bool write_outputs) {
    const std::vector<int> layers = resolve_layers(opts.repr_layers, model.num_layers());
    BI_CHECK(opts.per_tok || opts.mean || opts.bos || opts.contacts || opts.logits, "--include",
             "nothing to output");
    BI_CHECK(opts.format == "npz" || opts.format == "h5", "--format", "unknown format '",
             opts.format, "': expected npz or h5");
    BI_CHECK(!opts.logits || model.has_logits(), "--include", "logits need an LM head, and the ",
             "checkpoint has none (use a masked-LM checkpoint)");
    BI_CHECK(!opts.contacts || model.has_contacts(), "--include", "contacts need a contact head, and ",
             model.architecture() == "esm2" ? "the checkpoint has no contact_head.regression tensors"
                                            : "this model has none");
    const bool any_hidden = opts.per_tok || opts.mean || opts.bos;
    lm::Request req;
    if (any_hidden) req.layers = layers;
    req.logits = opts.logits;
    req.contacts = opts.contacts;

    std::vector<int64_t> lengths;
    for (auto& r : records) lengths.push_back(int64_t(r.tokens.size()) + 2);
    auto batches = make_batches(lengths, opts.toks_per_batch);

    std::unique_ptr<io::H5Writer> h5;
    if (write_outputs) {
        std::error_code ec;
        fs::create_directories(opts.out_dir, ec);
        BI_CHECK(!ec && fs::is_directory(opts.out_dir), opts.out_dir,
                 "cannot create output folder: ", ec.message());
        if (opts.format == "h5") h5 = std::make_unique<io::H5Writer>((fs::path(opts.out_dir) / "embeddings.h5").string());
    }
    json manifest_records = json::array();
    std::vector<json> rec_json(records.size());

    EmbedStats stats;
    Progress progress("embed", int64_t(records.size()), opts.quiet || !write_outputs);
    const auto t0 = std::chrono::steady_clock::now();
    for (auto& batch : batches) {
        std::vector<std::vector<int32_t>> toks;
        int64_t ntok = 0;
        for (size_t i : batch) {
            std::vector<int32_t> t = esm::with_specials(records[i].tokens);
            ntok += int64_t(t.size());
            toks.push_back(std::move(t));
        }
        lm::Output out = model.forward(toks, req);
        if (write_outputs) {
            for (size_t bi = 0; bi < batch.size(); ++bi) {
                const EmbedRecord& rec = records[batch[bi]];
                const int64_t L = int64_t(rec.tokens.size());
                RecordArrays ra = extract(out, int64_t(bi), L, layers, opts, model.hidden_size(),
                                          model.logits_width());
                const std::string stem = safe_file_stem(rec.id);
                json arrays = json::object();
                for (auto& [k, t] : ra.arrays) arrays[k] = t.shape();
                json rj = {{"id", rec.id}, {"source", rec.source}, {"length", L},
                           {"original_length", rec.original_length},
                           {"truncated", rec.original_length != L}, {"arrays", arrays}};
                if (opts.format == "npz") {
                    std::vector<io::NamedArray> na;
                    for (auto& [k, t] : ra.arrays) na.push_back({k, t.shape(), t.f32()});
                    io::write_npz((fs::path(opts.out_dir) / (stem + ".npz")).string(), na);
                    rj["file"] = stem + ".npz";
                } else {
                    const bool flat = ra.arrays.size() == 1;  // UniProt layout: /<accession>
                    for (auto& [k, t] : ra.arrays)
                        h5->write(flat ? "/" + stem : "/" + k + "/" + stem, t.shape(), t.f32());
                    rj["file"] = "embeddings.h5";
                    rj["datasets"] = json::array();
                    for (auto& [k, t] : ra.arrays) rj["datasets"].push_back(flat ? "/" + stem : "/" + k + "/" + stem);
                }
                rec_json[batch[bi]] = rj;
            }
        }
        stats.sequences += int64_t(batch.size());
        stats.tokens += ntok;
        progress.advance(int64_t(batch.size()), ntok);
    }
    stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    progress.finish();
    if (!write_outputs) return stats;

    if (h5) h5->commit();
    json layers_json = any_hidden ? json(layers) : json::array();
    std::vector<std::string> include;
    if (opts.mean) include.push_back("mean");
    if (opts.per_tok) include.push_back("per_tok");
    if (opts.bos) include.push_back("bos");
    if (opts.contacts) include.push_back("contacts");
    if (opts.logits) include.push_back("logits");
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
        {"format", opts.format},
        {"records", rec_json},
    };
    if (opts.format == "h5")
        manifest["h5_layout"] = "one array per record: /<id>; several: /<array>/<id>";
    io::write_file_atomic((fs::path(opts.out_dir) / "manifest.json").string(), manifest.dump(2) + "\n");
    return stats;
}

}  // namespace bioinfer::runtime
