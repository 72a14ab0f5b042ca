// Shared transformer blocks built from ops: linear, layer norm, multi-head self-attention with
// rotary, optional q/k LayerNorm and key-padding mask, GELU or SwiGLU feed-forward, and the pre-LN
// block that chains them. ESM-2 and ESM C are two settings of the same block.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "ops/ops.h"

namespace bioinfer::nn {

struct Linear {
    // (out, in), the checkpoint's layout and, when packed, its stored dtype (a bf16 checkpoint is
    // never widened to fp32 on the packed path); fp32 when the backend reads plain weights.
    Tensor w;
    Tensor b;  // (out) or undefined
    // w in the backend's GEMM layout for ops::matmul_precision(), packed at load (may be null)
    ops::PackedWeightPtr packed;
    static Linear load(const io::ModelDir& m, const std::string& prefix, int64_t in, int64_t out,
                       bool bias = true);
    // From tensors already loaded, in any storage dtype (e.g. rows of a fused checkpoint
    // matrix); b may be undefined.
    static Linear from(Tensor w, Tensor b);
    // Rows [r0, r1) of a checkpoint matrix as a bias-free linear: one part of a fused projection
    // (a gate_up_proj, an outer product's stacked a/b projection).
    static Linear from_rows(const Tensor& w, int64_t r0, int64_t r1);
    int64_t out_features() const { return w.size(0); }
    // out (M, out) = x (M, in) . w^T + b, with an optional fused epilogue.
    void operator()(const Tensor& x, Tensor& out, ops::Epilogue ep = {}) const;
};

struct LayerNorm {
    Tensor g, b;  // b is zeros for a LayerNorm without bias
    float eps = 1e-5f;
    static LayerNorm load(const io::ModelDir& m, const std::string& prefix, int64_t d, float eps,
                          bool bias = true);
    // From tensors already loaded (b undefined: no bias).
    static LayerNorm from(Tensor g, Tensor b, float eps);
    bool defined() const { return g.defined(); }
    void operator()(const Tensor& x, Tensor& out) const { ops::layer_norm(x, g, b, eps, out); }
};

// Rotary tables for positions 0..n_pos-1.
struct Rotary {
    Tensor inv_freq;  // (Dh/2)
    Tensor cos, sin;  // (n_pos, Dh/2), grown on demand
    void ensure(int64_t n_pos);
    // A copy holding tables for at least n_pos positions, growing these under a lock first:
    // forward passes on several workers share one model. The copy stays valid when another
    // pass grows the tables again (they are replaced, never written in place).
    Rotary at_least(int64_t n_pos);
};

struct SelfAttention {
    Linear q, k, v, o;
    LayerNorm q_ln, k_ln;      // over the full width, before rotary (ESM C); undefined: none
    int64_t heads = 0;
    float q_scale = 1.0f;      // applied to q before rotary (ESM-2 convention)
    float score_scale = 1.0f;  // applied to q.k scores inside attention (ESM C: 1/sqrt(Dh))
};

struct FeedForward {
    enum class Act { Gelu, SwiGlu };
    Act act = Act::Gelu;
    Linear up, down;  // Gelu: down(gelu(up(x)))
    Linear gate;      // SwiGlu: down(silu(gate(x)) * up(x))
};

// Checkpoint names of one pre-LN block, relative to the block's prefix (e.g.
// "esm.encoder.layer.3."). The defaults are transformers' EsmLayer (ESM-2); ESM C's two layouts are
// two other maps.
struct PreLnBlockNames {
    std::string ln_attn = "attention.LayerNorm";
    // q, k and v as three (D, D) linears, or, when `qkv` is set, one fused (3D, D) matrix whose
    // rows are q | k | v (torch.chunk order).
    std::string q = "attention.self.query", k = "attention.self.key", v = "attention.self.value";
    std::string qkv;
    std::string o = "attention.output.dense";
    std::string q_ln, k_ln;  // LayerNorms (no bias) over the full width after q / k; empty: none
    std::string ln_ffn = "LayerNorm";
    // GELU: down(gelu(up(x))). SwiGLU when `gate` or `gate_up` is set: `gate` and `up` as two
    // (F, D) linears, or one fused (2F, D) matrix `gate_up` with rows gate | up (SwiGLU's chunk).
    std::string gate, gate_up;
    std::string up = "intermediate.dense", down = "output.dense";
    bool linear_bias = true;  // every linear has a bias (ESM-2) or none (ESM C)
};

struct PreLnBlock {
    LayerNorm ln_attn;
    SelfAttention attn;
    LayerNorm ln_ffn;
    FeedForward ffn;
    float residual_scale = 1.0f;  // each branch is multiplied by this before the residual add
    // The weights under `prefix` + names (width d, FFN width f); sets ffn.act from the names.
    // Heads and scales are the model's to set.
    static PreLnBlock load(const io::ModelDir& m, const std::string& prefix,
                           const PreLnBlockNames& names, int64_t d, int64_t f, float eps);
};

// Context of one batch, packed: sequence b is rows [cu_seqlens[b], cu_seqlens[b+1]) of every
// activation (rows, width), with no padding anywhere; attention runs per sequence.
struct BatchCtx {
    std::vector<int64_t> cu_seqlens;  // B + 1 offsets
    int64_t longest = 0;               // the longest sequence's length
    Rotary* rotary = nullptr;          // null: no rotary
    // Optional observer of named intermediates (tests compare them with upstream modules).
    std::function<void(const std::string& name, const Tensor& t)> tap;
    int64_t batch() const { return int64_t(cu_seqlens.size()) - 1; }
    int64_t rows() const { return cu_seqlens.back(); }
    int64_t length(int64_t b) const { return cu_seqlens[size_t(b) + 1] - cu_seqlens[size_t(b)]; }
};

// Checkpoint prefixes of a masked-LM head's three layers (full names); the defaults are
// transformers' (EsmLMHead, EsmcForMaskedLM).
struct MaskedLmHeadNames {
    std::string dense = "lm_head.dense", ln = "lm_head.layer_norm", decoder = "lm_head.decoder";
};

// The masked-LM / sequence head of ESM-2 and ESM C: decoder(LayerNorm(GELU(dense(x)))).
struct MaskedLmHead {
    Linear dense;    // (D -> D) with bias
    LayerNorm ln;
    Linear decoder;  // (D -> V) with bias; ESM-2 ties its weight to the word embeddings
    bool defined() const { return dense.w.defined(); }
    // The three layers under their checkpoint prefixes, each with weight and bias (no tying).
    static MaskedLmHead load(const io::ModelDir& m, const MaskedLmHeadNames& names, int64_t d,
                             int64_t vocab, float eps);
    // x (rows, D) -> logits (rows, V)
    void operator()(const Tensor& x, Tensor& logits) const;
};

// Packs ragged token rows (each <cls> ... <eos>) into one stream of rows: sets ctx.cu_seqlens
// and ctx.longest and returns the concatenated ids. An empty batch or sequence is an error.
std::vector<int32_t> pack_batch(const std::vector<std::vector<int32_t>>& tokens, BatchCtx& ctx,
                                const char* where);

// x (rows, D) updated in place: x += s * attn(ln(x)); x += s * ffn(ln(x)), s = residual_scale.
// probs (B, H, P, P), P >= ctx.longest, when given, receives this block's attention probabilities
// (each sequence in its top-left corner).
void pre_ln_block(const PreLnBlock& blk, const BatchCtx& ctx, Tensor& x, Tensor* probs);

// A batch packed for an encoder stack: the context (offsets, rotary tables covering its longest
// sequence) and the token embeddings. Not copyable: ctx points at its own rotary tables.
struct EncoderBatch {
    // Packs `tokens` (see pack_batch; `where` names the caller in errors), takes a copy of
    // `rotary` grown to the longest sequence (Rotary::at_least), and looks the ids up in
    // `embedding` (V, D).
    EncoderBatch(const std::vector<std::vector<int32_t>>& tokens, const Tensor& embedding,
                 Rotary& rotary, const char* where);
    EncoderBatch(const EncoderBatch&) = delete;
    EncoderBatch& operator=(const EncoderBatch&) = delete;
    BatchCtx ctx;
    Rotary rotary;
    std::vector<int32_t> ids;  // (rows) the packed tokens
    Tensor x;                  // (rows, D) their embeddings
};

// What a run of an encoder stack keeps and reports besides its output.
struct StackRequest {
    // Hidden states to keep, in [0, blocks]: 0 the stack's input, l in 1..blocks-1 the output of
    // block l, `blocks` the final LayerNorm's output.
    std::vector<int> layers = {};
    // Observer of block intermediates: (block index from 0, name, tensor (rows, ...)).
    std::function<void(int layer, const std::string& name, const Tensor& t)> tap = {};
    // Whether after_block gets the blocks' attention probabilities.
    bool attention_probs = false;
    // Called after block l (from 0) with its attention probabilities (B, H, P, P), P = ctx.longest,
    // each sequence in its top-left corner, when attention_probs (else null).
    std::function<void(int64_t l, const Tensor* probs)> after_block = {};
};

// The pre-LN encoder stack of ESM-2 and ESM C: x (rows, D) goes through `blocks` in order
// (updated in place) and then `final_ln`, whose output (rows, D) is returned. `hidden` receives
// the layers req asks for.
Tensor encoder_stack(const std::vector<PreLnBlock>& blocks, const LayerNorm& final_ln,
                     BatchCtx& ctx, Tensor& x, const StackRequest& req,
                     std::map<int, Tensor>& hidden);

}  // namespace bioinfer::nn
