// Optimized CPU kernels written once over a SIMD wrapper V (simd.h); kernels_avx2.cpp and
// kernels_avx512.cpp instantiate them with their own target flags. Tails run scalar code.
#pragma once
#include <omp.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backend/cpu/linear_dnnl.h"
#include "backend/cpu/simd.h"
#include "ops/kernels.h"

namespace bioinfer::cpu {

// exp(x), Cephes-style: x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial; rel. error ~2e-7.
template <typename V>
inline typename V::R vexp(typename V::R x) {
    using R = typename V::R;
    x = V::min(x, V::set1(88.3762626647949f));
    x = V::max(x, V::set1(-87.3365447504f));
    R n = V::round(V::mul(x, V::set1(1.44269504088896341f)));
    R r = V::fnmadd(n, V::set1(0.693359375f), x);
    r = V::fnmadd(n, V::set1(-2.12194440e-4f), r);
    R p = V::set1(1.9875691500e-4f);
    p = V::fmadd(p, r, V::set1(1.3981999507e-3f));
    p = V::fmadd(p, r, V::set1(8.3334519073e-3f));
    p = V::fmadd(p, r, V::set1(4.1665795894e-2f));
    p = V::fmadd(p, r, V::set1(1.6666665459e-1f));
    p = V::fmadd(p, r, V::set1(5.0000001201e-1f));
    p = V::fmadd(p, V::mul(r, r), V::add(r, V::set1(1.0f)));
    return V::mul(p, V::pow2i(n));
}

// erf(x) by Abramowitz & Stegun 7.1.26 (abs. error <= 1.5e-7), odd symmetry.
template <typename V>
inline typename V::R verf(typename V::R x) {
    using R = typename V::R;
    R a = V::abs(x);
    R t = V::div(V::set1(1.0f), V::fmadd(V::set1(0.3275911f), a, V::set1(1.0f)));
    R p = V::set1(1.061405429f);
    p = V::fmadd(p, t, V::set1(-1.453152027f));
    p = V::fmadd(p, t, V::set1(1.421413741f));
    p = V::fmadd(p, t, V::set1(-0.284496736f));
    p = V::fmadd(p, t, V::set1(0.254829592f));
    p = V::mul(p, t);
    R e = vexp<V>(V::sub(V::zero(), V::mul(a, a)));
    R y = V::fnmadd(p, e, V::set1(1.0f));
    return V::copysign(y, x);
}

inline float gelu_scalar(float x) {
    return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
}

template <typename V>
void gelu(const float* x, float* y, int64_t n) {
    constexpr int W = V::W;
    int64_t i = 0;
    const auto half = V::set1(0.5f), rs2 = V::set1(0.70710678118654752f), one = V::set1(1.0f);
    for (; i + W <= n; i += W) {
        auto v = V::load(x + i);
        auto e = verf<V>(V::mul(v, rs2));
        V::store(y + i, V::mul(V::mul(half, v), V::add(one, e)));
    }
    for (; i < n; ++i) y[i] = gelu_scalar(x[i]);
}

template <typename V>
void swiglu(const float* g, const float* u, float* y, int64_t n) {
    constexpr int W = V::W;
    const auto one = V::set1(1.0f);
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < (n + 4095) / 4096; ++c) {
        const int64_t end = std::min(n, (c + 1) * 4096);
        int64_t i = c * 4096;
        for (; i + W <= end; i += W) {
            const auto gv = V::load(g + i);
            const auto e = vexp<V>(V::sub(V::zero(), gv));
            V::store(y + i, V::mul(V::div(gv, V::add(one, e)), V::load(u + i)));
        }
        for (; i < end; ++i) y[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    }
}

template <typename V>
void layer_norm(const float* x, const float* g, const float* b, float* y, int64_t rows, int64_t d,
                float eps) {
    constexpr int W = V::W;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * d;
        float* yr = y + r * d;
        auto acc = V::zero();
        int64_t i = 0;
        for (; i + W <= d; i += W) acc = V::add(acc, V::load(xr + i));
        float sum = V::hsum(acc);
        for (; i < d; ++i) sum += xr[i];
        const float mean = sum / float(d);
        const auto vm = V::set1(mean);
        acc = V::zero();
        i = 0;
        for (; i + W <= d; i += W) {
            auto c = V::sub(V::load(xr + i), vm);
            acc = V::fmadd(c, c, acc);
        }
        float var = V::hsum(acc);
        for (; i < d; ++i) var += (xr[i] - mean) * (xr[i] - mean);
        const float inv = 1.0f / std::sqrt(var / float(d) + eps);
        const auto vi = V::set1(inv);
        i = 0;
        for (; i + W <= d; i += W) {
            auto c = V::mul(V::sub(V::load(xr + i), vm), vi);
            V::store(yr + i, V::fmadd(c, V::load(g + i), V::load(b + i)));
        }
        for (; i < d; ++i) yr[i] = (xr[i] - mean) * inv * g[i] + b[i];
    }
}

