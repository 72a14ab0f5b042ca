// The own fp32 GEMM (the "own_packed" matmul provider and the fused linears of kernels.h's
// panel_linear): weights packed once into panels of NR output columns laid out (K, NR), the
// input packed MR rows at a time into (kc, MR) micro-panels, an MR x NR register micro-kernel,
// and an epilogue that finishes each tile while it is still in L1.
//
// What oneDNN's matmul cannot do, the packing and the epilogue do on the way:
// - the input is read through any row and column strides (a channel-major tensor is read as
//   its transpose without a copy) and layer-normalised over K while it is packed;
// - paired weights (two matrices interleaved panel by panel, one vector each) give
//   act(x . wa^T + ba) * (x . wb^T + bb) in one pass: SwiGLU, or a sigmoid-gated projection;
// - the result is multiplied by a matrix (an output gate), added into y, and written through any
//   strides (a channel-major output).
// Included by kernels_impl.h after the activation spans and CpuPacked.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "ops/kernels.h"

namespace bioinfer::cpu {
namespace {  // compiled once per ISA, as kernels_impl.h

// Register tile: MR rows x NV vectors, MR * NV accumulators + NV weight vectors + 1 broadcast
// within the register file (AVX2: 6 x 2 + 3 = 15 of 16; AVX-512: 14 x 2 + 3 = 31 of 32).
template <typename V>
struct PanelGeom {
    static constexpr int W = V::W, NV = 2, NR = NV * W, MR = W == 16 ? 14 : 6;
};

// w (N, K) (and wb (N, K) when paired) as panels (np, K, NR), zero past the last column: single
// weights put NR output columns in a panel; paired ones put W columns of wa then the same W
// columns of wb.
template <typename V>
float* pack_panels(const void* wa, const void* wb, DType wd, int64_t K, int64_t N, int64_t& np) {
    constexpr int W = V::W, NR = PanelGeom<V>::NR;
    const int64_t per = wb ? W : NR;  // output columns per panel
    np = (N + per - 1) / per;
    float* out = aligned_array<float>(np * K * NR);
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < np; ++j) {
        float* dst = out + j * K * NR;
        for (int c = 0; c < NR; ++c) {
            const void* src = wb && c >= W ? wb : wa;
            const int64_t n = j * per + (wb ? c % W : c);
            for (int64_t k = 0; k < K; ++k)
                dst[k * NR + c] = n < N ? stored_to_f32(src, wd, n * K + k) : 0.0f;
        }
    }
    return out;
}

// c (MR x NR, row stride ldc) = (c +) ap (kc, MR) . bp (kc, NR).
template <typename V>
inline void panel_micro(const float* __restrict ap, const float* __restrict bp, int64_t kc,
                        float* __restrict c, int64_t ldc, bool load) {
    using R = typename V::R;
    constexpr int W = V::W, NV = PanelGeom<V>::NV, NR = PanelGeom<V>::NR, MR = PanelGeom<V>::MR;
    R acc[MR][NV];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = load ? V::load(c + r * ldc + v * W) : V::zero();
#pragma GCC unroll 2
    for (int64_t k = 0; k < kc; ++k) {
        R b[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) b[v] = V::load(bp + k * NR + v * W);
#pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) {
            const R a = V::set1(ap[k * MR + r]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; ++v) acc[r][v] = V::fmadd(a, b[v], acc[r][v]);
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) V::store(c + r * ldc + v * W, acc[r][v]);
}

// Rows [row0, row0 + m) of x, columns [k0, k0 + kc), into ceil(m / MR) micro-panels (kc, MR)
// at ap (rows past M repeat the last one; their results are never written), each layer-normalised
// per row when the args carry a norm (then kc is all of K). A transposed input (column stride
// not 1) is read a column of the whole block at a time, so each cache line of x is read once.
template <typename V>
void pack_block(const kernels::PanelLinearArgs& a, int64_t row0, int64_t m, int64_t k0, int64_t kc,
                float* ap) {
    constexpr int MR = PanelGeom<V>::MR;
    const int64_t mp = (m + MR - 1) / MR;
    if (a.x_cs == 1) {
        for (int64_t q = 0; q < mp; ++q) {
            const float* src[MR];
            for (int r = 0; r < MR; ++r)
                src[r] = a.x + std::min(row0 + q * MR + r, a.M - 1) * a.x_rs + k0;
            float* dst = ap + q * kc * MR;
            for (int64_t k = 0; k < kc; ++k)
#pragma GCC unroll 16
                for (int r = 0; r < MR; ++r) dst[k * MR + r] = src[r][k];
        }
    } else {
        for (int64_t k = 0; k < kc; ++k) {
            const float* col = a.x + (k0 + k) * a.x_cs;
            for (int64_t i = 0; i < mp * MR; ++i)
                ap[(i / MR) * kc * MR + k * MR + i % MR] =
                    col[std::min(row0 + i, a.M - 1) * a.x_rs];
        }
    }
    if (!a.ln_gamma) return;
    // Two passes over each micro-panel's rows, as layer_norm_row's default: the mean, then the
    // mean square of the centred values; MR independent sums.
    for (int64_t q = 0; q < mp; ++q) {
        float* p = ap + q * kc * MR;
        float mean[MR] = {}, var[MR] = {}, inv[MR];
        for (int64_t k = 0; k < kc; ++k)
#pragma GCC unroll 16
            for (int r = 0; r < MR; ++r) mean[r] += p[k * MR + r];
        for (int r = 0; r < MR; ++r) mean[r] /= float(kc);
        for (int64_t k = 0; k < kc; ++k)
#pragma GCC unroll 16
            for (int r = 0; r < MR; ++r) {
                const float d = p[k * MR + r] - mean[r];
                var[r] += d * d;
            }
        for (int r = 0; r < MR; ++r) inv[r] = 1.0f / std::sqrt(var[r] / float(kc) + a.ln_eps);
        for (int64_t k = 0; k < kc; ++k) {
            const float g = a.ln_gamma[k], b = a.ln_beta[k];
#pragma GCC unroll 16
            for (int r = 0; r < MR; ++r) p[k * MR + r] = (p[k * MR + r] - mean[r]) * inv[r] * g + b;
        }
    }
}

// Finishes rows [0, mr) and output columns [col0, col0 + ncols) of one tile: t holds the sums of
// panel columns (row stride ldt) for the tile's first row `row0`.
template <typename V>
void panel_epilogue(const kernels::PanelLinearArgs& a, const float* t, int64_t ldt, int64_t row0,
                    int64_t mr, int64_t col0, int64_t ncols) {
    constexpr int W = V::W, NR = PanelGeom<V>::NR;
    alignas(64) float v[NR], s[NR];
    for (int64_t r = 0; r < mr; ++r) {
        const float* tr = t + r * ldt;
        const int64_t row = row0 + r;
        if (a.pairs) {
            // first W sums: the activated half, next W: the multiplied half
            for (int64_t c = 0; c < ncols; ++c) {
                v[c] = tr[c] + (a.bias ? a.bias[col0 + c] : 0.0f);
                s[c] = tr[W + c] + (a.bias ? a.bias[a.N + col0 + c] : 0.0f);
            }
            if (a.glu == kernels::Glu::Silu)
                swiglu_span<V>(v, s, v, 0, ncols);
            else {
                sigmoid_span<V>(v, v, 0, ncols);
                for (int64_t c = 0; c < ncols; ++c) v[c] *= s[c];
            }
        } else {
            if (a.bias)
                add<V>(tr, a.bias + col0, v, ncols);
            else
                std::copy(tr, tr + ncols, v);
            activate_span<V>(a.act, v, 0, ncols);
        }
        if (a.scale != 1.0f) scale_row(v, ncols, a.scale);
        if (a.mul) {
            const float* m = a.mul + row * a.mul_rs + col0;
            for (int64_t c = 0; c < ncols; ++c) v[c] *= m[c];
        }
        float* y = a.y + row * a.y_rs + col0 * a.y_cs;
        if (a.y_cs == 1) {
            if (a.accumulate)
                add<V>(y, v, y, ncols);
            else
                std::copy(v, v + ncols, y);
        } else if (a.accumulate) {
            for (int64_t c = 0; c < ncols; ++c) y[c * a.y_cs] += v[c];
        } else {
            for (int64_t c = 0; c < ncols; ++c) y[c * a.y_cs] = v[c];
        }
    }
}

// y = epilogue(norm(x) . w^T): (m_block x n_block) output blocks over the threads (n_block cut
// further when there are too few row blocks to share), K in k_block slices (all of K with a
// norm), each slice of a block's rows packed once and run against every panel of the block.
template <typename V>
void panel_linear(const kernels::PanelLinearArgs& a, const float* panels, int64_t m_block,
                  int64_t n_block, int64_t k_block) {
    constexpr int W = V::W, NR = PanelGeom<V>::NR, MR = PanelGeom<V>::MR;
    const int64_t M = a.M, K = a.K, N = a.N, per = a.pairs ? W : NR;
    const int64_t np = (N + per - 1) / per;
    const int64_t mcb = (std::max<int64_t>(m_block, 1) + MR - 1) / MR * MR;
    const int64_t tm = (M + mcb - 1) / mcb;
    int64_t pb = std::max<int64_t>(1, (n_block + per - 1) / per);  // panels per block
    const int64_t threads = omp_get_max_threads();
    if (tm < 2 * threads) pb = std::min(pb, std::max<int64_t>(1, np * tm / (2 * threads)));
    const int64_t tn = (np + pb - 1) / pb;
    const int64_t kc = a.ln_gamma ? K : std::clamp<int64_t>(k_block, 1, K);
    const int64_t nk = (K + kc - 1) / kc;
#pragma omp parallel
    {
        float* ap = aligned_array<float>(mcb * kc);
        // sums of a whole block when K takes several slices; one tile otherwise
        float* buf = aligned_array<float>(nk > 1 ? mcb * pb * NR : MR * NR);
#pragma omp for collapse(2) schedule(static)
        for (int64_t ti = 0; ti < tm; ++ti)
            for (int64_t tj = 0; tj < tn; ++tj) {
                const int64_t i0 = ti * mcb, m = std::min(mcb, M - i0), mp = (m + MR - 1) / MR;
                const int64_t p0 = tj * pb, p1 = std::min(np, p0 + pb);
                for (int64_t k0 = 0; k0 < K; k0 += kc) {
                    const int64_t kk = std::min(kc, K - k0);
                    const bool last = k0 + kk == K;
                    pack_block<V>(a, i0, m, k0, kk, ap);
                    for (int64_t j = p0; j < p1; ++j) {
                        const float* bp = panels + (j * K + k0) * NR;
                        const int64_t col0 = j * per, ncols = std::min(per, N - col0);
                        for (int64_t q = 0; q < mp; ++q) {
                            const int64_t r0 = q * MR, mr = std::min<int64_t>(MR, m - r0);
                            if (nk == 1) {
                                panel_micro<V>(ap + q * kk * MR, bp, kk, buf, NR, false);
                                panel_epilogue<V>(a, buf, NR, i0 + r0, mr, col0, ncols);
                                continue;
                            }
                            const int64_t ldb = pb * NR;
                            float* tb = buf + r0 * ldb + (j - p0) * NR;
                            panel_micro<V>(ap + q * kk * MR, bp, kk, tb, ldb, k0 > 0);
                            if (last) panel_epilogue<V>(a, tb, ldb, i0 + r0, mr, col0, ncols);
                        }
                    }
                }
            }
        std::free(ap);
        std::free(buf);
    }
}

}  // namespace
}  // namespace bioinfer::cpu
