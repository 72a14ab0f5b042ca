// ESM C forward, following transformers' EsmcForMaskedLM and the esm package's ESMC: embedding
// (no scaling), then the shared encoder stack: pre-LN blocks with q/k LayerNorm over the full
// width, rotary on positions 0..T-1, attention between non-pad tokens, SwiGLU FFN, both residual
// branches divided by sqrt(n_layers / 36), final LayerNorm without bias; sequence head to 64
// logits.
#include "models/esmc.h"

#include <algorithm>
#include <cmath>

#include "bioinfer/error.h"

namespace bioinfer::esm {

using io::config_get;
using io::config_get_or;

EsmcConfig EsmcConfig::from_hf_json(const nlohmann::json& j, const std::string& where) {
    EsmcConfig c;
    const std::string type = config_get_or<std::string>(j, "model_type", "", where);
    BI_CHECK(type == "esmc", where, "model_type '", type, "' is not ESM C");
    c.vocab = config_get<int64_t>(j, "vocab_size", where);
    c.hidden = config_get<int64_t>(j, "hidden_size", where);
    c.layers = config_get<int64_t>(j, "num_hidden_layers", where);
    c.heads = config_get<int64_t>(j, "num_attention_heads", where);
    c.intermediate = config_get<int64_t>(j, "intermediate_size", where);
    BI_CHECK(c.hidden > 0 && c.layers > 0 && c.heads > 0 && c.intermediate > 0, where,
             "hidden_size, num_hidden_layers, num_attention_heads and intermediate_size must be > 0");
    BI_CHECK(c.hidden % c.heads == 0 && (c.hidden / c.heads) % 2 == 0, where, "hidden_size ", c.hidden,
             " must split into ", c.heads, " heads of even width");
    BI_CHECK(c.vocab >= kVocab, where, "vocab_size ", c.vocab, " is smaller than the ESM alphabet (",
             kVocab, ")");
    const int64_t head_dim = config_get_or<int64_t>(j, "head_dim", c.hidden / c.heads, where);
    BI_CHECK(head_dim == c.hidden / c.heads, where, "head_dim ", head_dim, " != hidden_size / heads");
    const int64_t kv = config_get_or<int64_t>(j, "num_key_value_heads", c.heads, where);
    BI_CHECK(kv == c.heads, where, "num_key_value_heads ", kv, " != num_attention_heads (ESM C has no GQA)");
    const std::string act = config_get_or<std::string>(j, "hidden_act", "silu", where);
    BI_CHECK(act == "silu", where, "hidden_act '", act, "' is not supported (ESM C uses silu)");
    BI_CHECK(!config_get_or<bool>(j, "attention_bias", false, where) &&
                 !config_get_or<bool>(j, "mlp_bias", false, where),
             where, "attention_bias / mlp_bias are not supported (ESM C has none)");
    double theta = config_get_or<double>(j, "rope_theta", 10000.0, where);
    if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
        const auto& rp = j["rope_parameters"];
        const std::string rt = config_get_or<std::string>(rp, "rope_type", "default", where);
        BI_CHECK(rt == "default", where, "rope_type '", rt, "' is not supported");
        theta = config_get_or<double>(rp, "rope_theta", theta, where);
    }
    c.rope_theta = float(theta);
    c.max_positions = config_get_or<int64_t>(j, "max_position_embeddings", c.max_positions, where);
    BI_CHECK(c.max_positions > 0, where, "max_position_embeddings must be > 0");
    return c;
}

EsmcConfig esmc_preset(const std::string& name) {
    EsmcConfig c;
    if (name == "esmc-300m") c.hidden = 960, c.layers = 30, c.heads = 15;
    else if (name == "esmc-600m") c.hidden = 1152, c.layers = 36, c.heads = 18;
    else if (name == "esmc-6b") c.hidden = 2560, c.layers = 80, c.heads = 40;
    else fail("esmc", cat("unknown configuration '", name, "' (esmc-300m, esmc-600m, esmc-6b)"));
    c.intermediate = EsmcConfig::swiglu_hidden(c.hidden);
    return c;
}

