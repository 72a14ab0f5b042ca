// The kernel table: raw-pointer signatures every backend implements. ops.cpp checks shapes and
// dtypes once, then calls the table of the selected backend. Shapes are (rows, cols) row-major.
#pragma once
#include <cstdint>

#include "bioinfer/dtype.h"

namespace bioinfer {

// The activation a linear layer applies after its bias (GELU: erf form; GeluTanh: tanh form;
// Sigmoid: the gates of AlphaFold-style blocks).
enum class Act : uint8_t { None, Gelu, GeluTanh, Relu, Sigmoid };

}  // namespace bioinfer

namespace bioinfer::kernels {

struct KernelTable {
    const char* name;
    // y[M,N] = scale * act(x[M,K] . w[N,K]^T + b[N]); with accumulate, y += that instead.
    // packed, when not null, is this table's pack_linear(w) and is read instead of w.
    void (*linear)(const float* x, const float* w, const void* packed, const float* b, float* y,
                   int64_t M, int64_t K, int64_t N, Act act, float scale, bool accumulate);
    // Optional: w (N, K), stored as w_dtype, rearranged once into the layout `linear` reads
    // fastest, for GEMMs computing in `compute` (F32, or BF16 with fp32 accumulation: then `linear`
    // rounds x to bf16). Returns null when that compute dtype is not available.
    void* (*pack_linear)(const void* w, DType w_dtype, int64_t K, int64_t N, DType compute);
    void (*free_packed)(void* packed);
    // c[M,N] = a[M,K] . b[K,N] with row strides lda, ldb, ldc (single thread; callers parallelise).
    void (*gemm_nn)(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                    int64_t ldc, int64_t M, int64_t N, int64_t K);
    // Multi-head attention over B sequences packed as rows of q, out (rows, H*Dh) and k, v
    // (rows, Hkv*Dh): sequence b is rows [cu[b], cu[b+1]) and attends within itself only. Query
    // head h reads key/value head h / (H / Hkv) (grouped-query attention; Hkv divides H). causal:
    // query i sees keys j <= i only. key_valid (rows, 1 = attend) may be null (every key attends).
    // Scores are scaled by `scale`. probs, when not null, is (B, H, P, P) with P >= the longest
    // sequence and receives each sequence's probabilities in its top-left corner (the rest zero).
    // A query row with no key to attend gets zeros. bias, when not null, is added to the scaled
    // scores: sequence b (length L) reads bias + b * bias_stride as (H, L, L) (query, key);
    // bias_stride 0 shares one bias among all sequences (which then have one length).
    void (*attention)(const float* q, const float* k, const float* v, float* out,
                      const int64_t* cu, int64_t B, int64_t H, int64_t Hkv, int64_t Dh,
                      float scale, bool causal, const uint8_t* key_valid, float* probs,
                      int64_t P, const float* bias, int64_t bias_stride);
    void (*layer_norm)(const float* x, const float* gamma, const float* beta, float* y,
                       int64_t rows, int64_t d, float eps);
    void (*gelu)(const float* x, float* y, int64_t n);       // erf GELU, may run in place
    void (*gelu_tanh)(const float* x, float* y, int64_t n);  // tanh GELU, may run in place
    // y = silu(gate) * up = gate / (1 + exp(-gate)) * up; may run in place on either input.
    void (*swiglu)(const float* gate, const float* up, float* y, int64_t n);
    // Row softmax in place; additive (cols) and keep (cols, 1 = keep) masks are optional.
    void (*softmax)(float* x, int64_t rows, int64_t cols, const float* additive,
                    const uint8_t* keep);
    // Rotate-half rotary on x viewed as (n_pos, heads, dh) with position stride pos_stride;
    // cos/sin are (n_pos, dh/2).
    void (*rotary)(float* x, int64_t n_pos, int64_t pos_stride, int64_t heads, int64_t dh,
                   const float* cos, const float* sin);
    // c[g] (M, N) = op(a[g]) . op(b[g]) for g < G (contiguous batches): a[g] is (M, K), or
    // stored (K, M) when trans_a; b[g] is (K, N), or stored (N, K) when trans_b.
    void (*bmm)(const float* a, const float* b, float* c, int64_t G, int64_t M, int64_t N,
                int64_t K, bool trans_a, bool trans_b);
    void (*add)(const float* a, const float* b, float* y, int64_t n);
    void (*mul)(const float* a, const float* b, float* y, int64_t n);  // may run in place
    void (*scale)(const float* a, float s, float* y, int64_t n);
};

const KernelTable& ref_kernels();
const KernelTable* cpu_kernels_avx2();
const KernelTable* cpu_kernels_avx512();  // null when the build has no AVX-512 variant
// The best table this CPU runs (AVX-512 where present, else AVX2, else the reference).
const KernelTable& cpu_kernels();

}  // namespace bioinfer::kernels
