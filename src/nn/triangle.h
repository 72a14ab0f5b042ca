// The triangle updates of a pair representation z (L, L, C), as AlphaFold 2 defines them and
// ESMFold, ESMFold2 and Boltz-2 use them: triangle multiplication (outgoing / incoming edges)
// and triangle attention (around the starting / ending node). Each adds its update to z in place,
// processing `chunk` rows (or columns) of the pair at a time so no L x L x (several C) temporary
// and no L^3 attention logits ever exist.
#pragma once
#include <cstdint>
#include <string>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "nn/transformer.h"

namespace bioinfer::nn {

// Pair rows processed at a time when a caller passes chunk 0: about 256 MiB of temporaries.
int64_t default_pair_chunk(int64_t L, int64_t C);
// The chunk a pair op ("trimul", "triatt", "pair_mlp") runs with: `requested` when positive,
// else the tuned table's choice for (L, C), capped by default_pair_chunk's memory bound.
int64_t pair_chunk(const char* op, int64_t L, int64_t C, int64_t requested);

// Per-head attention bias (H, L, L) from the pair: b[h][q][k] = linear(LN(z[q, k]))[h], or
// linear(LN(z[k, q]))[h] when transposed; `chunk` rows of z at a time.
Tensor pair_bias(const Tensor& z, const LayerNorm& ln, const Linear& linear, int64_t chunk,
                 bool transposed);

// z += g * linear_z(LN_out(p)), p[i,j] = sum_k a[i,k] * b[j,k] (outgoing) or a[k,i] * b[k,j]
// (incoming) per channel, with a = sigmoid(a_g(LN_in(z))) * a_p(LN_in(z)) and b likewise,
// g = sigmoid(linear_g(LN_in(z))). (AlphaFold 2 algorithms 11 and 12.)
// Checkpoint names of a triangle multiplication, relative to its prefix ("<prefix>.<name>.weight").
// The defaults are transformers' / OpenFold's (ESMFold).
struct TriangleMultiplicationNames {
    std::string ln_in = "layer_norm_in", ln_out = "layer_norm_out";
    // a and b projections (and their gates) as two (C, C) linears each, or, when `ab_p` (`ab_g`)
    // is set, one fused (2C, C) linear whose rows are a | b.
    std::string a_p = "linear_a_p", b_p = "linear_b_p", ab_p;
    std::string a_g = "linear_a_g", b_g = "linear_b_g", ab_g;
    // ESMFold2's (4C, C) bundle: rows a_p | b_p | a_g | b_g (signal, then its gates); when set,
    // it replaces the four.
    std::string bundle;
    std::string g = "linear_g";  // output gate, from LN_in(z)
    std::string z = "linear_z";  // output projection, from LN_out(p)
    bool bias = true;            // the linears have biases (OpenFold) or none (Boltz-2)
    // Boltz-2's TriangleMultiplicationOutgoing / Incoming: norm_in, p_in = [a_p; b_p],
    // g_in = [a_g; b_g], norm_out, p_out (= z), g_out (= g), no linear biases.
    static TriangleMultiplicationNames boltz2();
    // ESMFold2's TriangleMultiplicativeUpdate: norm_start, proj_bundle, proj_gate, norm_mix,
    // proj_emit, no linear biases.
    static TriangleMultiplicationNames esmfold2();
};

struct TriangleMultiplication {
    bool outgoing = true;
    LayerNorm ln_in, ln_out;
    Linear proj;  // a_p and b_p stacked: C -> 2C
    Linear gate;  // a_g, b_g and g stacked: C -> 3C, sigmoid fused into the GEMM
    Linear z;
    // The fused GEMMs (fp32 compute; then every path runs them): LN_in with the
    // gated a | b projections paired (written channel-major), LN_in with the output gate, LN_out
    // with linear_z (its output gated and added into z); null: the parts run one op at a time.
    ops::PackedWeightPtr fused_ab, fused_g, fused_z;
    // prefix: e.g. "trunk.blocks.0.tri_mul_out".
    static TriangleMultiplication load(const io::ModelDir& m, const std::string& prefix, int64_t c,
                                       bool outgoing,
                                       const TriangleMultiplicationNames& names = {});
    // pair_mask (L, L) of 0/1, when given, zeroes a and b at the masked pairs (Boltz-2's
    // affinity module); it runs the chunked path.
    void add_to(Tensor& z, int64_t chunk = 0, const Tensor* pair_mask = nullptr) const;

private:
  // add_to over the whole pair in one chunk without the fused GEMMs (bias-free linears only,
  // as Boltz-2's): the projections straight out of the GEMM channel-major and only the product
  // transposed back.
  void add_whole(Tensor& z) const;
  // add_to with the fused GEMMs, `chunk` pair rows at a time (mask: the flattened pair mask).
  void add_fused(Tensor& z, int64_t chunk, const Tensor* mask) const;
};

// z += gated multi-head attention along each row of z (starting node) or each column (ending
// node), keys masked by nothing (one sequence, no padding), with a per-head bias
// b[h, q, k] = linear(LN(x))[q, k, h] shared by every row, x = z or z transposed.
// (AlphaFold 2 algorithms 13 and 14.)
// Checkpoint names of a triangle attention, relative to its prefix; OpenFold's layout (ESMFold,
// Boltz-2).
struct TriangleAttentionNames {
    std::string ln = "layer_norm";
    std::string bias = "linear";  // pair bias, C -> heads, no bias
    std::string q = "mha.linear_q", k = "mha.linear_k", v = "mha.linear_v";  // no bias
    std::string g = "mha.linear_g", o = "mha.linear_o";
    bool g_o_bias = true;  // linear_g and linear_o have biases (ESMFold) or none (Boltz-2)
    // Boltz-2's TriangleAttentionStartingNode / EndingNode: the same names, no biases at all.
    static TriangleAttentionNames boltz2();
};

struct TriangleAttention {
    bool starting = true;
    int64_t heads = 0, head_dim = 0;
    LayerNorm ln;
    Linear bias;  // C -> heads, no bias
    Linear q, k, v, g, o;
    static TriangleAttention load(const io::ModelDir& m, const std::string& prefix, int64_t c,
                                  int64_t head_dim, int64_t heads, bool starting,
                                  const TriangleAttentionNames& names = {});
    // pair_mask (L, L) of 0/1, when given, masks keys: attending along row i of z (starting
    // node), key k is kept where mask[i, k] is 1; along column j (ending node), where mask[k, j]
    // is. boltz adds -1e9 to masked keys' scores, which for a row with some key kept is this
    // exclusion; a row with every key masked takes boltz's scores rounded at -1e9 (nearly always
    // a uniform average). It runs the chunked path.
    void add_to(Tensor& z, int64_t chunk = 0, const Tensor* pair_mask = nullptr) const;

private:
    // add_to in one chunk: the projections a step of rows at a time, from cached LN output.
    void add_whole(Tensor& z) const;
};

}  // namespace bioinfer::nn