void EsmcModel::init_common() {
    const int64_t Dh = cfg_.hidden / cfg_.heads;
    Tensor f = Tensor::empty({Dh / 2});
    // As upstream: 1 / base^(arange(0, Dh, 2) / Dh) in fp32. host-side: Dh / 2 constants, once
    // at load.
    for (int64_t i = 0; i < Dh / 2; ++i)
        f.f32()[i] = 1.0f / std::pow(cfg_.rope_theta, float(2 * i) / float(Dh));
    rotary_.inv_freq = f;  // the tables grow with the longest sequence a forward pass sees
    const float s = 1.0f / std::sqrt(float(cfg_.layers) / 36.0f);
    for (auto& b : blocks_) {
        b.attn.heads = cfg_.heads;
        b.attn.score_scale = 1.0f / std::sqrt(float(Dh));
        b.ffn.act = nn::FeedForward::Act::SwiGlu;
        b.residual_scale = s;
    }
}

bool EsmcModel::is_original_layout(const io::ModelDir& m) {
    if (m.has("transformer.blocks.0.attn.layernorm_qkv.1.weight")) return true;
    // Also without that tensor (renamed, missing) when the rest looks like ESMC's state dict, so
    // that the load names the tensor that is not there.
    if (!m.has("embed.weight")) return false;
    const std::vector<std::string> names = m.names();
    return std::any_of(names.begin(), names.end(),
                       [](const std::string& n) { return n.rfind("transformer.blocks.", 0) == 0; });
}

std::unique_ptr<EsmcModel> EsmcModel::load(const io::ModelDir& m) {
    return is_original_layout(m) ? load_original(m) : load_hf(m);
}

std::unique_ptr<EsmcModel> EsmcModel::load_original(const io::ModelDir& m) {
    auto model = std::make_unique<EsmcModel>();
    EsmcConfig& c = model->cfg_;
    const std::string where = m.torch_file().empty() ? m.dir() : m.torch_file();
    BI_CHECK(m.has("embed.weight"), where, "missing tensor 'embed.weight'");
    const Shape emb = m.get_raw("embed.weight").shape();
    BI_CHECK(emb.size() == 2, where, "tensor 'embed.weight': expected 2-D, got ", shape_str(emb));
    c.vocab = emb[0];
    c.hidden = emb[1];
    while (m.has(cat("transformer.blocks.", c.layers, ".attn.out_proj.weight"))) ++c.layers;
    // The state dict does not store the head count; every released ESM C (300M, 600M, 6B) uses
    // 64-wide heads (960/15, 1152/18, 2560/40).
    BI_CHECK(c.layers > 0, where, "missing tensor 'transformer.blocks.0.attn.out_proj.weight'");
    BI_CHECK(c.hidden % 64 == 0, where, "width ", c.hidden,
             " is not a multiple of ESM C's 64-wide heads");
    c.heads = c.hidden / 64;
    BI_CHECK(c.vocab >= kVocab, where, "embedding has ", c.vocab, " rows, fewer than the alphabet");
    c.intermediate = EsmcConfig::swiglu_hidden(c.hidden);
    model->load_weights(m, EsmcLayout::original());
    model->init_common();
    return model;
}

std::unique_ptr<EsmcModel> EsmcModel::load_hf(const io::ModelDir& m) {
    auto model = std::make_unique<EsmcModel>();
    EsmcConfig& c = model->cfg_;
    c = EsmcConfig::from_hf_json(m.config(), m.dir() + "/config.json");
    // EsmcForMaskedLM nests the encoder under "esmc."; a bare EsmcModel does not.
    std::string p;
    if (m.has("esmc.embed_tokens.weight")) p = "esmc.";
    else if (m.has("embed_tokens.weight")) p = "";
    else fail(m.dir(), "missing tensor 'esmc.embed_tokens.weight'");
    model->load_weights(m, EsmcLayout::hf(p));
    model->init_common();
    return model;
}

EsmcLayout EsmcLayout::hf(const std::string& p) {
    EsmcLayout n;
    n.embed = p + "embed_tokens.weight";
    n.layer = p + "layers.";
    n.final_norm = p + "norm";
    nn::PreLnBlockNames& b = n.block;
    b.ln_attn = "input_layernorm";
    b.q = "self_attn.q_proj", b.k = "self_attn.k_proj", b.v = "self_attn.v_proj";
    b.o = "self_attn.o_proj";
    b.q_ln = "self_attn.q_norm", b.k_ln = "self_attn.k_norm";
    b.ln_ffn = "post_attention_layernorm";
    b.gate = "mlp.gate_proj", b.up = "mlp.up_proj", b.down = "mlp.down_proj";
    b.linear_bias = false;
    n.head = {"lm_head.dense", "lm_head.layer_norm", "lm_head.decoder"};
    n.ignorable = {
        // The rotary inverse frequencies: a non-persistent buffer in transformers' ESM C (as in
        // its Llama-style models), listed in case an export stores it; recomputed from rope_theta.
        p + "rotary_emb.inv_freq",
        p + "layers.*.self_attn.rotary_emb.inv_freq",
        // EsmcForSequenceClassification / EsmcForTokenClassification heads of fine-tuned
        // checkpoints: the encoder is the same, the classifier is not run.
        "classifier.*",
    };
    return n;
}

