// ESM-2 forward, following transformers' EsmForMaskedLM: token-dropout rescaled embeddings,
// pre-LN blocks with q scaled before rotary and final LayerNorm (the shared encoder stack), LM
// head and the contact head (attention maps symmetrised, APC, logistic regression).
#include "models/esm2.h"

#include <algorithm>
#include <cmath>

#include "bioinfer/error.h"
#include "models/esm_alphabet.h"

namespace bioinfer::esm {

using io::config_get;
using io::config_get_or;

Esm2Config Esm2Config::from_json(const nlohmann::json& j, const std::string& where,
                                 bool folding_stem) {
    Esm2Config c;
    const std::string type = config_get_or<std::string>(j, "model_type", "esm", where);
    BI_CHECK(type == "esm", where, "model_type '", type, "' is not an ESM model");
    BI_CHECK(folding_stem || !config_get_or<bool>(j, "is_folding_model", false, where), where,
             "this is an ESMFold checkpoint, not an ESM-2 language model");
    const std::string pos = config_get_or<std::string>(j, "position_embedding_type", "absolute", where);
    BI_CHECK(pos == "rotary", where, "position_embedding_type '", pos,
             "' is not supported (ESM-2 uses 'rotary'; ESM-1/1b checkpoints are not supported)");
    BI_CHECK(!config_get_or<bool>(j, "emb_layer_norm_before", false, where), where,
             "emb_layer_norm_before=true (ESM-1b) is not supported");
    BI_CHECK(!config_get_or<bool>(j, "is_decoder", false, where), where,
             "is_decoder=true is not supported: ESM-2 is a bidirectional encoder");
    const std::string act = config_get_or<std::string>(j, "hidden_act", "gelu", where);
    BI_CHECK(act == "gelu", where, "hidden_act '", act, "' is not supported (expected gelu)");
    c.vocab = config_get<int64_t>(j, "vocab_size", where);
    c.hidden = config_get<int64_t>(j, "hidden_size", where);
    c.layers = config_get<int64_t>(j, "num_hidden_layers", where);
    c.heads = config_get<int64_t>(j, "num_attention_heads", where);
    c.intermediate = config_get<int64_t>(j, "intermediate_size", where);
    c.max_positions = config_get_or<int64_t>(j, "max_position_embeddings", 1026, where);
    c.ln_eps = float(config_get_or<double>(j, "layer_norm_eps", 1e-5, where));
    c.rope_theta = float(config_get_or<double>(j, "rope_theta", 10000.0, where));
    c.token_dropout = config_get_or<bool>(j, "token_dropout", false, where);
    c.mask_id = config_get_or<int32_t>(j, "mask_token_id", kMask, where);
    c.pad_id = config_get_or<int32_t>(j, "pad_token_id", kPad, where);
    BI_CHECK(c.vocab == kVocab, where, "vocab_size ", c.vocab, " is not the ESM alphabet's ", kVocab);
    BI_CHECK(c.hidden > 0 && c.layers > 0 && c.heads > 0 && c.intermediate > 0, where,
             "hidden_size, num_hidden_layers, num_attention_heads and intermediate_size must be > 0");
    BI_CHECK(c.hidden % c.heads == 0, where, "hidden_size ", c.hidden,
             " is not divisible by num_attention_heads ", c.heads);
    BI_CHECK((c.hidden / c.heads) % 2 == 0, where, "head dim ", c.hidden / c.heads,
             " must be even for rotary embeddings");
    BI_CHECK(c.mask_id == kMask && c.pad_id == kPad, where,
             "mask/pad token ids differ from the ESM alphabet");
    BI_CHECK(c.max_positions > c.pad_id + 1, where, "max_position_embeddings ", c.max_positions,
             " leaves no position after padding_idx ", c.pad_id);
    return c;
}

std::unique_ptr<Esm2Model> Esm2Model::load(const io::ModelDir& m, bool folding_stem) {
    auto model = std::make_unique<Esm2Model>();
    Esm2Config& c = model->cfg_;
    c = Esm2Config::from_json(m.config(), m.dir() + "/config.json", folding_stem);
    const int64_t D = c.hidden, F = c.intermediate, Dh = c.hidden / c.heads;

    // EsmForMaskedLM nests the encoder under "esm."; a bare EsmModel does not.
    std::string p;
    if (m.has("esm.embeddings.word_embeddings.weight")) p = "esm.";
    else if (m.has("embeddings.word_embeddings.weight")) p = "";
    else fail(m.dir(), "missing tensor 'esm.embeddings.word_embeddings.weight'");

    model->word_emb_ = m.get_f32(p + "embeddings.word_embeddings.weight", {c.vocab, D});
    // Inverse frequencies: model-level (transformers >= 5) or per layer (older checkpoints, where
    // upstream takes layer 0's, possibly stored in fp16); computed from rope_theta otherwise.
    const std::string inv_new = p + "rotary_embeddings.inv_freq";
    const std::string inv_old = p + "encoder.layer.0.attention.self.rotary_embeddings.inv_freq";
    if (m.has(inv_new)) {
        model->rotary_.inv_freq = m.get_f32(inv_new, {Dh / 2});
    } else if (m.has(inv_old)) {
        model->rotary_.inv_freq = m.get_f32(inv_old, {Dh / 2});
    } else {
        // host-side: Dh / 2 constants, once at load
        Tensor f = Tensor::empty({Dh / 2});
        for (int64_t i = 0; i < Dh / 2; ++i)
            f.f32()[i] = 1.0f / std::pow(c.rope_theta, float(2 * i) / float(Dh));
        model->rotary_.inv_freq = f;
    }
    model->rotary_.ensure(c.max_positions);

    const nn::PreLnBlockNames block;  // transformers' EsmLayer: the map's defaults
    for (int64_t l = 0; l < c.layers; ++l) {
        nn::PreLnBlock b = nn::PreLnBlock::load(m, p + "encoder.layer." + std::to_string(l) + ".",
                                                block, D, F, c.ln_eps);
        b.attn.heads = c.heads;
        b.attn.q_scale = float(std::pow(double(Dh), -0.5));
        model->blocks_.push_back(std::move(b));
    }
    model->final_ln_ = nn::LayerNorm::load(m, p + "encoder.emb_layer_norm_after", D, c.ln_eps);

    const nn::MaskedLmHeadNames head;  // EsmLMHead: its bias sits beside the decoder, not in it
    if (m.has(head.dense + ".weight")) {
        const ops::MatmulPrecisionScope head_scope(ops::head_precision());
        auto& h = model->lm_head_;
        h.dense = nn::Linear::load(m, head.dense, D, D);
        h.ln = nn::LayerNorm::load(m, head.ln, D, c.ln_eps);
        const Tensor dec = m.has(head.decoder + ".weight")
                               ? m.get_f32(head.decoder + ".weight", {c.vocab, D})
                               : model->word_emb_;  // tied, as save_pretrained drops it
        h.decoder = nn::Linear::from(dec, m.get_f32("lm_head.bias", {c.vocab}));
    }
    if (m.has(p + "contact_head.regression.weight")) {
        model->contact_w_ = m.get_f32(p + "contact_head.regression.weight", {1, c.layers * c.heads})
                                .reshape({c.layers * c.heads});
        // host-side: one scalar, read once at load
        model->contact_b_ = m.get_f32(p + "contact_head.regression.bias", {1}).f32()[0];
    }
    if (!folding_stem) {
        std::vector<std::string> ignorable = esm2_ignorable_tensors(p);
        // EsmForSequenceClassification / EsmForTokenClassification heads of fine-tuned
        // checkpoints: the encoder is the same, the classifier is not run.
        ignorable.push_back("classifier.*");
        m.check_consumed(ignorable, "ESM-2");
    }
    return model;
}

std::vector<std::string> esm2_ignorable_tensors(const std::string& p) {
    return {
        // Per-layer copies of the rotary inverse frequencies (a persistent buffer of each
        // EsmSelfAttention in transformers 4.x): only layer 0's is read, and only when the
        // model-level one is absent. transformers 5's save_pretrained writes a single copy under
        // a literal '*' in place of the layer index (the fixtures hold one), matched here too.
        p + "encoder.layer.*.attention.self.rotary_embeddings.inv_freq",
        // EsmEmbeddings' position_ids buffer (persistent in early transformers releases).
        p + "embeddings.position_ids",
        // An absolute position table the first converted checkpoints carry although rotary
        // models never use it (transformers lists it in _keys_to_ignore_on_load_unexpected).
        p + "embeddings.position_embeddings.weight",
        // EsmModel(add_pooling_layer=True)'s pooler, in checkpoints saved from a bare EsmModel.
        p + "pooler.dense.weight",
        p + "pooler.dense.bias",
    };
}

lm::Output Esm2Model::forward(const std::vector<std::vector<int32_t>>& tokens,
                              const lm::Request& req) {
    const Esm2Config& c = cfg_;
    const int64_t B = int64_t(tokens.size()), H = c.heads;
    BI_CHECK(!req.logits || has_logits(), "esm2", "logits requested but the checkpoint has no ",
             "LM head (lm_head.* tensors): use an EsmForMaskedLM checkpoint");
    BI_CHECK(!req.contacts || has_contacts(), "esm2",
             "contacts requested but the checkpoint has no contact_head.regression tensors");
    for (int l : req.layers)
        BI_CHECK(l >= 0 && l <= c.layers, "esm2.forward", "layer ", l, " outside [0, ", c.layers, "]");

    nn::EncoderBatch batch(tokens, word_emb_, rotary_, "esm2.forward");
    nn::BatchCtx& ctx = batch.ctx;
    Tensor& x = batch.x;  // (N, D) token embeddings
    const int64_t N = ctx.rows(), P = ctx.longest;
    lm::Output out;
    out.offsets = ctx.cu_seqlens;

    // Token dropout as upstream at inference: <mask> rows zeroed and every row scaled by
    // (1 - 0.15 * 0.8) / (1 - observed mask ratio).
    if (c.token_dropout) ops::token_dropout(x, batch.ids, ctx.cu_seqlens, c.mask_id, 0.88f);

    nn::StackRequest stack{.layers = req.layers, .tap = req.tap, .attention_probs = req.contacts};
    if (req.contacts) {
        for (int64_t b = 0; b < B; ++b) {
            const int64_t L = int64_t(tokens[b].size()) - 2;
            out.contacts.push_back(Tensor::zeros({L, L}));
        }
        // The contact head's features, accumulated block by block from its attention maps:
        // this block's heads' APC-corrected maps, weighted by the regression.
        stack.after_block = [&](int64_t l, const Tensor* attn) {
            const Tensor w = contact_w_.narrow0(l * H, (l + 1) * H);
            for (int64_t b = 0; b < B; ++b)
                ops::contact_apc(attn->narrow0(b, b + 1).reshape({H, P, P}), w, out.contacts[b]);
        };
    }
    const Tensor last = nn::encoder_stack(blocks_, final_ln_, ctx, x, stack, out.hidden);
    if (req.contacts)
        for (auto& ct : out.contacts) ops::activation(ct, Act::Sigmoid, ct, contact_b_);
    if (req.logits) {
        out.logits = Tensor::empty({N, c.vocab});
        lm_head_(last, out.logits);
    }
    return out;
}

}  // namespace bioinfer::esm
