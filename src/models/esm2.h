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
#include "nn/transformer.h"

namespace bioinfer::esm {

struct Esm2Config {
    int64_t vocab = 33, hidden = 0, layers = 0, heads = 0, intermediate = 0;
    int64_t max_positions = 1026;
    float ln_eps = 1e-5f;
    float rope_theta = 10000.0f;
    bool token_dropout = true;
    int32_t mask_id = 32, pad_id = 1;
    static Esm2Config from_json(const nlohmann::json& cfg, const std::string& where);
};

struct Esm2Request {
    std::vector<int> layers;  // resolved indices in [0, num_layers]; 0 = embeddings
    bool logits = false;
    bool contacts = false;
    // Optional observer of block intermediates: (layer, name, tensor (B, T, ...)).
    std::function<void(int layer, const std::string& name, const Tensor& t)> tap;
};

struct Esm2Output {
    int64_t B = 0, T = 0;
    std::map<int, Tensor> hidden;   // layer -> (B, T, D); layer num_layers is after the final LN
    Tensor logits;                  // (B, T, V)
    std::vector<Tensor> contacts;   // per sequence (L, L), residues only
};

class Esm2Model {
public:
    static std::unique_ptr<Esm2Model> load(const io::ModelDir& dir);

    const Esm2Config& config() const { return cfg_; }
    bool has_lm_head() const { return lm_dense_.w.defined(); }
    bool has_contact_head() const { return contact_w_.defined(); }

    // tokens: one vector per sequence, each <cls> residues... <eos> (ragged; padded here).
    Esm2Output forward(const std::vector<std::vector<int32_t>>& tokens, const Esm2Request& req);

private:
    Esm2Config cfg_;
    Tensor word_emb_;  // (V, D)
    nn::Rotary rotary_;
    std::vector<nn::PreLnBlock> blocks_;
    nn::LayerNorm final_ln_;
    nn::Linear lm_dense_;
    nn::LayerNorm lm_ln_;
    Tensor lm_decoder_;  // (V, D), tied to word_emb_ when the checkpoint omits it
    Tensor lm_bias_;     // (V)
    Tensor contact_w_;   // (layers * heads)
    float contact_b_ = 0;
};

}  // namespace bioinfer::esm