EsmcLayout EsmcLayout::original() {
    EsmcLayout n;
    n.embed = "embed.weight";
    n.layer = "transformer.blocks.";
    n.final_norm = "transformer.norm";
    nn::PreLnBlockNames& b = n.block;
    b.ln_attn = "attn.layernorm_qkv.0";  // nn.Sequential(LayerNorm, Linear(D, 3D))
    b.qkv = "attn.layernorm_qkv.1";
    b.o = "attn.out_proj";
    b.q_ln = "attn.q_ln", b.k_ln = "attn.k_ln";
    b.ln_ffn = "ffn.0";  // nn.Sequential(LayerNorm, Linear(D, 2F), SwiGLU, Linear)
    b.gate_up = "ffn.1";
    b.down = "ffn.3";
    b.linear_bias = false;
    n.head = {"sequence_head.0", "sequence_head.2", "sequence_head.3"};  // RegressionHead
    // ESMC's state dict is exactly embed, transformer.* and sequence_head.* (the esm package
    // loads it strictly). Its RotaryEmbedding keeps inv_freq out of the state dict
    // (persistent=False) and registers `scale` only as None; both listed in case an older
    // export stored them.
    n.ignorable = {"transformer.blocks.*.attn.rotary.inv_freq",
                   "transformer.blocks.*.attn.rotary.scale"};
    return n;
}

std::unique_ptr<EsmcModel> EsmcModel::load_embedded(const io::ModelDir& m,
                                                    const nlohmann::json& config,
                                                    const std::string& prefix,
                                                    const std::string& where) {
    auto model = std::make_unique<EsmcModel>();
    model->cfg_ = EsmcConfig::from_hf_json(config, where);
    BI_CHECK(m.has(prefix + "embed_tokens.weight"), where, "missing tensor '", prefix,
             "embed_tokens.weight'");
    model->load_weights(m, EsmcLayout::hf(prefix), /*check_consumed=*/false);
    model->init_common();
    return model;
}

void EsmcModel::load_weights(const io::ModelDir& m, const EsmcLayout& n, bool check) {
    const EsmcConfig& c = cfg_;
    const int64_t D = c.hidden, F = c.intermediate;
    const float eps = c.ln_eps;
    embed_ = m.get_f32(n.embed, {c.vocab, D});
    for (int64_t l = 0; l < c.layers; ++l)
        blocks_.push_back(nn::PreLnBlock::load(m, cat(n.layer, l, "."), n.block, D, F, eps));
    final_ln_ = nn::LayerNorm::load(m, n.final_norm, D, eps, false);
    if (m.has(n.head.dense + ".weight")) head_ = nn::MaskedLmHead::load(m, n.head, D, c.vocab, eps);
    if (check) m.check_consumed(n.ignorable, "ESM C");
}

lm::Output EsmcModel::forward(const std::vector<std::vector<int32_t>>& tokens,
                              const lm::Request& req) {
    const EsmcConfig& c = cfg_;
    BI_CHECK(!req.logits || has_logits(), "esmc", "logits requested but the checkpoint has no ",
             "sequence head");
    BI_CHECK(!req.contacts, "esmc", "ESM C has no contact head");
    for (int l : req.layers)
        BI_CHECK(l >= 0 && l <= c.layers, "esmc.forward", "layer ", l, " outside [0, ", c.layers, "]");

    nn::EncoderBatch batch(tokens, embed_, rotary_, "esmc.forward");
    const int64_t N = batch.ctx.rows();
    lm::Output out;
    out.offsets = batch.ctx.cu_seqlens;
    const nn::StackRequest stack{.layers = req.layers, .tap = req.tap};
    const Tensor last =
        nn::encoder_stack(blocks_, final_ln_, batch.ctx, batch.x, stack, out.hidden);
    if (req.logits) {
        out.logits = Tensor::empty({N, c.vocab});
        head_(last, out.logits);
    }
    return out;
}

}  // namespace bioinfer::esm
