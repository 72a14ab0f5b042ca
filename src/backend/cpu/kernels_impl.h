// Optimized CPU kernels written once over a SIMD wrapper V (simd.h); kernels_avx2.cpp and
// kernels_avx512.cpp instantiate them with their own target flags. Tails run scalar code.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

#include "backend/cpu/simd.h"

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

inline float gelu_scalar(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }

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

template <typename V>
void scale(const float* a, float s, float* y, int64_t n) {
    int64_t i = 0;
    const auto vs = V::set1(s);
    for (; i + V::W <= n; i += V::W) V::store(y + i, V::mul(V::load(a + i), vs));
    for (; i < n; ++i) y[i] = a[i] * s;
}

// c (M, N) = a (M, K) . b (K, N); register tile 4 rows x 2 vectors, scalar column tail.
template <typename V>
void gemm_nn(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
             int64_t M, int64_t N, int64_t K) {
    constexpr int W = V::W;
    constexpr int MR = 4;
    using R = typename V::R;
    int64_t j = 0;
    for (; j + 2 * W <= N; j += 2 * W) {
        int64_t i = 0;
        for (; i + MR <= M; i += MR) {
            R acc[MR][2];
            for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = V::zero();
            for (int64_t k = 0; k < K; ++k) {
                const R b0 = V::load(b + k * ldb + j), b1 = V::load(b + k * ldb + j + W);
                for (int r = 0; r < MR; ++r) {
                    const R av = V::set1(a[(i + r) * lda + k]);
                    acc[r][0] = V::fmadd(av, b0, acc[r][0]);
                    acc[r][1] = V::fmadd(av, b1, acc[r][1]);
                }
            }
            for (int r = 0; r < MR; ++r) {
                V::store(c + (i + r) * ldc + j, acc[r][0]);
                V::store(c + (i + r) * ldc + j + W, acc[r][1]);
            }
        }
        for (; i < M; ++i) {
            R a0 = V::zero(), a1 = V::zero();
            for (int64_t k = 0; k < K; ++k) {
                const R av = V::set1(a[i * lda + k]);
                a0 = V::fmadd(av, V::load(b + k * ldb + j), a0);
                a1 = V::fmadd(av, V::load(b + k * ldb + j + W), a1);
            }
            V::store(c + i * ldc + j, a0);
            V::store(c + i * ldc + j + W, a1);
        }
    }
    for (; j + W <= N; j += W) {
        for (int64_t i = 0; i < M; ++i) {
            R a0 = V::zero();
            for (int64_t k = 0; k < K; ++k)
                a0 = V::fmadd(V::set1(a[i * lda + k]), V::load(b + k * ldb + j), a0);
            V::store(c + i * ldc + j, a0);
        }
    }
    for (; j < N; ++j)
        for (int64_t i = 0; i < M; ++i) {
            float acc = 0;
            for (int64_t k = 0; k < K; ++k) acc += a[i * lda + k] * b[k * ldb + j];
            c[i * ldc + j] = acc;
        }
}

}  // namespace bioinfer::cpu
