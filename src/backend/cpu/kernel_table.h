// The CPU's kernel table of one ISA, gathered from the kernel families (attention, elementwise,
// gemm_tile, linear, norms) and the ISA-free glue and geometry kernels.
#pragma once
#include <cstdint>

#include "backend/cpu/attention.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/gemm_tile.h"
#include "backend/cpu/geometry_kernels.h"
#include "backend/cpu/glue_kernels.h"
#include "backend/cpu/kernel_common.h"
#include "backend/cpu/linear.h"
#include "backend/cpu/norms.h"
#include "backend/kernels.h"

namespace bioinfer::cpu {
namespace {  // internal linkage: see kernel_common.h

// The kernel table of one ISA: kernels_avx2.cpp and kernels_avx512.cpp each instantiate it
// with their own SIMD wrapper and target flags. The CPU runs every kernel synchronously on the
// calling thread's OpenMP team, so the context is not read; the glue and geometry kernels are
// shared by the ISAs (glue_kernels.h, geometry_kernels.h).
template <typename V>
kernels::KernelTable make_kernel_table() {
    using C = const kernels::Context&;
    kernels::KernelTable t{
        .name = V::kTable,
        .linear =
            [](C, const float* x, const float* w, const void* packed, const float* b, float* y,
               int64_t M, int64_t K, int64_t N, Act act, float scale,
               bool accumulate) { linear<V>(x, w, packed, b, y, M, K, N, act, scale, accumulate); },
        .pack_linear = [](C, const void* w, DType wd, int64_t K, int64_t N, DType compute,
                          int64_t rows) { return pack_linear<V>(w, wd, K, N, compute, rows); },
        .free_packed = [](C, void* p) { free_packed(p); },
        .gemm_nn = [](C, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                      int64_t ldc, int64_t M, int64_t N,
                      int64_t K) { gemm_nn<V>(a, lda, b, ldb, c, ldc, M, N, K); },
        .attention =
            [](C, const float* q, const float* k, const float* v, float* out, const int64_t* cu,
               int64_t B, int64_t H, int64_t Hkv, int64_t Dh, float scale, bool causal,
               const uint8_t* key_valid, float* probs, int64_t P, const float* bias,
               int64_t bias_stride) {
                attention<V>(q, k, v, out, cu, B, H, Hkv, Dh, scale, causal, key_valid, probs, P,
                             bias, bias_stride);
            },
        .layer_norm = [](C, const float* x, const float* g, const float* b, float* y, int64_t rows,
                         int64_t d, float eps) { layer_norm<V>(x, g, b, y, rows, d, eps); },
        .gelu = [](C, const float* x, float* y, int64_t n) { gelu<V>(x, y, n); },
        .gelu_tanh = [](C, const float* x, float* y, int64_t n) { gelu_tanh<V>(x, y, n); },
        .swiglu = [](C, const float* g, const float* u, float* y,
                     int64_t n) { swiglu<V>(g, u, y, n); },
        .softmax = [](C, float* x, int64_t rows, int64_t cols, const float* additive,
                      const uint8_t* keep) { softmax<V>(x, rows, cols, additive, keep); },
        .rotary = [](C, float* x, int64_t n_pos, int64_t pos_stride, int64_t heads, int64_t dh,
                     const float* cos,
                     const float* sin) { rotary<V>(x, n_pos, pos_stride, heads, dh, cos, sin); },
        .bmm = [](C, const float* a, const float* b, float* c, int64_t G, int64_t M, int64_t N,
                  int64_t K, bool ta, bool tb) { bmm_dnnl(a, b, c, G, M, N, K, ta, tb); },
        .add = [](C, const float* a, const float* b, float* y, int64_t n) { add<V>(a, b, y, n); },
        .mul = [](C, const float* a, const float* b, float* y, int64_t n) { mul<V>(a, b, y, n); },
        .scale = [](C, const float* a, float s, float* y, int64_t n) { scale<V>(a, s, y, n); },
    };
    t.pack_panels = [](C, const void* w, const void* wb, DType wd, int64_t K, int64_t N) {
        return pack_fused<V>(w, wb, wd, K, N);
    };
    t.panel_linear = [](C, const kernels::PanelLinearArgs& a) { fused_linear<V>(a); };
    glue::fill_table(t);
    glue::fill_geometry(t);
    return t;
}

}  // namespace
}  // namespace bioinfer::cpu
