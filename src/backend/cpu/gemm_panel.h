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
// Included by linear.h after the activation spans, the tile step, the row statistics and
// CpuPacked.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "backend/kernels.h"

namespace bioinfer::cpu {
namespace {  // compiled once per ISA, as the family headers (kernel_common.h)

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

// c (MR x NR, row stride ldc) = (c +) ap (kc, MR) . bp (kc, NR). The slice's products are summed
// from zero and added to c at the end, so K taken in slices of kc is summed blockwise: its
// rounding error grows with kc + K / kc rather than K (as oneDNN's GEMM sums).
template <typename V>
inline void panel_micro(const float* __restrict ap, const float* __restrict bp, int64_t kc,
                        float* __restrict c, int64_t ldc, bool load) {
    using R = typename V::R;
    constexpr int W = V::W, NV = PanelGeom<V>::NV, NR = PanelGeom<V>::NR, MR = PanelGeom<V>::MR;
    R acc[MR][NV];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = V::zero();
#pragma GCC unroll 2
    for (int64_t k = 0; k < kc; ++k) {
        R b[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) b[v] = V::load(bp + k * NR + v * W);
        tile_step<V, MR, NV>(acc, ap + k * MR, 1, b);
    }
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) {
            float* cv = c + r * ldc + v * W;
            V::store(cv, load ? V::add(V::load(cv), acc[r][v]) : acc[r][v]);
        }
}

// MR contiguous rows of x from row0 (rows past M repeat the last one), columns [k0, k0 + kc),
// into one micro-panel ap (kc, MR): W columns of each row loaded as a vector (layer-normalised
// there, the row's mean and scale taken first in two vector passes as layer_norm_row does), then
// written out transposed.
template <typename V>
void pack_rows(const kernels::PanelLinearArgs& a, int64_t row0, int64_t k0, int64_t kc, float* ap) {
    using R = typename V::R;
    constexpr int W = V::W, MR = PanelGeom<V>::MR;
    const float* src[MR];
    float mean[MR] = {}, inv[MR];
    for (int r = 0; r < MR; ++r) {
        src[r] = a.x + std::min(row0 + r, a.M - 1) * a.x_rs + k0;
        if (!a.ln_gamma) continue;
        float var = 0.0f;
        row_mean_var<V>(src[r], kc, mean[r], var);
        inv[r] = 1.0f / std::sqrt(var + a.ln_eps);
    }
    alignas(64) float t[MR][W];
    int64_t k = 0;
    for (; k + W <= kc; k += W) {
#pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) {
            R v = V::load(src[r] + k);
            if (a.ln_gamma)
                v = V::fmadd(V::mul(V::sub(v, V::set1(mean[r])), V::set1(inv[r])),
                             V::load(a.ln_gamma + k), V::load(a.ln_beta + k));
            V::store(t[r], v);
        }
        float* dst = ap + k * MR;
#pragma GCC unroll 16
        for (int c = 0; c < W; ++c)
#pragma GCC unroll 16
            for (int r = 0; r < MR; ++r) dst[c * MR + r] = t[r][c];
    }
    for (; k < kc; ++k)
        for (int r = 0; r < MR; ++r) {
            const float v = src[r][k];
            ap[k * MR + r] = a.ln_gamma ? (v - mean[r]) * inv[r] * a.ln_gamma[k] + a.ln_beta[k] : v;
        }
}

// The floats pack_block needs beside the micro-panels for a block of m rows: a gathered column,
// and with a norm the rows' statistics and the whole block; none for a row-major input.
template <typename V>
int64_t pack_scratch_floats(const kernels::PanelLinearArgs& a, int64_t m, int64_t kc) {
    constexpr int MR = PanelGeom<V>::MR;
    const int64_t n = (m + MR - 1) / MR * MR;
    return a.x_cs == 1 ? 0 : a.ln_gamma ? (kc + 3) * n : n;
}

