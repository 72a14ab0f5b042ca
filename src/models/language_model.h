// What `bioinfer embed` needs from a protein language model (ESM-2, ESM C): its sizes, its
// tokenizer, and a batched forward that returns the requested hidden states and heads.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "models/esm_alphabet.h"

namespace bioinfer::lm {

struct Request {
    // Layers to return, in [0, num_layers]: 0 is the embedding, l in 1..num_layers-1 the output
    // of block l, num_layers the final output after the model's last LayerNorm.
    std::vector<int> layers;
    bool logits = false;
    bool contacts = false;
    // Optional observer of block intermediates: (layer, name, tensor (rows, ...)), rows packed
    // as in Output.
    std::function<void(int layer, const std::string& name, const Tensor& t)> tap;
};

// The batch runs packed, without padding: sequence b's tokens (<cls> ... <eos>) are rows
// [offsets[b], offsets[b+1]) of every per-token tensor.
struct Output {
    std::vector<int64_t> offsets;   // B + 1
    std::map<int, Tensor> hidden;   // layer -> (rows, D)
    Tensor logits;                  // (rows, V)
    std::vector<Tensor> contacts;   // per sequence (L, L), residues only
    int64_t batch() const { return int64_t(offsets.size()) - 1; }
};

class LanguageModel {
public:
    virtual ~LanguageModel() = default;
    virtual std::string architecture() const = 0;  // "esm2", "esmc"
    virtual int64_t num_layers() const = 0;
    virtual int64_t hidden_size() const = 0;
    virtual int64_t logits_width() const = 0;
    virtual bool has_logits() const = 0;
    virtual bool has_contacts() const = 0;
    // Why has_contacts() is false, for the error of a run that asks for contacts.
    virtual std::string no_contacts_reason() const { return "this model has none"; }
    // The most tokens (<cls> and <eos> included) the checkpoint's positions were made for, from
    // its config: what one forward should hold for the model to see inputs like its training
    // ones. Both architectures use rotary positions, so longer inputs still run.
    virtual int64_t context() const = 0;
    // Residue tokens of one sequence (no <cls>/<eos>); a letter outside the model's alphabet is
    // an error naming `record`.
    virtual std::vector<int32_t> tokenize(const std::string& seq, const std::string& record) const = 0;
    // tokens: one vector per sequence, each <cls> residues... <eos> (ragged; packed inside).
    virtual Output forward(const std::vector<std::vector<int32_t>>& tokens, const Request& req) = 0;
};

// The architecture a model directory holds ("esm2", "esmc"), by the registry's rows
// (models/registry.h); an unsupported one is an error naming the file.
std::string detect_architecture(const io::ModelDir& dir);
// Its tokenizer's alphabet, known before any weight is read.
esm::Vocab vocab_of(const io::ModelDir& dir);
// Loads whichever supported language model the directory holds.
std::unique_ptr<LanguageModel> load(const io::ModelDir& dir);

}  // namespace bioinfer::lm
