// The CPU's small strided GEMM over a SIMD wrapper V: register tiles of 6 rows (partial vectors
// for column tails), single-threaded, with a scale / bias / accumulate epilogue. Attention runs
// its score and value products on it, and gemm_nn is it; the own packed GEMM (gemm_panel.h)
// shares its tile step.
#pragma once
#include <algorithm>
#include <cstdint>

#include "backend/cpu/kernel_common.h"

namespace bioinfer::cpu {
namespace {  // internal linkage: see kernel_common.h

// What a tile does with its sums: c = sums * scale (+ add) (+ c when accumulating); add, when
// given, is an (M, N) matrix of row stride ld_add (a score bias, say).
struct GemmOut {
    bool accumulate = false;
    float scale = 1.0f;
    const float* add = nullptr;
    int64_t ld_add = 0;
    GemmOut at(int64_t row, int64_t col) const {
        GemmOut o = *this;
        if (add) o.add = add + row * ld_add + col;
        return o;
    }
};

// One k step of a register tile: acc[r][v] += a[r * a_stride] * b[v], MR broadcasts against NV
// vectors (the own GEMM's micro-kernel and the strided one below).
template <typename V, int MR, int NV>
inline void tile_step(typename V::R (&acc)[MR][NV], const float* a, int64_t a_stride,
                      const typename V::R (&b)[NV]) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
        const typename V::R av = V::set1(a[r * a_stride]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = V::fmadd(av, b[v], acc[r][v]);
    }
}

// One register tile of c (MR rows x up to NV vectors) (+)= a (MR, K) . b (K, ncols). Columns
// that do not fill the last vector are read and written with partial loads and stores, so any
// N works without padding and without touching memory past the last column.
template <typename V, int MR, int NV>
inline void gemm_tile(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                      int64_t ldc, int64_t K, int64_t ncols, const GemmOut& e) {
    using R = typename V::R;
    constexpr int W = V::W;
    const int64_t last = ncols - (NV - 1) * W;  // columns in the last vector, 1..W
    R acc[MR][NV];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = V::zero();
    if (last == W) {
        for (int64_t k = 0; k < K; ++k) {
            R bv[NV];
            for (int v = 0; v < NV; ++v) bv[v] = V::load(b + k * ldb + v * W);
            tile_step<V, MR, NV>(acc, a + k, lda, bv);
        }
    } else {
        for (int64_t k = 0; k < K; ++k) {
            R bv[NV];
            for (int v = 0; v + 1 < NV; ++v) bv[v] = V::load(b + k * ldb + v * W);
            bv[NV - 1] = V::load_partial(b + k * ldb + (NV - 1) * W, last);
            tile_step<V, MR, NV>(acc, a + k, lda, bv);
        }
    }
    const R vscale = V::set1(e.scale);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
        float* cr = c + r * ldc;
        const float* ar = e.add ? e.add + r * e.ld_add : nullptr;
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) {
            const int64_t n = v + 1 < NV ? W : last;
            R x = acc[r][v];
            if (e.scale != 1.0f) x = V::mul(x, vscale);
            if (n == W) {
                if (ar) x = V::add(x, V::load(ar + v * W));
                if (e.accumulate) x = V::add(x, V::load(cr + v * W));
                V::store(cr + v * W, x);
            } else {
                if (ar) x = V::add(x, V::load_partial(ar + v * W, n));
                if (e.accumulate) x = V::add(x, V::load_partial(cr + v * W, n));
                V::store_partial(cr + v * W, x, n);
            }
        }
    }
}

// A column strip of up to NV vectors over all M rows, in tiles of kMR rows.
template <typename V, int NV>
inline void gemm_strip(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                       int64_t ldc, int64_t M, int64_t K, int64_t ncols, const GemmOut& e) {
    constexpr int kMR = 6;  // rows per register tile (see gemm)
    int64_t i = 0;
    for (; i + kMR <= M; i += kMR)
        gemm_tile<V, kMR, NV>(a + i * lda, lda, b, ldb, c + i * ldc, ldc, K, ncols, e.at(i, 0));
    const float* ai = a + i * lda;
    float* ci = c + i * ldc;
    const GemmOut ei = e.at(i, 0);
    switch (M - i) {
        case 5: gemm_tile<V, 5, NV>(ai, lda, b, ldb, ci, ldc, K, ncols, ei); break;
        case 4: gemm_tile<V, 4, NV>(ai, lda, b, ldb, ci, ldc, K, ncols, ei); break;
        case 3: gemm_tile<V, 3, NV>(ai, lda, b, ldb, ci, ldc, K, ncols, ei); break;
        case 2: gemm_tile<V, 2, NV>(ai, lda, b, ldb, ci, ldc, K, ncols, ei); break;
        case 1: gemm_tile<V, 1, NV>(ai, lda, b, ldb, ci, ldc, K, ncols, ei); break;
        default: break;
    }
}

// c (M, N) (+)= a (M, K) . b (K, N) with row strides lda, ldb, ldc; single-threaded (callers
// parallelise). The small GEMM inside attention, where matrices are thin and strided.
template <typename V>
void gemm(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
          int64_t M, int64_t N, int64_t K, const GemmOut& e) {
    constexpr int W = V::W;
    // Strips of up to kNV vectors: 6 x 4 accumulators + 4 b vectors + 1 broadcast fit AVX-512's
    // 32 registers, 6 x 2 (+ 2 + 1) AVX2's 16.
    constexpr int kNV = W == 16 ? 4 : 2;
    for (int64_t j = 0; j < N; j += kNV * W) {
        const int64_t n = std::min<int64_t>(kNV * W, N - j);
        switch ((n + W - 1) / W) {
            case 4: gemm_strip<V, kNV>(a, lda, b + j, ldb, c + j, ldc, M, K, n, e.at(0, j)); break;
            case 3: gemm_strip<V, kNV == 4 ? 3 : 2>(a, lda, b + j, ldb, c + j, ldc, M, K, n, e.at(0, j)); break;
            case 2: gemm_strip<V, 2>(a, lda, b + j, ldb, c + j, ldc, M, K, n, e.at(0, j)); break;
            default: gemm_strip<V, 1>(a, lda, b + j, ldb, c + j, ldc, M, K, n, e.at(0, j)); break;
        }
    }
}

template <typename V>
void gemm(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
          int64_t M, int64_t N, int64_t K, bool accumulate) {
    gemm<V>(a, lda, b, ldb, c, ldc, M, N, K, GemmOut{.accumulate = accumulate});
}

template <typename V>
void gemm_nn(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
             int64_t M, int64_t N, int64_t K) {
    gemm<V>(a, lda, b, ldb, c, ldc, M, N, K, false);
}

}  // namespace
}  // namespace bioinfer::cpu
