// THE op list. Each op checks shapes and dtypes, then runs the selected backend's kernel.
// Every op has a plain fp32 reference (src/ops/ref/) that the op tests hold the fast kernels to.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "bioinfer/tensor.h"
#include "ops/kernels.h"

namespace bioinfer::ops {

enum class Backend { Ref, Cpu };
void set_backend(Backend b);
Backend backend();
const char* backend_name();

struct Epilogue {
    Act act = Act::None;      // activation after the bias (GELU erf or tanh form)
    float scale = 1.0f;       // multiply the result (after bias and GELU) by this
    bool accumulate = false;  // out += result (fused residual add) instead of out = result
};

// A linear weight rearranged once, at load, into the layout the backend's GEMM reads fastest.
// It remembers the backend that packed it; under another backend it is ignored.
class PackedWeight;
using PackedWeightPtr = std::shared_ptr<const PackedWeight>;
// Packs w (N, K) (F32, BF16 or F16 storage) for the current backend's GEMM computing in
// `compute` (F32, or BF16 with fp32 accumulation); null when the backend has no such packing.
PackedWeightPtr pack_linear_weight(const Tensor& w, DType compute = DType::F32);

// The compute dtype model loaders pack their linear layers for (F32 unless --precision bf16).
void set_matmul_precision(DType compute);
DType matmul_precision();

// out (M, N) = x (M, K) . w (N, K)^T + bias (N); `packed`, when given, is pack_linear_weight(w).
void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out, Epilogue ep = {},
            const PackedWeight* packed = nullptr);
// Normalises over the last dim of x (..., D).
void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& out);
void gelu(const Tensor& x, Tensor& out);
void gelu_tanh(const Tensor& x, Tensor& out);
// out = silu(gate) * up, elementwise (the SwiGLU feed-forward's gate).
void swiglu(const Tensor& gate, const Tensor& up, Tensor& out);
// Softmax over the last dim of x (R, C) in place. additive: (C) added first; keep: C bytes.
void softmax(Tensor& x, const Tensor* additive, const uint8_t* keep);
// Rotary on x (B, L, H, Dh) in place using positions 0..L-1; cos/sin (>= L, Dh/2).
void rotary(Tensor& x, const Tensor& cos, const Tensor& sin);
// Rotary on packed sequences x (N, H, Dh): each sequence's rows get positions 0..len-1.
void rotary_varlen(Tensor& x, const std::vector<int64_t>& cu_seqlens, const Tensor& cos,
                   const Tensor& sin);
// cos/sin tables (n_pos, Dh/2) from inverse frequencies (Dh/2), as fp32 position * inv_freq.
void rotary_tables(const Tensor& inv_freq, int64_t n_pos, Tensor& cos, Tensor& sin);
struct AttentionOpts {
    int64_t kv_heads = 0;  // key/value heads (grouped-query attention); 0: as many as query heads
    bool causal = false;   // query i sees keys j <= i only
    // Added to the scaled scores: (H, L, L) shared by every sequence of the batch, or
    // (B, H, L, L); (query, key) order. Pair-biased attention (ESMFold, AlphaFold-style trunks).
    const Tensor* bias = nullptr;
};
// Scaled-dot-product attention. q: (B, L, H*Dh); k, v: (B, L, Hkv*Dh); key_valid: B*L bytes
// (1 = real token); out: (B, L, H*Dh). probs (B, H, L, L), when given, receives the softmax
// probabilities.
void attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, float scale,
               const std::vector<uint8_t>& key_valid, Tensor& out, Tensor* probs,
               const AttentionOpts& opts = {});
// The same over B sequences of different lengths packed as rows of q, k, v, out (N, H*Dh):
// sequence b is rows [cu_seqlens[b], cu_seqlens[b+1]) and attends within itself only (no padding
// anywhere). probs (B, H, P, P), P >= the longest, receives each sequence's probabilities in its
// top-left corner.
void attention_varlen(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                      float scale, const std::vector<int64_t>& cu_seqlens, Tensor& out,
                      Tensor* probs);
// out (n, D) = table (V, D) rows at ids; an id outside [0, V) is an error.
void embedding(const std::vector<int32_t>& ids, const Tensor& table, Tensor& out);
void add(const Tensor& a, const Tensor& b, Tensor& out);
// out = a * b elementwise (may alias a or b).
void mul(const Tensor& a, const Tensor& b, Tensor& out);
// out[g] (M, N) = op(a[g]) . op(b[g]) for every g of G: a (G, M, K), or (G, K, M) read
// transposed when trans_a; b (G, K, N), or (G, N, K) read transposed when trans_b.
void bmm(const Tensor& a, const Tensor& b, Tensor& out, bool trans_a = false, bool trans_b = false);
void scale(const Tensor& a, float s, Tensor& out);

}  // namespace bioinfer::ops