// Rows [row0, row0 + m) of x, columns [k0, k0 + kc), into ceil(m / MR) micro-panels (kc, MR)
// at ap (rows past M repeat the last one; their results are never written), each layer-normalised
// per row when the args carry a norm (then kc is all of K). A transposed input (column stride
// not 1) is read a column of the whole block at a time, so each cache line of x is read once,
// and normalised in the packed layout. scratch: pack_scratch_floats(a, m, kc) floats.
template <typename V>
void pack_block(const kernels::PanelLinearArgs& a, int64_t row0, int64_t m, int64_t k0, int64_t kc,
                float* ap, float* scratch) {
    using R = typename V::R;
    constexpr int W = V::W, MR = PanelGeom<V>::MR;
    const int64_t mp = (m + MR - 1) / MR;
    if (a.x_cs == 1) {
        for (int64_t q = 0; q < mp; ++q) pack_rows<V>(a, row0 + q * MR, k0, kc, ap + q * kc * MR);
        return;  // normalised while packed
    }
    // The block's rows (padded to whole micro-panels) column by column: a column is contiguous
    // over the rows when x_rs is 1 and no row is past M, else gathered. With a norm, the rows'
    // means and mean squares of the centred values are summed column by column (vectors across
    // rows), then each column is normalised before it is scattered into the micro-panels.
    // With a norm the block is first copied whole into `block` (kc, n): x's columns lie a
    // multiple of a large power of two apart (a channel-major pair: L * L floats), so the three
    // passes would otherwise evict each other's lines from the few cache sets they share.
    const int64_t n = mp * MR;
    float *colbuf = scratch, *block = a.ln_gamma ? colbuf + 3 * n : nullptr;
    const bool contiguous = a.x_rs == 1 && row0 + n <= a.M;
    const auto gather = [&](int64_t k, float* dst) -> const float* {
        const float* col = a.x + (k0 + k) * a.x_cs;
        if (contiguous && !dst) return col + row0;
        if (!dst) dst = colbuf;
        if (contiguous)
            std::copy(col + row0, col + row0 + n, dst);
        else
            for (int64_t i = 0; i < n; ++i) dst[i] = col[std::min(row0 + i, a.M - 1) * a.x_rs];
        return dst;
    };
    if (block)
        for (int64_t k = 0; k < kc; ++k) gather(k, block + k * n);
    const auto column = [&](int64_t k) { return block ? block + k * n : gather(k, nullptr); };
    float *mean = colbuf, *inv = mean + n, *normed = inv + n;
    if (a.ln_gamma) {
        std::fill(mean, mean + 2 * n, 0.0f);
        for (int64_t k = 0; k < kc; ++k) add<V>(mean, column(k), mean, n);
        for (int64_t i = 0; i < n; ++i) mean[i] /= float(kc);
        for (int64_t k = 0; k < kc; ++k) {
            const float* c = column(k);
            int64_t i = 0;
            for (; i + W <= n; i += W) {
                const R d = V::sub(V::load(c + i), V::load(mean + i));
                V::store(inv + i, V::fmadd(d, d, V::load(inv + i)));
            }
            for (; i < n; ++i) inv[i] += (c[i] - mean[i]) * (c[i] - mean[i]);
        }
        for (int64_t i = 0; i < n; ++i) inv[i] = 1.0f / std::sqrt(inv[i] / float(kc) + a.ln_eps);
    }
    for (int64_t k = 0; k < kc; ++k) {
        const float* c = column(k);
        if (a.ln_gamma) {
            const R g = V::set1(a.ln_gamma[k]), b = V::set1(a.ln_beta[k]);
            int64_t i = 0;
            for (; i + W <= n; i += W)
                V::store(normed + i, V::fmadd(V::mul(V::sub(V::load(c + i), V::load(mean + i)),
                                                     V::load(inv + i)),
                                              g, b));
            for (; i < n; ++i) normed[i] = (c[i] - mean[i]) * inv[i] * a.ln_gamma[k] + a.ln_beta[k];
            c = normed;
        }
        for (int64_t q = 0; q < mp; ++q)
#pragma GCC unroll 16
            for (int r = 0; r < MR; ++r) ap[q * kc * MR + k * MR + r] = c[q * MR + r];
    }
}