// Single-threaded softmax rows: callers (attention) parallelise over heads.
template <typename V>
void softmax(float* x, int64_t rows, int64_t cols, const float* additive, const uint8_t* keep) {
    constexpr int W = V::W;
    for (int64_t r = 0; r < rows; ++r) {
        float* xr = x + r * cols;
        if (additive)
            for (int64_t c = 0; c < cols; ++c) xr[c] += additive[c];
        if (keep)  // masked keys never win the max and contribute exactly zero
            for (int64_t c = 0; c < cols; ++c)
                if (!keep[c]) xr[c] = -std::numeric_limits<float>::infinity();
        auto vmax = V::set1(-std::numeric_limits<float>::infinity());
        int64_t c = 0;
        for (; c + W <= cols; c += W) vmax = V::max(vmax, V::load(xr + c));
        float mx = V::hmax(vmax);
        for (; c < cols; ++c) mx = std::max(mx, xr[c]);
        if (mx == -std::numeric_limits<float>::infinity()) {  // every key masked
            for (c = 0; c < cols; ++c) xr[c] = 0.0f;
            continue;
        }
        const auto vm = V::set1(mx);
        auto vs = V::zero();
        c = 0;
        for (; c + W <= cols; c += W) {
            auto e = vexp<V>(V::sub(V::load(xr + c), vm));
            V::store(xr + c, e);
            vs = V::add(vs, e);
        }
        float sum = V::hsum(vs);
        for (; c < cols; ++c) {
            xr[c] = std::exp(xr[c] - mx);
            sum += xr[c];
        }
        if (keep)  // exp(-inf) is 0 in the scalar tail; the vector exp clamps, so zero explicitly
            for (int64_t k = 0; k < cols; ++k)
                if (!keep[k]) {
                    sum -= xr[k];
                    xr[k] = 0.0f;
                }
        const auto vinv = V::set1(1.0f / sum);
        c = 0;
        for (; c + W <= cols; c += W) V::store(xr + c, V::mul(V::load(xr + c), vinv));
        for (; c < cols; ++c) xr[c] *= 1.0f / sum;
    }
}

template <typename V>
void rotary(float* x, int64_t n_pos, int64_t pos_stride, int64_t heads, int64_t dh,
            const float* cos, const float* sin) {
    constexpr int W = V::W;
    const int64_t half = dh / 2;
    for (int64_t p = 0; p < n_pos; ++p) {
        const float* cp = cos + p * half;
        const float* sp = sin + p * half;
        for (int64_t h = 0; h < heads; ++h) {
            float* v = x + p * pos_stride + h * dh;
            int64_t i = 0;
            for (; i + W <= half; i += W) {
                auto c = V::load(cp + i), s = V::load(sp + i);
                auto x1 = V::load(v + i), x2 = V::load(v + i + half);
                V::store(v + i, V::fnmadd(x2, s, V::mul(x1, c)));
                V::store(v + i + half, V::fmadd(x1, s, V::mul(x2, c)));
            }
            for (; i < half; ++i) {
                const float x1 = v[i], x2 = v[i + half];
                v[i] = x1 * cp[i] - x2 * sp[i];
                v[i + half] = x2 * cp[i] + x1 * sp[i];
            }
        }
    }
}

