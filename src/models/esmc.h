// ESM C (EvolutionaryScale / Biohub; 300M, 600M, 6B): hyper-parameters, a declarative weight table
// for both checkpoint layouts (Hugging Face `EsmcForMaskedLM` safetensors and the original `esm`
// package state dict), and the batched forward on the shared pre-LN block.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "models/esm_alphabet.h"
#include "models/language_model.h"
#include "nn/transformer.h"

namespace bioinfer::esm {

struct EsmcConfig {
    int64_t vocab = 64, hidden = 0, layers = 0, heads = 0, intermediate = 0;
    float rope_theta = 10000.0f;
    float ln_eps = 1e-5f;  // torch.nn.LayerNorm's default, used by every ESM C LayerNorm
    // Tokens per sequence the positions were made for: config.json's max_position_embeddings
    // (rotary positions from 0, none reserved); 2048, transformers' default, for the esm
    // package's checkpoints, which carry no config.
    int64_t max_positions = 2048;
    // Hidden width of the SwiGLU FFN: 8/3 * d rounded up to a multiple of 256.
    static int64_t swiglu_hidden(int64_t d) { return (8 * d / 3 + 255) / 256 * 256; }
    static EsmcConfig from_hf_json(const nlohmann::json& cfg, const std::string& where);
};

// The released configurations (d, layers, heads), keyed "esmc-300m", "esmc-600m", "esmc-6b".
EsmcConfig esmc_preset(const std::string& name);

// The name map of one ESM C checkpoint layout: both layouts share the pre-LN block and the head,
// under different names.
struct EsmcLayout {
    std::string embed;       // (V, D) embedding weight
    std::string layer;       // + index + "." = a block's prefix
    std::string final_norm;  // LayerNorm without bias
    nn::PreLnBlockNames block;
    nn::MaskedLmHeadNames head;
    std::vector<std::string> ignorable;  // stored by upstream, not read (ModelDir::check_consumed)
    // Hugging Face EsmcForMaskedLM (`prefix` "esmc.") or a bare EsmcModel (prefix "").
    static EsmcLayout hf(const std::string& prefix);
    // The esm package's ESMC state dict (.pth).
    static EsmcLayout original();
};

class EsmcModel : public lm::LanguageModel {
public:
    // Either layout, detected from the tensor names: Hugging Face (config.json with model_type
    // "esmc" + safetensors, `esmc.layers.*`) or the esm package's state dict (a .pth with
    // `transformer.blocks.*`, hyper-parameters read off the tensor shapes).
    static std::unique_ptr<EsmcModel> load(const io::ModelDir& dir);
    // A tower bundled in another model's checkpoint (ESMFold2's `esmc.`): its config JSON
    // (transformers' EsmcConfig) and tensor prefix; the other tensors are the caller's, so load
    // accounting is left to it. `where` names the source in errors.
    static std::unique_ptr<EsmcModel> load_embedded(const io::ModelDir& dir,
                                                    const nlohmann::json& config,
                                                    const std::string& prefix,
                                                    const std::string& where);
    // True when the directory holds the esm package's layout.
    static bool is_original_layout(const io::ModelDir& dir);

    const EsmcConfig& config() const { return cfg_; }
    std::string architecture() const override { return "esmc"; }
    int64_t num_layers() const override { return cfg_.layers; }
    int64_t hidden_size() const override { return cfg_.hidden; }
    int64_t logits_width() const override { return cfg_.vocab; }
    bool has_logits() const override { return head_.defined(); }
    bool has_contacts() const override { return false; }
    int64_t context() const override { return cfg_.max_positions; }
    std::vector<int32_t> tokenize(const std::string& seq, const std::string& record) const override {
        return esm::tokenize(seq, record, Vocab::Esmc);
    }
    lm::Output forward(const std::vector<std::vector<int32_t>>& tokens,
                       const lm::Request& req) override;

private:
    EsmcConfig cfg_;
    Tensor embed_;  // (V, D)
    nn::Rotary rotary_;
    std::vector<nn::PreLnBlock> blocks_;
    nn::LayerNorm final_ln_;  // no bias
    nn::MaskedLmHead head_;  // the sequence head
    void init_common();
    // Embedding, blocks, final norm and (when stored) head under `names`; then the accounting.
    void load_weights(const io::ModelDir& dir, const EsmcLayout& names, bool check_consumed = true);
    static std::unique_ptr<EsmcModel> load_hf(const io::ModelDir& dir);
    static std::unique_ptr<EsmcModel> load_original(const io::ModelDir& dir);
};

}  // namespace bioinfer::esm
