// ESM-2 (Hugging Face EsmForMaskedLM / EsmModel checkpoints of any size): hyper-parameters from
// config.json, a declarative weight table, and a batched forward exact to the upstream model.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "models/esm_alphabet.h"
#include "models/language_model.h"
#include "nn/transformer.h"

namespace bioinfer::esm {

struct Esm2Config {
    int64_t vocab = 33, hidden = 0, layers = 0, heads = 0, intermediate = 0;
    int64_t max_positions = 1026;
    float ln_eps = 1e-5f;
    float rope_theta = 10000.0f;
    bool token_dropout = true;
    int32_t mask_id = 32, pad_id = 1;
    // folding_stem: the config of an ESMFold checkpoint, whose ESM-2 stem this is.
    static Esm2Config from_json(const nlohmann::json& cfg, const std::string& where,
                                bool folding_stem = false);
};

// Tensors an ESM-2 checkpoint may hold that bioinfer does not read, as name patterns under the
// encoder prefix `p` ("esm." or ""): ModelDir::check_consumed's list for ESM-2 and ESMFold's stem.
std::vector<std::string> esm2_ignorable_tensors(const std::string& p);

class Esm2Model : public lm::LanguageModel {
public:
    // folding_stem: load the ESM-2 stem of an ESMFold checkpoint (EsmForProteinFolding); the
    // caller then accounts for the checkpoint's tensors (ESMFold's load does). Otherwise every
    // tensor of `dir` must be read or ignorable (esm2_ignorable_tensors).
    static std::unique_ptr<Esm2Model> load(const io::ModelDir& dir, bool folding_stem = false);

    const Esm2Config& config() const { return cfg_; }
    std::string architecture() const override { return "esm2"; }
    int64_t num_layers() const override { return cfg_.layers; }
    int64_t hidden_size() const override { return cfg_.hidden; }
    int64_t logits_width() const override { return cfg_.vocab; }
    bool has_logits() const override { return lm_head_.defined(); }
    bool has_contacts() const override { return contact_w_.defined(); }
    std::string no_contacts_reason() const override {
        return "the checkpoint has no contact_head.regression tensors";
    }
    // The config keeps fairseq's learned-position numbering (ESM-1b's), which transformers' ESM
    // follows: position ids start after padding_idx, so 1026 positions hold 1024 tokens.
    int64_t context() const override { return cfg_.max_positions - (cfg_.pad_id + 1); }
    std::vector<int32_t> tokenize(const std::string& seq, const std::string& record) const override {
        return esm::tokenize(seq, record, Vocab::Esm2);
    }
    lm::Output forward(const std::vector<std::vector<int32_t>>& tokens,
                       const lm::Request& req) override;

private:
    Esm2Config cfg_;
    Tensor word_emb_;  // (V, D)
    nn::Rotary rotary_;
    std::vector<nn::PreLnBlock> blocks_;
    nn::LayerNorm final_ln_;
    nn::MaskedLmHead lm_head_;  // decoder tied to word_emb_ when the checkpoint omits it
    Tensor contact_w_;   // (layers * heads)
    float contact_b_ = 0;
};

}  // namespace bioinfer::esm