template <typename V>
void add(const float* a, const float* b, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + V::W <= n; i += V::W) V::store(y + i, V::add(V::load(a + i), V::load(b + i)));
    for (; i < n; ++i) y[i] = a[i] + b[i];
}

inline void scale_row(float* x, int64_t n, float s) {
    for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

template <typename V>
void scale(const float* a, float s, float* y, int64_t n) {
    int64_t i = 0;
    const auto vs = V::set1(s);
    for (; i + V::W <= n; i += V::W) V::store(y + i, V::mul(V::load(a + i), vs));
    for (; i < n; ++i) y[i] = a[i] * s;
}

// One register tile of c (MR rows x up to NV vectors) (+)= a (MR, K) . b (K, ncols). Columns
// that do not fill the last vector are read and written with partial loads and stores, so any
// N works without padding and without touching memory past the last column.
template <typename V, int MR, int NV>
inline void gemm_tile(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                      int64_t ldc, int64_t K, int64_t ncols, bool accumulate) {
    using R = typename V::R;
    constexpr int W = V::W;
    const int64_t last = ncols - (NV - 1) * W;  // columns in the last vector, 1..W
    R acc[MR][NV];
    for (int r = 0; r < MR; ++r)
        for (int v = 0; v < NV; ++v) acc[r][v] = V::zero();
    if (last == W) {
        for (int64_t k = 0; k < K; ++k) {
            R bv[NV];
            for (int v = 0; v < NV; ++v) bv[v] = V::load(b + k * ldb + v * W);
            for (int r = 0; r < MR; ++r) {
                const R av = V::set1(a[r * lda + k]);
                for (int v = 0; v < NV; ++v) acc[r][v] = V::fmadd(av, bv[v], acc[r][v]);
            }
        }
    } else {
        for (int64_t k = 0; k < K; ++k) {
            R bv[NV];
            for (int v = 0; v + 1 < NV; ++v) bv[v] = V::load(b + k * ldb + v * W);
            bv[NV - 1] = V::load_partial(b + k * ldb + (NV - 1) * W, last);
            for (int r = 0; r < MR; ++r) {
                const R av = V::set1(a[r * lda + k]);
                for (int v = 0; v < NV; ++v) acc[r][v] = V::fmadd(av, bv[v], acc[r][v]);
            }
        }
    }
    for (int r = 0; r < MR; ++r) {
        float* cr = c + r * ldc;
        for (int v = 0; v < NV; ++v) {
            const int64_t n = v + 1 < NV ? W : last;
            R x = acc[r][v];
            if (n == W) {
                if (accumulate) x = V::add(x, V::load(cr + v * W));
                V::store(cr + v * W, x);
            } else {
                if (accumulate) x = V::add(x, V::load_partial(cr + v * W, n));
                V::store_partial(cr + v * W, x, n);
            }
        }
    }
}

// A column strip of up to NV vectors over all M rows, in tiles of kMR rows.
template <typename V, int NV>
inline void gemm_strip(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                       int64_t ldc, int64_t M, int64_t K, int64_t ncols, bool accumulate) {
    constexpr int kMR = 6;  // rows per register tile (see gemm)
    int64_t i = 0;
    for (; i + kMR <= M; i += kMR)
        gemm_tile<V, kMR, NV>(a + i * lda, lda, b, ldb, c + i * ldc, ldc, K, ncols, accumulate);
    const float* ai = a + i * lda;
    float* ci = c + i * ldc;
    switch (M - i) {
        case 5:
            gemm_tile<V, 5, NV>(ai, lda, b, ldb, ci, ldc, K, ncols, accumulate);
            break;
        case 4:
            gemm_tile<V, 4, NV>(ai, lda, b, ldb, ci, ldc, K, ncols, accumulate);
            break;
        case 3:
            gemm_tile<V, 3, NV>(ai, lda, b, ldb, ci, ldc, K, ncols, accumulate);
            break;
        case 2:
            gemm_tile<V, 2, NV>(ai, lda, b, ldb, ci, ldc, K, ncols, accumulate);
            break;
        case 1:
            gemm_tile<V, 1, NV>(ai, lda, b, ldb, ci, ldc, K, ncols, accumulate);
            break;
        default:
            break;
    }
}

// c (M, N) (+)= a (M, K) . b (K, N) with row strides lda, ldb, ldc; single-threaded (callers
// parallelise). The small GEMM inside attention, where matrices are thin and strided.
template <typename V>
void gemm(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
          int64_t M, int64_t N, int64_t K, bool accumulate) {
    constexpr int W = V::W;
    // Strips of up to kNV vectors: 6 x 4 accumulators + 4 b vectors + 1 broadcast fit AVX-512's
    // 32 registers, 6 x 2 (+ 2 + 1) AVX2's 16.
    constexpr int kNV = W == 16 ? 4 : 2;
    for (int64_t j = 0; j < N; j += kNV * W) {
        const int64_t n = std::min<int64_t>(kNV * W, N - j);
        switch ((n + W - 1) / W) {
            case 4: gemm_strip<V, kNV>(a, lda, b + j, ldb, c + j, ldc, M, K, n, accumulate); break;
            case 3: gemm_strip<V, kNV == 4 ? 3 : 2>(a, lda, b + j, ldb, c + j, ldc, M, K, n, accumulate); break;
            case 2: gemm_strip<V, 2>(a, lda, b + j, ldb, c + j, ldc, M, K, n, accumulate); break;
            default: gemm_strip<V, 1>(a, lda, b + j, ldb, c + j, ldc, M, K, n, accumulate); break;
        }
    }
}

template <typename V>
void gemm_nn(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
             int64_t M, int64_t N, int64_t K) {
    gemm<V>(a, lda, b, ldb, c, ldc, M, N, K, false);
}

// K of one (batch, head) transposed to kT (Dh, ldk): kT[d][j] = k[j][d] for j < n, zero for
// j in [n, ldk), so a key block may run past the last key.
inline void pack_keys_transposed(const float* k, int64_t ld, int64_t n, int64_t dh, float* kT,
                                 int64_t ldk) {
    for (int64_t d = 0; d < dh; ++d) {
        float* row = kT + d * ldk;
        for (int64_t j = 0; j < n; ++j) row[j] = k[j * ld + d];
        for (int64_t j = n; j < ldk; ++j) row[j] = 0.0f;
    }
}

constexpr int64_t kAttnQB = 64, kAttnKB = 128;  // query rows, keys per attention tile

// One attention work item: a sequence and a range of its query blocks (of kAttnQB rows).
struct AttnItem {
    int64_t b, qb0, qb1;
};

// Work items, longest sequences first so a dynamic schedule ends on short items; each runs for
// every head and packs its keys once. A sequence is split into several ranges only when there are
// too few (sequence, head) pairs to keep every thread busy; whole: one item per sequence.
inline std::vector<AttnItem> attention_items(const int64_t* cu, int64_t B, int64_t H, bool whole) {
    const int64_t split =
        whole ? 1 : std::max<int64_t>(1, (4 * omp_get_max_threads() + B * H - 1) / (B * H));
    std::vector<AttnItem> items;
    for (int64_t b = 0; b < B; ++b) {
        const int64_t L = cu[b + 1] - cu[b];
        const int64_t n_qb = whole ? 1 : (L + kAttnQB - 1) / kAttnQB;
        const int64_t per = (n_qb + split - 1) / split;
        for (int64_t qb = 0; qb < n_qb; qb += per) items.push_back({b, qb, std::min(n_qb, qb + per)});
    }
    std::stable_sort(items.begin(), items.end(), [&](const AttnItem& x, const AttnItem& y) {
        return cu[x.b + 1] - cu[x.b] > cu[y.b + 1] - cu[y.b];
    });
    return items;
}

// The online-softmax step of a flash-attention tile. s (mq rows of stride lds, kbv columns, a
// multiple of W) holds raw q.k scores; on return it holds exp(scale * s + bias - m_new) * keep,
// with m (running max) and l (running sum) updated and each o row (o_cols wide, stride ldo)
// rescaled by exp(m_old - m_new). bias is 0 or -inf per key, keep 1 or 0.
template <typename V>
inline void online_softmax_tile(float* s, int64_t lds, int64_t mq, int64_t kbv, const float* bias,
                                const float* keep, float scale, float* m, float* l, float* o,
                                int64_t ldo, int64_t o_cols) {
    using R = typename V::R;
    constexpr int W = V::W;
    const float ninf = -std::numeric_limits<float>::infinity();
    const R vs = V::set1(scale);
    for (int64_t r = 0; r < mq; ++r) {
        float* sr = s + r * lds;
        R vmax = V::set1(ninf);
        for (int64_t c = 0; c < kbv; c += W) {
            const R t = V::fmadd(V::load(sr + c), vs, V::load(bias + c));
            V::store(sr + c, t);
            vmax = V::max(vmax, t);
        }
        const float mnew = std::max(m[r], V::hmax(vmax));
        if (mnew == ninf) {  // every key so far masked: nothing to add
            std::fill(sr, sr + kbv, 0.0f);
            continue;
        }
        const R vm = V::set1(mnew);
        R vsum = V::zero();
        for (int64_t c = 0; c < kbv; c += W) {
            const R e = V::mul(vexp<V>(V::sub(V::load(sr + c), vm)), V::load(keep + c));
            V::store(sr + c, e);
            vsum = V::add(vsum, e);
        }
        const float alpha = m[r] == ninf ? 0.0f : std::exp(m[r] - mnew);
        l[r] = l[r] * alpha + V::hsum(vsum);
        m[r] = mnew;
        if (alpha != 1.0f) scale_row(o + r * ldo, o_cols, alpha);
    }
}

// Per-key bias (0 or -inf) and keep (1 or 0) over ldk keys: keys past nk or not valid are masked.
inline void attention_key_masks(const uint8_t* valid, int64_t nk, int64_t ldk, float* bias,
                                float* keep) {
    for (int64_t j = 0; j < ldk; ++j) {
        const bool ok = j < nk && (!valid || valid[j]);
        bias[j] = ok ? 0.0f : -std::numeric_limits<float>::infinity();
        keep[j] = ok ? 1.0f : 0.0f;
    }
}

// Attention over B sequences packed as rows of q, k, v, out (see KernelTable::attention).
// Without probs: flash-style tiles, kAttnQB query rows against kAttnKB keys at a time with an
// online softmax, so no L x L matrix exists. With probs (B, H, P, P): full score rows, as the
// contact head needs every probability. A query row whose keys are all masked gets zeros.
template <typename V>
void attention(const float* q, const float* k, const float* v, float* out, const int64_t* cu,
               int64_t B, int64_t H, int64_t Dh, float scale, const uint8_t* key_valid,
               float* probs, int64_t P) {
    constexpr int W = V::W;
    constexpr int64_t kQB = kAttnQB, kKB = kAttnKB;
    const int64_t D = H * Dh;
    const float ninf = -std::numeric_limits<float>::infinity();
    int64_t max_len = 0;
    for (int64_t b = 0; b < B; ++b) max_len = std::max(max_len, cu[b + 1] - cu[b]);
    const std::vector<AttnItem> items = attention_items(cu, B, H, probs != nullptr);
    const int64_t n_items = int64_t(items.size());
#pragma omp parallel
    {
        // Per-thread scratch, sized for the longest sequence.
        const int64_t ldk_max = (max_len + W - 1) / W * W;
        const auto n = [](int64_t x) { return static_cast<size_t>(x); };
        std::vector<float> kT(n(Dh * ldk_max)), bias(n(ldk_max)), keep(n(ldk_max));
        std::vector<float> s(probs ? 0 : n(kQB * kKB)), o(probs ? 0 : n(kQB * Dh));
        std::vector<float> m(n(kQB)), l(n(kQB));
#pragma omp for collapse(2) schedule(dynamic, 1)
        for (int64_t it = 0; it < n_items; ++it)
            for (int64_t h = 0; h < H; ++h) {
                const AttnItem& item = items[n(it)];
                const int64_t b = item.b, r0 = cu[b], L = cu[b + 1] - r0;
                const int64_t ldk = (L + W - 1) / W * W;
                const uint8_t* valid = key_valid ? key_valid + r0 : nullptr;
                int64_t nk = L;  // keys past the last valid one are skipped outright
                if (valid)
                    while (nk > 0 && !valid[nk - 1]) --nk;
                const float* qbh = q + r0 * D + h * Dh;
                const float* vbh = v + r0 * D + h * Dh;
                float* obh = out + r0 * D + h * Dh;
                pack_keys_transposed(k + r0 * D + h * Dh, D, nk, Dh, kT.data(), ldk);
                attention_key_masks(valid, nk, ldk, bias.data(), keep.data());
                if (probs) {
                    float* p = probs + (b * H + h) * P * P;
                    std::fill(p, p + P * P, 0.0f);
                    if (nk == 0) {
                        for (int64_t i = 0; i < L; ++i) std::fill(obh + i * D, obh + i * D + Dh, 0.0f);
                        continue;
                    }
                    gemm<V>(qbh, D, kT.data(), ldk, p, P, L, nk, Dh, false);
                    for (int64_t i = 0; i < L; ++i) {
                        float* pr = p + i * P;
                        for (int64_t j = 0; j < nk; ++j) pr[j] *= scale;
                        softmax<V>(pr, 1, nk, nullptr, valid);
                    }
                    gemm<V>(p, P, vbh, D, obh, D, L, Dh, nk, false);
                    continue;
                }
                for (int64_t qb = item.qb0; qb < item.qb1; ++qb) {
                    const int64_t i0 = qb * kQB, mq = std::min(kQB, L - i0);
                    std::fill(o.begin(), o.end(), 0.0f);
                    std::fill(m.begin(), m.end(), ninf);
                    std::fill(l.begin(), l.end(), 0.0f);
                    for (int64_t j0 = 0; j0 < nk; j0 += kKB) {
                        const int64_t kb = std::min(kKB, nk - j0);
                        const int64_t kbv = (kb + W - 1) / W * W;  // padded keys are masked
                        // s (mq, kbv) = q rows . kT block
                        gemm<V>(qbh + i0 * D, D, kT.data() + j0, ldk, s.data(), kKB, mq, kbv, Dh, false);
                        online_softmax_tile<V>(s.data(), kKB, mq, kbv, bias.data() + j0,
                                               keep.data() + j0, scale, m.data(), l.data(),
                                               o.data(), Dh, Dh);
                        // o (mq, Dh) += p (mq, kb) . v block (kb, Dh)
                        gemm<V>(s.data(), kKB, vbh + j0 * D, D, o.data(), Dh, mq, Dh, kb, true);
                    }
                    for (int64_t r = 0; r < mq; ++r) {
                        const float inv = l[n(r)] > 0.0f ? 1.0f / l[n(r)] : 0.0f;
                        float* dst = obh + (i0 + r) * D;
                        const float* src = o.data() + r * Dh;
                        for (int64_t d = 0; d < Dh; ++d) dst[d] = src[d] * inv;
                    }
                }
            }
    }
}

// The kernel table of one ISA: kernels_avx2.cpp and kernels_avx512.cpp each instantiate it
// with their own SIMD wrapper and target flags.
template <typename V>
kernels::KernelTable make_kernel_table(const char* name) {
    return {.name = name,
            .linear = linear_dnnl,
            .pack_linear = pack_linear_dnnl,
            .free_packed = free_packed_dnnl,
            .gemm_nn = gemm_nn<V>,
            .attention = attention<V>,
            .layer_norm = layer_norm<V>,
            .gelu = gelu<V>,
            .swiglu = swiglu<V>,
            .softmax = softmax<V>,
            .rotary = rotary<V>,
            .add = add<V>,
            .scale = scale<V>};
}

}  // namespace bioinfer::cpu