// Finishes rows [0, mr) and output columns [col0, col0 + ncols) of one tile: t holds the sums of
// panel columns (row stride ldt) for the tile's first row `row0`.
template <typename V>
void panel_epilogue(const kernels::PanelLinearArgs& a, const float* t, int64_t ldt, int64_t row0,
                    int64_t mr, int64_t col0, int64_t ncols) {
    constexpr int W = V::W, NR = PanelGeom<V>::NR;
    alignas(64) float v[NR];
    for (int64_t r = 0; r < mr; ++r) {
        const float* tr = t + r * ldt;
        const int64_t row = row0 + r;
        if (a.pairs) {
            // first W sums: the activated half, next W: the multiplied half (ncols <= W)
            using R = typename V::R;
            const auto ld = [ncols](const float* p) {
                return ncols == W ? V::load(p) : V::load_partial(p, ncols);
            };
            R g = V::load(tr), u = V::load(tr + W);
            if (a.bias) g = V::add(g, ld(a.bias + col0));
            if (a.bias2) u = V::add(u, ld(a.bias2 + col0));
            const R one = V::set1(1.0f), e = vexp<V>(V::sub(V::zero(), g));
            // silu(g) * u = g / (1 + e^-g) * u; sigmoid(g) * u = u / (1 + e^-g)
            const R num = a.glu == kernels::Glu::Silu ? V::mul(g, u) : u;
            V::store(v, V::div(num, V::add(one, e)));
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

// y = epilogue(norm(x) . w^T). The threads split the rows (and the panels as well when there
// are too few rows for each thread to have two micro-panels) into even contiguous shares, each
// within one micro-panel; a thread runs its share in blocks of m_block rows by n_block output
// columns, K in k_block slices (all of K with a norm), each slice of a block's rows packed once
// and run against every panel of the block. With a plain epilogue and one K slice, full tiles
// are written (or added) straight into y.
template <typename V>
void panel_linear(const kernels::PanelLinearArgs& a, const float* panels, int64_t m_block,
                  int64_t n_block, int64_t k_block) {
    constexpr int W = V::W, NR = PanelGeom<V>::NR, MR = PanelGeom<V>::MR;
    const int64_t M = a.M, K = a.K, N = a.N, per = a.pairs ? W : NR;
    const int64_t np = (N + per - 1) / per, mpt = (M + MR - 1) / MR;
    const int64_t mcp = std::max<int64_t>(1, (m_block + MR - 1) / MR);   // micro-panels a block
    const int64_t pb = std::max<int64_t>(1, (n_block + per - 1) / per);  // panels a block
    const int64_t kc = a.ln_gamma ? K : std::clamp<int64_t>(k_block, 1, K);
    const int64_t nk = (K + kc - 1) / kc;
    const bool direct = nk == 1 && !a.pairs && !a.bias && a.act == Act::None && a.scale == 1.0f &&
                        !a.mul && a.y_cs == 1;
    const int64_t T = omp_get_max_threads();
    int64_t tm = T;  // the thread grid: tm row shares x (T / tm) panel shares
    while (tm > 1 && (T % tm != 0 || mpt < 2 * tm)) --tm;
    const int64_t tn = T / tm;
#pragma omp parallel num_threads(int(T))
    {
        const int64_t t = omp_get_thread_num(), it = t / tn, jt = t % tn;
        const int64_t q_lo = mpt * it / tm, q_hi = mpt * (it + 1) / tm;
        const int64_t j_lo = np * jt / tn, j_hi = np * (jt + 1) / tn;
        float* ap = aligned_array<float>(mcp * MR * kc);
        float* scratch = aligned_array<float>(pack_scratch_floats<V>(a, mcp * MR, kc));
        // sums of a whole block when K takes several slices; one tile otherwise
        float* buf = aligned_array<float>(nk > 1 ? mcp * MR * pb * NR : MR * NR);
        for (int64_t qb = q_lo; qb < q_hi; qb += mcp)
            for (int64_t p0 = j_lo; p0 < j_hi; p0 += pb) {
                const int64_t i0 = qb * MR,
                              m = std::min((q_hi - qb) * MR, std::min(mcp * MR, M - i0));
                const int64_t mp = (m + MR - 1) / MR, p1 = std::min(j_hi, p0 + pb);
                for (int64_t k0 = 0; k0 < K; k0 += kc) {
                    const int64_t kk = std::min(kc, K - k0);
                    const bool last = k0 + kk == K;
                    pack_block<V>(a, i0, m, k0, kk, ap, scratch);
                    for (int64_t j = p0; j < p1; ++j) {
                        const float* bp = panels + (j * K + k0) * NR;
                        const int64_t col0 = j * per, ncols = std::min(per, N - col0);
                        for (int64_t q = 0; q < mp; ++q) {
                            const int64_t r0 = q * MR, mr = std::min<int64_t>(MR, m - r0);
                            if (nk == 1) {
                                if (direct && mr == MR && ncols == NR) {
                                    panel_micro<V>(ap + q * kk * MR, bp, kk,
                                                   a.y + (i0 + r0) * a.y_rs + col0, a.y_rs,
                                                   a.accumulate);
                                    continue;
                                }
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
        std::free(scratch);
        std::free(buf);
    }
}

}  // namespace
}  // namespace bioinfer::cpu
