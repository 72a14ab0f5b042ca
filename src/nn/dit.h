// The conditioned transformers of AlphaFold-3-style diffusion modules, as Boltz-2 writes them
// (boltz/model/modules/transformersv2.py): AdaLN, the conditioned SwiGLU transition, the DiT layer
// with a precomputed pair bias, the token-level DiffusionTransformer and the windowed
// AtomTransformer (query blocks x key windows, nn/atom_windows.h). The loaders read boltz's
// checkpoint names; ESMFold2 assembles its token layers from its own.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "nn/atom_windows.h"
#include "nn/pair_seq.h"
#include "nn/transformer.h"

namespace bioinfer::nn {

// Algorithm 26: out = sigmoid(s_scale(LN_w(s))) * LN(a) + s_bias(LN_w(s)); LN(a) has no affine,
// LN_w(s) a weight and no bias.
struct AdaLn {
    nn::LayerNorm a_norm, s_norm;
    nn::Linear s_scale;  // with bias
    nn::Linear s_bias;   // no bias
    static AdaLn load(const io::ModelDir& m, const std::string& prefix, int64_t dim,
                      int64_t dim_cond);
    // The s-side terms, s (R, Ds): scale = sigmoid(s_scale(LN_w(s))), shift = s_bias(LN_w(s)).
    void terms(const Tensor& s, Tensor& scale, Tensor& shift) const;
    // out = scale * LN(a) + shift, a (S * A, D), terms of A rows shared by the S samples (A = R
    // when they are a's own).
    void apply(const Tensor& a, const Tensor& scale, const Tensor& shift, Tensor& out) const;
};

// The terms of a DiT layer that depend on the conditioning s alone (DitLayer::condition): made
// per call from s, or, when s is the same for every call (the atom transformers' c), once per run
// (AtomTransformer::condition) with rows of one sample, shared by every sample.
struct DitCond {
    Tensor scale, shift;        // the layer's AdaLN
    Tensor gate;                // sigmoid(output_projection_linear(s))
    Tensor tr_scale, tr_shift;  // the transition's AdaLN
    Tensor tr_gate;             // sigmoid(the transition's output_projection(s))
};

// Algorithm 25 as boltz writes it: with a' = AdaLN(a, s),
//   out = sigmoid(out_proj(s)) * b_to_a(silu(x2) * x1 * a_to_b(a')), [x1 | x2] = swish_gate(a')
// The SwiGLU gate is the SECOND half of swish_gate's output (SwiGLU's chunk order). Without
// a_to_b (undefined) it is the plain gated SwiGLU b_to_a(silu(gate(a')) * up(a')) of ESMFold2's
// diffusion layers.
struct ConditionedTransition {
    AdaLn adaln;
    nn::Linear up, gate;  // rows [0, F) and [F, 2F) of swish_gate.0 (2F, D), no bias
    nn::Linear a_to_b, b_to_a;
    nn::Linear out_proj;  // output_projection.0 (D, Ds) with bias
    static ConditionedTransition load(const io::ModelDir& m, const std::string& prefix,
                                      int64_t dim, int64_t dim_cond);
    // a (R, D) -> out (R, D), from the conditioning's terms (DitCond's tr_*): the AdaLN scale and
    // shift and the output gate sigmoid(out_proj(s)), rows shared by every sample as for AdaLn.
    void operator()(const Tensor& a, const Tensor& scale, const Tensor& shift,
                    const Tensor& out_gate, Tensor& out) const;
};

// The pair bias of every layer of a DiffusionTransformer, rearranged once (the conditioning is
// computed once per sampler run and reused by every step): per layer (H, N, N) for full token
// attention, or (NW, H, Wq, Wk) for windowed atom attention with the key mask folded in as
// -1e6 on keys that are padding or outside the atoms (boltz's `(1 - mask) * -inf`, inf = 1e6).
struct DitBias {
    std::vector<Tensor> layers;
    int64_t length = 0;                // N tokens or A atoms per sample
    int64_t window_q = 0, window_k = 0;  // 0: full attention
    std::vector<uint8_t> key_valid;    // full attention: (N) 1 = real token
    AtomWindows windows;               // windowed attention: the key-slot table
    std::vector<DitCond> cond;         // per layer, when the conditioning is fixed; else empty
};

// Algorithm 23, one layer: b = AdaLN(a, s); a += sigmoid(out_proj(s)) * attn(b);
// a += transition(a, s); then post_ln when the checkpoint has one.
// attn: boltz's AttentionPairBias (the trunk's nn::GatedBiasedAttention with
// GatedBiasedAttentionNames::boltz2()): q = proj_q(b) (bias), k/v = proj_k/v(b) (no bias), scores
// q.k / sqrt(Dh) + pair bias, softmax over keys, o = proj_o(sigmoid(proj_g(b)) * ctx).
struct DitLayer {
    AdaLn adaln;
    nn::GatedBiasedAttention attn;  // pair_bias_attn
    nn::Linear out_proj;  // output_projection_linear (D, Ds) with bias
    ConditionedTransition transition;
    nn::LayerNorm post_ln;  // undefined: none (boltz's default)
    int64_t heads = 0;
    static DitLayer load(const io::ModelDir& m, const std::string& prefix, int64_t dim,
                         int64_t dim_cond, int64_t heads);
    // a (R, D) updated in place, R = samples * bias.length rows; s (R, Ds), or, when cond is
    // given, its terms (bias.length rows, shared by every sample) with s unused.
    void forward(Tensor& a, const Tensor& s, const Tensor& bias, const DitBias& layout,
                 const DitCond* cond = nullptr) const;
    // This layer's terms of s (rows, Ds).
    DitCond condition(const Tensor& s) const;
};

// A stack of DiT layers (boltz's DiffusionTransformer), e.g. the score model's token transformer
// under prefix "structure_module.score_model.token_transformer".
struct DiffusionTransformer {
    std::vector<DitLayer> layers;
    int64_t dim = 0, heads = 0;
    // Layers "<prefix>.layers.<i>", i < depth.
    static DiffusionTransformer load(const io::ModelDir& m, const std::string& prefix, int64_t dim,
                                     int64_t dim_cond, int64_t depth, int64_t heads);
    // Full attention: bias (N, N, depth * heads) as the conditioning makes it (layer i uses
    // channels [i * heads, (i + 1) * heads)), mask (N) token mask (1 = real).
    DitBias prepare(const Tensor& bias, const Tensor& mask) const;
    // The same from the per-layer biases already head-major ((heads, N, N) each, e.g.
    // DiffusionConditioning::token_bias_layers), taken without a copy.
    DitBias prepare_layers(std::vector<Tensor> layers, const Tensor& mask) const;
    // a (R, D), R = samples * N (any leading shape), s (R, Ds); returns the updated a (same shape).
    // after_layer, when set, sees each layer's output (layer index from 0, a).
    Tensor forward(const Tensor& a, const Tensor& s, const DitBias& bias,
                   const std::function<void(int, const Tensor&)>& after_layer = {}) const;
    Tensor forward(const Tensor& a, const Tensor& s, const Tensor& bias, const Tensor& mask) const {
        return forward(a, s, prepare(bias, mask));
    }
};

// Algorithm 7 as boltz blocks it: atoms in windows of Wq queries with Wk keys each (AtomWindows;
// Boltz-2's 32 and 128). Keys outside [0, A) are zero vectors and masked, as are padded atoms.
struct AtomTransformer {
    DiffusionTransformer dit;
    int64_t window_q = 0, window_k = 0;
    // prefix: the AtomTransformer module, e.g.
    // "structure_module.score_model.atom_attention_encoder.atom_encoder" (layers under
    // "<prefix>.diffusion_transformer.layers.<i>"); window_q / window_k: the model's windows.
    static AtomTransformer load(const io::ModelDir& m, const std::string& prefix, int64_t dim,
                                int64_t depth, int64_t heads, int64_t window_q, int64_t window_k);
    // bias (NW, Wq, Wk, depth * heads) (boltz's atom_enc_bias / atom_dec_bias without the batch
    // dim), mask (A) atom_pad_mask (1 = real atom), NW = A / Wq; windows: the input's key table
    // (e.g. its AtomLayout), made here when not given.
    DitBias prepare(const Tensor& bias, const Tensor& mask, const AtomWindows& windows) const;
    DitBias prepare(const Tensor& bias, const Tensor& mask) const;
    // The layers' terms of a fixed conditioning c (A, Ds) into bias.cond: forward then reads
    // them instead of c, in every step of a sampler run.
    void condition(DitBias& bias, const Tensor& c) const;
    // q (R, D), R = samples * A (any leading shape); c (R, Ds) or (A, Ds) shared by every sample
    // (unused when bias.cond holds its terms). Returns the updated q (same shape as q).
    Tensor forward(const Tensor& q, const Tensor& c, const DitBias& bias,
                   const std::function<void(int, const Tensor&)>& after_layer = {}) const;
    Tensor forward(const Tensor& q, const Tensor& c, const Tensor& bias, const Tensor& mask) const {
        return forward(q, c, prepare(bias, mask));
    }
};

}  // namespace bioinfer::nn
