// The blocks that couple a sequence state s (L, D) and a pair state z (L, L, C) in ESMFold's
// folding trunk (and its successors): the pair as an attention bias of the sequence
// (pair-to-sequence), gated sequence attention with that bias, the sequence as a pair update
// (sequence-to-pair, outer product and difference), and the residual ReLU MLP ("transition")
// used on both states.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "nn/transformer.h"

namespace bioinfer::nn {

// bias (H, L, L) [h, q, k] = linear(LN(z[q, k]))[h], rows of z `chunk` at a time.
// Checkpoint names of each block relative to its prefix; the defaults are transformers' ESMFold.
struct PairToSequenceNames {
    std::string ln = "layernorm", linear = "linear";
};

struct PairToSequence {
    LayerNorm ln;
    Linear linear;  // C -> H, no bias
    static PairToSequence load(const io::ModelDir& m, const std::string& prefix, int64_t c,
                               int64_t heads, const PairToSequenceNames& names = {});
    Tensor operator()(const Tensor& z, int64_t chunk = 0) const;
};

// s += o_proj(sigmoid(g_proj(y)) * attention(y)), y = LN(s) given by the caller; q, k and v come
// from one fused projection whose output columns are per head [q | k | v] (ESMFold's layout),
// split into three at load, or from three linears (Boltz-2's AttentionPairBias). Scores are
// scaled by head_dim^-1/2 and biased by (H, L, L).
struct GatedBiasedAttentionNames {
    std::string proj = "proj";  // fused q/k/v (3 * dim, dim), no bias; empty: q, k, v below
    std::string q, k, v;        // separate (dim, dim) linears when proj is empty
    bool q_bias = false;        // q has a bias (separate linears only; k and v never do)
    std::string g = "g_proj", o = "o_proj";
    bool g_o_bias = true;       // g and o have biases
    // Boltz-2's AttentionPairBias (v2): proj_q with bias; proj_k, proj_v, proj_g, proj_o without.
    static GatedBiasedAttentionNames boltz2();
};

struct GatedBiasedAttention {
    int64_t heads = 0, head_dim = 0;
    Linear q, k, v, g, o;
    static GatedBiasedAttention load(const io::ModelDir& m, const std::string& prefix, int64_t dim,
                                     int64_t head_dim, const GatedBiasedAttentionNames& names = {});
    // The attention itself on the projected q, k, v (R, D) -> ctx (R, D), scores scaled by
    // head_dim^-1/2 (full attention below, or e.g. Boltz-2's windowed atom attention).
    using Core = std::function<void(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& ctx)>;
    // out (R, D) = o_proj(sigmoid(g_proj(y)) * core(q(y), k(y), v(y))) (out += with accumulate).
    void forward(const Tensor& y, const Core& core, Tensor& out, bool accumulate = false) const;
    // The same with full attention over y (R, D) = R / L stacked sequences of L rows sharing one
    // bias (H, L, L); key_valid: R flags (1 = real key), empty: every key real.
    void forward(const Tensor& y, const Tensor& bias, const std::vector<uint8_t>& key_valid,
                 Tensor& out, bool accumulate = false) const;
    // s (L, D) += the update of y (L, D), every key real.
    void add_to(const Tensor& y, const Tensor& bias, Tensor& s) const;
};

// z[i, j] += o_proj(cat(q[j] * k[i], q[j] - k[i])), [q | k] = proj(LN(s)).
struct SequenceToPairNames {
    std::string ln = "layernorm", proj = "proj", o_proj = "o_proj";
};

struct SequenceToPair {
    LayerNorm ln;
    Linear proj, o_proj;
    static SequenceToPair load(const io::ModelDir& m, const std::string& prefix, int64_t dim,
                               int64_t inner, int64_t c, const SequenceToPairNames& names = {});
    void add_to(const Tensor& s, Tensor& z, int64_t chunk = 0) const;
};

// x += down(relu(up(LN(x)))) over the rows of x (rows, D), `chunk` rows at a time; or, when
// `gate` is named, the SwiGLU transition x += down(silu(gate(LN(x))) * up(LN(x))).
// Defaults: an nn.Sequential ("....mlp") with LayerNorm at .0, Linear at .1 and .3.
struct ResidueMlpNames {
    std::string ln = "0", up = "1", down = "3";
    std::string gate;   // SwiGLU's gate linear; empty: ReLU MLP
    // SwiGLU's gate and up rows stacked in this one bias-free weight (gate first), instead of
    // `gate` and `up`
    std::string gate_up;
    bool bias = true;   // the linears have biases
    // Boltz's Transition: norm, fc1 (gate), fc2 (up), fc3 (down), no linear biases.
    static ResidueMlpNames boltz2();
    // ESMFold2's transitions (EsmFold2Transition, its SwiGLU feed-forwards): norm,
    // mlp.gate_up_proj (gate rows first), mlp.down_proj, no linear biases.
    static ResidueMlpNames esmfold2();
};

struct ResidueMlp {
    LayerNorm ln;
    Linear up, down;
    Linear gate;  // SwiGLU only
    // LN and the first linear(s) with their activation in one fused GEMM (gate and up paired
    // for SwiGLU), packed at load for fp32 compute; null: the parts run one op at a time
    ops::PackedWeightPtr fused_in;
    static ResidueMlp load(const io::ModelDir& m, const std::string& prefix, int64_t dim,
                           int64_t inner, const ResidueMlpNames& names = {});
    void add_to(Tensor& x, int64_t chunk = 0) const;
};

}  // namespace bioinfer::nn
