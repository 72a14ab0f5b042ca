// Optimized CPU kernels written once over a SIMD wrapper V (simd.h); kernels_avx2.cpp and
// kernels_avx512.cpp instantiate them with their own target flags. Tails run scalar code.
#pragma once
#include <omp.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>
#include <vector>

#include "backend/cpu/gemm_amx.h"
#include "backend/cpu/glue_kernels.h"
#include "backend/cpu/linear_dnnl.h"
#include "backend/cpu/simd.h"
#include "backend/kernels.h"
#include "backend/tuning/defaults.h"
#include "bioinfer/dtype.h"

namespace bioinfer::cpu {
// Everything here has internal linkage: kernels_avx2.cpp and kernels_avx512.cpp compile this one
// source with different ISA flags, and an external inline function (a scalar tail helper, say)
// emitted by both would leave the linker free to hand the AVX-512 copy to the AVX2 table.
namespace {

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
    return V::mul_pow2(p, n);  // n in [-126, 128] after the clamps
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

inline float gelu_tanh_scalar(float x) {
    return 0.5f * x * (1.0f + std::tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}

// The tuned table's choice for an op at this shape, for a compute dtype or fp32 (the own kernels
// compute in fp32); where the table has none, the kernel's default
// (backend/tuning/defaults.cpp). It carries every parameter the variant reads.
template <typename V>
tuning::Choice tuned_dtype(const char* op, DType compute, std::initializer_list<tuning::Dim> shape) {
    return tuning::choose(V::kTable, op, compute == DType::BF16 ? "bf16" : "fp32", shape);
}

template <typename V>
tuning::Choice tuned(const char* op, std::initializer_list<tuning::Dim> shape) {
    return tuned_dtype<V>(op, DType::F32, shape);
}

// Elementwise work in chunks of kChunk elements: over all threads (the "simd" variant with
// parallel = 1, the default) or on the calling thread (parallel = 0, cheaper for small n).
constexpr int64_t kChunk = 4096;

template <typename V, typename F>
void elementwise(const char* op, int64_t n, F f) {  // f(begin, end)
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    if (chunks > 1 && tuned<V>(op, {{"n", n}}).param("parallel") != 0) {
#pragma omp parallel for schedule(static)
        for (int64_t c = 0; c < chunks; ++c) f(c * kChunk, std::min(n, (c + 1) * kChunk));
    } else {
        f(0, n);
    }
}

template <typename V>
void gelu_span(const float* x, float* y, int64_t i, int64_t end) {
    constexpr int W = V::W;
    const auto half = V::set1(0.5f), rs2 = V::set1(0.70710678118654752f), one = V::set1(1.0f);
    for (; i + W <= end; i += W) {
        auto v = V::load(x + i);
        auto e = verf<V>(V::mul(v, rs2));
        V::store(y + i, V::mul(V::mul(half, v), V::add(one, e)));
    }
    for (; i < end; ++i) y[i] = gelu_scalar(x[i]);
}

// 0.5 x (1 + tanh(u)) = x (1 - 1 / (exp(2u) + 1)), u = sqrt(2/pi) (x + 0.044715 x^3); vexp clamps
// its argument, so large |u| saturates to 0 or x without inf / inf.
template <typename V>
void gelu_tanh_span(const float* x, float* y, int64_t i, int64_t end) {
    constexpr int W = V::W;
    const auto c2 = V::set1(2.0f * 0.79788456080286536f), c3 = V::set1(0.044715f),
               one = V::set1(1.0f);
    for (; i + W <= end; i += W) {
        const auto v = V::load(x + i);
        const auto u2 = V::mul(c2, V::fmadd(V::mul(c3, V::mul(v, v)), v, v));
        const auto e = vexp<V>(u2);
        V::store(y + i, V::mul(v, V::sub(one, V::div(one, V::add(e, one)))));
    }
    for (; i < end; ++i) y[i] = gelu_tanh_scalar(x[i]);
}

template <typename V>
void swiglu_span(const float* g, const float* u, float* y, int64_t i, int64_t end) {
    constexpr int W = V::W;
    const auto one = V::set1(1.0f);
    for (; i + W <= end; i += W) {
        const auto gv = V::load(g + i);
        const auto e = vexp<V>(V::sub(V::zero(), gv));
        V::store(y + i, V::mul(V::div(gv, V::add(one, e)), V::load(u + i)));
    }
    for (; i < end; ++i) y[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

// sigmoid(x) = 1 / (1 + exp(-x)); vexp clamps, so large |x| saturates to 0 or 1.
template <typename V>
void sigmoid_span(const float* x, float* y, int64_t i, int64_t end) {
    constexpr int W = V::W;
    const auto one = V::set1(1.0f);
    for (; i + W <= end; i += W)
        V::store(y + i, V::div(one, V::add(one, vexp<V>(V::sub(V::zero(), V::load(x + i))))));
    for (; i < end; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
}

template <typename V>
void relu_span(const float* x, float* y, int64_t i, int64_t end) {
    constexpr int W = V::W;
    for (; i + W <= end; i += W) V::store(y + i, V::max(V::zero(), V::load(x + i)));
    for (; i < end; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

template <typename V>
void gelu(const float* x, float* y, int64_t n) {
    elementwise<V>("gelu", n, [&](int64_t i, int64_t e) { gelu_span<V>(x, y, i, e); });
}

template <typename V>
void gelu_tanh(const float* x, float* y, int64_t n) {
    elementwise<V>("gelu_tanh", n, [&](int64_t i, int64_t e) { gelu_tanh_span<V>(x, y, i, e); });
}

template <typename V>
void swiglu(const float* g, const float* u, float* y, int64_t n) {
    elementwise<V>("swiglu", n, [&](int64_t i, int64_t e) { swiglu_span<V>(g, u, y, i, e); });
}

// Sum over a row of f(x[i]) in four independent accumulator chains (one chain would wait on the
// add latency at every vector), plus a scalar tail.
template <typename V, typename F, typename G>
inline float row_sum(const float* x, int64_t d, F fv, G fs) {
    constexpr int W = V::W;
    auto a0 = V::zero(), a1 = V::zero(), a2 = V::zero(), a3 = V::zero();
    int64_t i = 0;
    for (; i + 4 * W <= d; i += 4 * W) {
        a0 = fv(a0, V::load(x + i));
        a1 = fv(a1, V::load(x + i + W));
        a2 = fv(a2, V::load(x + i + 2 * W));
        a3 = fv(a3, V::load(x + i + 3 * W));
    }
    for (; i + W <= d; i += W) a0 = fv(a0, V::load(x + i));
    float s = V::hsum(V::add(V::add(a0, a1), V::add(a2, a3)));
    for (; i < d; ++i) s += fs(x[i]);
    return s;
}

// One row of layer norm. two_pass (the default): the mean, then the variance of x - mean, as
// exact as the reference allows; one_pass: sum and sum of squares in a single read of x, whose
// variance E[x^2] - mean^2 loses digits when the mean is large against the spread.
// A row's mean and the mean square of its centred values, in two passes (the layer norm's
// default statistics).
template <typename V>
inline void row_mean_var(const float* xr, int64_t d, float& mean, float& var) {
    using R = typename V::R;
    mean = row_sum<V>(
               xr, d, [](R a, R v) { return V::add(a, v); }, [](float v) { return v; }) /
           float(d);
    const R vm = V::set1(mean);
    const float m = mean;
    var = row_sum<V>(
              xr, d,
              [vm](R a, R v) {
                  const R c = V::sub(v, vm);
                  return V::fmadd(c, c, a);
              },
              [m](float v) { return (v - m) * (v - m); }) /
          float(d);
}

template <typename V, bool OnePass>
inline void layer_norm_row(const float* xr, const float* g, const float* b, float* yr, int64_t d,
                           float eps) {
    constexpr int W = V::W;
    using R = typename V::R;
    float mean, var;
    if constexpr (OnePass) {
        R s1 = V::zero(), s2 = V::zero(), t1 = V::zero(), t2 = V::zero();
        int64_t i = 0;
        for (; i + 2 * W <= d; i += 2 * W) {
            const R v = V::load(xr + i), u = V::load(xr + i + W);
            s1 = V::add(s1, v);
            s2 = V::fmadd(v, v, s2);
            t1 = V::add(t1, u);
            t2 = V::fmadd(u, u, t2);
        }
        for (; i + W <= d; i += W) {
            const R v = V::load(xr + i);
            s1 = V::add(s1, v);
            s2 = V::fmadd(v, v, s2);
        }
        float sum = V::hsum(V::add(s1, t1)), sq = V::hsum(V::add(s2, t2));
        for (; i < d; ++i) {
            sum += xr[i];
            sq += xr[i] * xr[i];
        }
        mean = sum / float(d);
        var = std::max(0.0f, sq / float(d) - mean * mean);
    } else {
        row_mean_var<V>(xr, d, mean, var);
    }
    const float inv = 1.0f / std::sqrt(var + eps);
    const auto vi = V::set1(inv), vm = V::set1(mean);
    int64_t i = 0;
    for (; i + W <= d; i += W) {
        auto c = V::mul(V::sub(V::load(xr + i), vm), vi);
        V::store(yr + i, V::fmadd(c, V::load(g + i), V::load(b + i)));
    }
    for (; i < d; ++i) yr[i] = (xr[i] - mean) * inv * g[i] + b[i];
}

template <typename V, bool OnePass>
void layer_norm_rows(const float* x, const float* g, const float* b, float* y, int64_t rows,
                     int64_t d, float eps, bool parallel) {
#pragma omp parallel for schedule(static) if (parallel && rows > 1)
    for (int64_t r = 0; r < rows; ++r)
        layer_norm_row<V, OnePass>(x + r * d, g, b, y + r * d, d, eps);
}

template <typename V>
void layer_norm(const float* x, const float* g, const float* b, float* y, int64_t rows, int64_t d,
                float eps) {
    const tuning::Choice c = tuned<V>("layer_norm", {{"rows", rows}, {"dim", d}});
    const bool parallel = c.param("parallel") != 0;
    if (c.is("one_pass"))
        layer_norm_rows<V, true>(x, g, b, y, rows, d, eps, parallel);
    else
        layer_norm_rows<V, false>(x, g, b, y, rows, d, eps, parallel);
}

// Masks a softmax row in place: additive (cols) added, keys with keep[c] == 0 set to -inf.
inline void softmax_masks(float* xr, int64_t cols, const float* additive, const uint8_t* keep) {
    if (additive)
        for (int64_t c = 0; c < cols; ++c) xr[c] += additive[c];
    if (keep)  // masked keys never win the max and contribute exactly zero
        for (int64_t c = 0; c < cols; ++c)
            if (!keep[c]) xr[c] = -std::numeric_limits<float>::infinity();
}

// Softmax rows on the calling thread (callers such as attention parallelise). three_pass: max,
// then exp and sum, then scale (the default); online: max and sum in one pass with rescaling
// (Milakov & Gimelshein), then exp and scale: one read fewer, twice the exponentials.
template <typename V, bool Online>
void softmax_rows(float* x, int64_t rows, int64_t cols, const float* additive,
                  const uint8_t* keep) {
    using R = typename V::R;
    constexpr int W = V::W;
    const float ninf = -std::numeric_limits<float>::infinity();
    for (int64_t r = 0; r < rows; ++r) {
        float* xr = x + r * cols;
        softmax_masks(xr, cols, additive, keep);
        float mx, sum = 0.0f;
        int64_t c = 0;
        if constexpr (Online) {
            constexpr float kLow = -1e30f;  // finite start, so exp(m_old - m_new) is never NaN
            R vm = V::set1(kLow), vs = V::zero();
            for (; c + W <= cols; c += W) {
                const R t = V::load(xr + c), nm = V::max(vm, t);
                vs = V::fmadd(vs, vexp<V>(V::sub(vm, nm)), vexp<V>(V::sub(t, nm)));
                vm = nm;
            }
            mx = V::hmax(vm);
            for (; c < cols; ++c) mx = std::max(mx, xr[c]);
            if (mx <= kLow) {  // every key masked
                std::fill(xr, xr + cols, 0.0f);
                continue;
            }
            sum = V::hsum(V::mul(vs, vexp<V>(V::sub(vm, V::set1(mx)))));
            for (c = cols / W * W; c < cols; ++c) sum += std::exp(xr[c] - mx);
            const R vmx = V::set1(mx), vinv = V::set1(1.0f / sum);
            for (c = 0; c + W <= cols; c += W)
                V::store(xr + c, V::mul(vexp<V>(V::sub(V::load(xr + c), vmx)), vinv));
            for (; c < cols; ++c) xr[c] = std::exp(xr[c] - mx) / sum;
            if (keep)
                for (int64_t k = 0; k < cols; ++k)
                    if (!keep[k]) xr[k] = 0.0f;
            continue;
        }
        auto vmax = V::set1(ninf);
        for (; c + W <= cols; c += W) vmax = V::max(vmax, V::load(xr + c));
        mx = V::hmax(vmax);
        for (; c < cols; ++c) mx = std::max(mx, xr[c]);
        if (mx == ninf) {  // every key masked
            std::fill(xr, xr + cols, 0.0f);
            continue;
        }
        const auto vm = V::set1(mx);
        auto vs = V::zero();
        for (c = 0; c + W <= cols; c += W) {
            auto e = vexp<V>(V::sub(V::load(xr + c), vm));
            V::store(xr + c, e);
            vs = V::add(vs, e);
        }
        sum = V::hsum(vs);
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
        for (c = 0; c + W <= cols; c += W) V::store(xr + c, V::mul(V::load(xr + c), vinv));
        for (; c < cols; ++c) xr[c] *= 1.0f / sum;
    }
}

template <typename V>
using SoftmaxFn = void (*)(float*, int64_t, int64_t, const float*, const uint8_t*);

template <typename V>
SoftmaxFn<V> softmax_variant(int64_t rows, int64_t cols) {
    const bool online = tuned<V>("softmax", {{"rows", rows}, {"cols", cols}}).is("online");
    return online ? softmax_rows<V, true> : softmax_rows<V, false>;
}

template <typename V>
void softmax(float* x, int64_t rows, int64_t cols, const float* additive, const uint8_t* keep) {
    softmax_variant<V>(rows, cols)(x, rows, cols, additive, keep);
}

// Rotary on positions [p0, p1).
template <typename V>
inline void rotary_span(float* x, int64_t p0, int64_t p1, int64_t pos_stride, int64_t heads,
                        int64_t dh, const float* cos, const float* sin) {
    constexpr int W = V::W;
    const int64_t half = dh / 2;
    for (int64_t p = p0; p < p1; ++p) {
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
            if (i < half) {  // the tail as one partial vector (head dims 16 and 24 are all tail)
                const int64_t n = half - i;
                auto c = V::load_partial(cp + i, n), s = V::load_partial(sp + i, n);
                auto x1 = V::load_partial(v + i, n), x2 = V::load_partial(v + i + half, n);
                V::store_partial(v + i, V::fnmadd(x2, s, V::mul(x1, c)), n);
                V::store_partial(v + i + half, V::fmadd(x1, s, V::mul(x2, c)), n);
            }
        }
    }
}

// Positions split over the threads (parallel = 1, the default) or run on the calling thread; a
// call from inside a parallel region (one sequence of a packed batch) runs on its thread.
template <typename V>
void rotary(float* x, int64_t n_pos, int64_t pos_stride, int64_t heads, int64_t dh,
            const float* cos, const float* sin) {
    const bool parallel =
        !omp_in_parallel() &&
        tuned<V>("rotary", {{"positions", n_pos}, {"heads", heads}, {"head_dim", dh}})
                .param("parallel") != 0;
#pragma omp parallel for schedule(static) if (parallel && n_pos > 1)
    for (int64_t p = 0; p < n_pos; ++p) rotary_span<V>(x, p, p + 1, pos_stride, heads, dh, cos, sin);
}

template <typename V>
void add(const float* a, const float* b, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + V::W <= n; i += V::W) V::store(y + i, V::add(V::load(a + i), V::load(b + i)));
    for (; i < n; ++i) y[i] = a[i] + b[i];
}

template <typename V>
void mul(const float* a, const float* b, float* y, int64_t n) {
    elementwise<V>("mul", n, [&](int64_t i, int64_t end) {
        for (; i + V::W <= end; i += V::W)
            V::store(y + i, V::mul(V::load(a + i), V::load(b + i)));
        for (; i < end; ++i) y[i] = a[i] * b[i];
    });
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

// K of one (batch, head) transposed to kT (Dh, ldk): kT[d][j] = k[j][d] for j < n, zero for
// j in [n, ldk), so a key block may run past the last key (ldk: kT's row stride).
// In blocks of kPackKeys keys: the block's rows (dh contiguous floats each) are copied whole into
// buf (kPackKeys * dh floats, the caller's scratch) first, so the strided key rows stream in as
// vector loads, then written out kPackKeys keys (one 64-byte run) per dim.
constexpr int64_t kPackKeys = 16;
inline void pack_keys_transposed(const float* k, int64_t ld, int64_t n, int64_t dh, float* kT,
                                 int64_t ldk, float* buf) {
    for (int64_t j0 = 0; j0 < n; j0 += kPackKeys) {
        const int64_t nb = std::min(kPackKeys, n - j0);
        for (int64_t j = 0; j < nb; ++j) std::copy_n(k + (j0 + j) * ld, dh, buf + j * dh);
        for (int64_t d = 0; d < dh; ++d) {
            float* row = kT + d * ldk + j0;
            for (int64_t j = 0; j < nb; ++j) row[j] = buf[j * dh + d];
        }
    }
    for (int64_t d = 0; d < dh; ++d) std::fill(kT + d * ldk + n, kT + (d + 1) * ldk, 0.0f);
}

// One attention work item: a sequence and a range of its query blocks (of qb rows).
struct AttnItem {
    int64_t b, qb0, qb1;
};

// Work items, longest sequences first so a dynamic schedule ends on short items; each runs for
// every head and packs its keys once. A sequence is split into several ranges only when there are
// too few (sequence, head) pairs to keep every thread busy; whole: one item per sequence.
inline std::vector<AttnItem> attention_items(const int64_t* cu, int64_t B, int64_t H, int64_t qb,
                                             bool whole) {
    const int64_t split =
        whole ? 1 : std::max<int64_t>(1, (4 * omp_get_max_threads() + B * H - 1) / (B * H));
    std::vector<AttnItem> items;
    for (int64_t b = 0; b < B; ++b) {
        const int64_t L = cu[b + 1] - cu[b];
        const int64_t n_qb = whole ? 1 : (L + qb - 1) / qb;
        const int64_t per = (n_qb + split - 1) / split;
        for (int64_t q = 0; q < n_qb; q += per) items.push_back({b, q, std::min(n_qb, q + per)});
    }
    std::stable_sort(items.begin(), items.end(), [&](const AttnItem& x, const AttnItem& y) {
        return cu[x.b + 1] - cu[x.b] > cu[y.b + 1] - cu[y.b];
    });
    return items;
}

// The online-softmax step of a flash-attention tile. s (mq rows of stride lds, kbv columns, a
// multiple of W) holds raw q.k scores; on return it holds exp(scale * s + bias - m_new) * keep,
// with m (running max) and l (running sum) updated and each o row (o_cols wide, stride ldo)
// rescaled by exp(m_old - m_new). bias is 0 or -inf per key, keep 1 or 0; unmasked: every key of
// the tile is real and valid (bias all 0, keep all 1), so neither is read. Row r may see columns
// c <= r + diag only (causal; diag >= kbv lets every column through).
template <typename V>
inline void online_softmax_tile(float* s, int64_t lds, int64_t mq, int64_t kbv, const float* bias,
                                const float* keep, bool unmasked, int64_t diag, float* m, float* l,
                                float* o, int64_t ldo, int64_t o_cols) {
    using R = typename V::R;
    constexpr int W = V::W;
    const float ninf = -std::numeric_limits<float>::infinity();
    for (int64_t r = 0; r < mq; ++r) {
        float* sr = s + r * lds;
        const int64_t seen = std::clamp<int64_t>(r + diag + 1, 0, kbv);  // columns [0, seen)
        R vmax = V::set1(ninf);
        if (unmasked) {
            for (int64_t c = 0; c < kbv; c += W) vmax = V::max(vmax, V::load(sr + c));
        } else {
            for (int64_t c = 0; c < kbv; c += W) {
                const R t = V::add(V::load(sr + c), V::load(bias + c));
                V::store(sr + c, t);
                vmax = V::max(vmax, t);
            }
        }
        float rmax = V::hmax(vmax);
        if (seen < kbv) {
            rmax = ninf;
            for (int64_t c = 0; c < seen; ++c) rmax = std::max(rmax, sr[c]);
        }
        const float mnew = std::max(m[r], rmax);
        if (mnew == ninf) {  // every key so far masked: nothing to add
            std::fill(sr, sr + kbv, 0.0f);
            continue;
        }
        const R vm = V::set1(mnew);
        R vsum = V::zero();
        for (int64_t c = 0; c < kbv; c += W) {
            R e = vexp<V>(V::sub(V::load(sr + c), vm));
            if (!unmasked) e = V::mul(e, V::load(keep + c));
            V::store(sr + c, e);
            vsum = V::add(vsum, e);
        }
        float rsum = V::hsum(vsum);
        if (seen < kbv) {  // causally hidden keys add exactly nothing
            std::fill(sr + seen, sr + kbv, 0.0f);
            rsum = 0.0f;
            for (int64_t c = 0; c < seen; ++c) rsum += sr[c];
        }
        const float alpha = m[r] == ninf ? 0.0f : std::exp(m[r] - mnew);
        l[r] = l[r] * alpha + rsum;
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

// Attention over B sequences packed as rows of q, k, v, out (see KernelTable::attention), in one
// of two variants the tuned table chooses between:
//  tiled (default): flash-style tiles, q_block query rows against k_block keys at a time with an
//    online softmax, so no L x L matrix exists;
//  materialised: full score rows per (sequence, head), softmax, then P.V. Always used with probs
//    (B, H, P, P), as the contact head needs every probability.
template <typename V>
void attention(const float* q, const float* k, const float* v, float* out, const int64_t* cu,
               int64_t B, int64_t H, int64_t Hkv, int64_t Dh, float scale, bool causal,
               const uint8_t* key_valid, float* probs, int64_t P, const float* pair_bias,
               int64_t bias_stride) {
    constexpr int W = V::W;
    const int64_t D = H * Dh, Dkv = Hkv * Dh, group = H / Hkv;
    const float ninf = -std::numeric_limits<float>::infinity();
    int64_t max_len = 0;
    for (int64_t b = 0; b < B; ++b) max_len = std::max(max_len, cu[b + 1] - cu[b]);
    const tuning::Choice choice =
        tuned<V>("attention", {{"heads", H},  // not the batch: items are per (sequence, head)
                               {"kv_heads", Hkv},
                               {"seq", max_len},
                               {"head_dim", Dh},
                               {"causal", causal ? 1 : 0}});
    const bool full = probs || choice.is("materialised");
    // Tile sizes: key blocks a multiple of W (the score tile's columns are whole vectors).
    const int64_t kQB = std::max<int64_t>(1, choice.param("q_block"));
    const int64_t kKB = std::max<int64_t>(W, choice.param("k_block") / W * W);
    const SoftmaxFn<V> softmax_fn = full ? softmax_variant<V>(max_len, max_len) : nullptr;
    const std::vector<AttnItem> items = attention_items(cu, B, H, kQB, full);
    const int64_t n_items = int64_t(items.size());
#pragma omp parallel
    {
        // Per-thread scratch, sized for the longest sequence.
        const int64_t ldk_max = (max_len + W - 1) / W * W;
        const auto n = [](int64_t x) { return static_cast<size_t>(x); };
        // kT's rows are one vector longer than the keys need: a power-of-two row stride would put
        // the rows written together while packing onto a few cache sets.
        std::vector<float> kT(n(Dh * (ldk_max + W))), bias(n(ldk_max)), keep(n(ldk_max)),
            key_block(n(kPackKeys * Dh));
        std::vector<float> s(n(full ? (probs ? 0 : max_len * ldk_max) : kQB * kKB));
        std::vector<float> o(full ? 0 : n(kQB * Dh)), m(n(kQB)), l(n(kQB));
#pragma omp for collapse(2) schedule(dynamic, 1)
        for (int64_t it = 0; it < n_items; ++it)
            for (int64_t h = 0; h < H; ++h) {
                const AttnItem& item = items[n(it)];
                const int64_t b = item.b, r0 = cu[b], L = cu[b + 1] - r0, hk = h / group;
                const int64_t ldk = (L + W - 1) / W * W, ldt = ldk + W;  // kT's row stride: ldt
                const uint8_t* valid = key_valid ? key_valid + r0 : nullptr;
                int64_t nk = L;  // keys past the last valid one are skipped outright
                if (valid)
                    while (nk > 0 && !valid[nk - 1]) --nk;
                const float* qbh = q + r0 * D + h * Dh;
                // (L, L) additive scores of this (sequence, head), or null
                const float* pb = pair_bias ? pair_bias + b * bias_stride + h * L * L : nullptr;
                const float* vbh = v + r0 * Dkv + hk * Dh;
                float* obh = out + r0 * D + h * Dh;
                pack_keys_transposed(k + r0 * Dkv + hk * Dh, Dkv, nk, Dh, kT.data(), ldt,
                                     key_block.data());
                attention_key_masks(valid, nk, ldk, bias.data(), keep.data());
                // Key tiles ending at or before the first masked key need no mask arithmetic.
                const int64_t first_masked = std::find(keep.begin(), keep.begin() + ldk, 0.0f) -
                                             keep.begin();
                if (full) {
                    float* p = probs ? probs + (b * H + h) * P * P : s.data();
                    const int64_t ldp = probs ? P : ldk;
                    if (probs) std::fill(p, p + P * P, 0.0f);
                    if (nk == 0) {
                        for (int64_t i = 0; i < L; ++i) std::fill(obh + i * D, obh + i * D + Dh, 0.0f);
                        continue;
                    }
                    gemm<V>(qbh, D, kT.data(), ldt, p, ldp, L, nk, Dh, false);
                    for (int64_t i = 0; i < L; ++i) {
                        float* pr = p + i * ldp;
                        const int64_t seen = causal ? std::min(nk, i + 1) : nk;
                        if (pb)
                            for (int64_t j = 0; j < seen; ++j) pr[j] = pr[j] * scale + pb[i * L + j];
                        else
                            for (int64_t j = 0; j < seen; ++j) pr[j] *= scale;
                        softmax_fn(pr, 1, seen, nullptr, valid);
                        std::fill(pr + seen, pr + nk, 0.0f);
                    }
                    gemm<V>(p, ldp, vbh, Dkv, obh, D, L, Dh, nk, false);
                    continue;
                }
                for (int64_t qb = item.qb0; qb < item.qb1; ++qb) {
                    const int64_t i0 = qb * kQB, mq = std::min(kQB, L - i0);
                    std::fill(o.begin(), o.end(), 0.0f);
                    std::fill(m.begin(), m.end(), ninf);
                    std::fill(l.begin(), l.end(), 0.0f);
                    const int64_t kend = causal ? std::min(nk, i0 + mq) : nk;
                    for (int64_t j0 = 0; j0 < kend; j0 += kKB) {
                        const int64_t kb = std::min(kKB, kend - j0);
                        const int64_t kbv = (kb + W - 1) / W * W;  // padded keys are masked
                        const int64_t diag = causal ? i0 - j0 : kbv;
                        // s (mq, kbv) = scale * q rows . kT block (+ the pair bias's block),
                        // its padding columns [kb, kbv) zero (masked below)
                        const GemmOut scores{.scale = scale,
                                             .add = pb ? pb + i0 * L + j0 : nullptr,
                                             .ld_add = L};
                        gemm<V>(qbh + i0 * D, D, kT.data() + j0, ldt, s.data(), kKB, mq,
                                pb ? kb : kbv, Dh, scores);
                        if (pb && kb < kbv)
                            for (int64_t r = 0; r < mq; ++r)
                                std::fill(s.data() + r * kKB + kb, s.data() + r * kKB + kbv, 0.0f);
                        online_softmax_tile<V>(s.data(), kKB, mq, kbv, bias.data() + j0,
                                               keep.data() + j0, j0 + kbv <= first_masked,
                                               diag, m.data(), l.data(), o.data(), Dh, Dh);
                        // o (mq, Dh) += p (mq, kb) . v block (kb, Dh)
                        gemm<V>(s.data(), kKB, vbh + j0 * Dkv, Dkv, o.data(), Dh, mq, Dh, kb, true);
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

// A linear weight packed for one GEMM provider, as the tuned table chooses per (K, N) and compute
// dtype: oneDNN's blocked layout (onednn_packed, the default), or fp32 panels for the own GEMM
// (own_packed, fp32 only; gemm_panel.h) with its blocking; panels alone (paired or not) for the
// fused linears (pack_panels). A bf16-stored weight
// computed in fp32 stays bf16 in memory (wb, the checkpoint's (N, K) rows): the GEMM widens
// kWidenRows output columns' rows at a time into an fp32 panel and runs oneDNN on the panel, so a
// bf16 checkpoint never has an fp32 copy (half the memory; exact, bf16 -> fp32 loses nothing).
struct CpuPacked {
    void* dnnl = nullptr;
    // int8 (compute I8): w quantized per output channel, w ~ w_scale[n] * q[n, k], packed for
    // oneDNN's u8 x s8 GEMM in dnnl; w_sum[n] = sum_k q[n, k] undoes the activations' +128 shift
    std::vector<float> w_scale;
    std::vector<int32_t> w_sum;
    std::vector<int32_t> w_sum128;  // 128 * w_sum, padded to 32 columns (the AMX epilogue's)
    float* panels = nullptr;  // own_packed and pack_panels: gemm_panel.h's (np, K, NR)
    bool pairs = false;       // panels interleave two weights (pack_panels with wb)
    uint16_t* wb = nullptr;  // bf16 storage, fp32 compute: (N, K), 64-byte aligned
    // int8 or bf16 compute on a CPU with AMX: the own AMX GEMM's tiles (gemm_amx.h) instead of
    // oneDNN's layout
    AmxWeights* amx = nullptr;
    int64_t K = 0, N = 0, m_block = 0, n_block = 0, k_block = 0;
    DType compute = DType::F32;
    CpuPacked() = default;
    CpuPacked(const CpuPacked&) = delete;
    CpuPacked& operator=(const CpuPacked&) = delete;
    ~CpuPacked() {
        if (dnnl) free_packed_dnnl(dnnl);
        free_amx(amx);
        std::free(panels);
        std::free(wb);
    }
};

template <typename T>
T* aligned_array(int64_t n) {
    const size_t bytes = (size_t(n) * sizeof(T) + 63) / 64 * 64;
    auto* p = static_cast<T*>(std::aligned_alloc(64, std::max<size_t>(bytes, 64)));
    if (!p) throw std::bad_alloc();
    return p;
}

inline float stored_to_f32(const void* w, DType t, int64_t i) {
    switch (t) {
        case DType::F32: return static_cast<const float*>(w)[i];
        case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(w)[i]);
        case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(w)[i]);
        case DType::I8:
            return float(static_cast<const int8_t*>(w)[i]);
        case DType::I32: break;  // not a weight dtype: ops::pack_linear_weight refuses it
    }
    return 0.0f;
}

// The int8 weight levels: +-127 where oneDNN's int8 GEMM accumulates each product in 32 bits
// (AVX512-VNNI, AMX); +-63 elsewhere, where vpmaddubsw adds two u8 x s8 products in a saturating
// 16-bit lane: 255 * 63 * 2 = 32130 fits, 255 * 127 * 2 does not.
inline int int8_weight_levels() {
    static const int q = dnnl_int8_exact_products() ? 127 : 63;
    return q;
}

// w (N, K) quantized per output channel into p (int8 compute): q = round(w / s), s = max|w| / Q.
inline void pack_int8(const void* w, DType w_dtype, int64_t K, int64_t N, CpuPacked& p) {
    const int Q = int8_weight_levels();
    std::vector<int8_t> q(size_t(N * K));
    p.w_scale.assign(size_t(N), 0.0f);
    p.w_sum.assign(size_t(N), 0);
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
        float mx = 0.0f;
        for (int64_t k = 0; k < K; ++k)
            mx = std::max(mx, std::fabs(stored_to_f32(w, w_dtype, n * K + k)));
        const float sc = mx > 0.0f ? mx / float(Q) : 1.0f, inv = 1.0f / sc;
        int32_t sum = 0;
        for (int64_t k = 0; k < K; ++k) {
            const float v = std::nearbyint(stored_to_f32(w, w_dtype, n * K + k) * inv);
            const auto qi = int8_t(std::clamp(v, float(-Q), float(Q)));
            q[size_t(n * K + k)] = qi;
            sum += qi;
        }
        p.w_scale[size_t(n)] = sc;
        p.w_sum[size_t(n)] = sum;
    }
    if (amx_gemm_usable()) {
        p.amx = pack_amx(q.data(), DType::I8, K, N, DType::I8);
        p.w_sum128.assign(size_t((N + 31) / 32 * 32), 0);
        for (int64_t n = 0; n < N; ++n) p.w_sum128[size_t(n)] = 128 * p.w_sum[size_t(n)];
    } else
        p.dnnl = pack_linear_dnnl(q.data(), DType::I8, K, N, DType::I8);
}

inline void free_packed(void* packed) {
    delete static_cast<CpuPacked*>(packed);
}

inline const char* act_name(Act act) {
    switch (act) {
        case Act::Gelu:
            return "gelu";
        case Act::GeluTanh:
            return "gelu_tanh";
        case Act::Relu:
            return "relu";
        case Act::Sigmoid:
            return "sigmoid";
        case Act::None:
            break;
    }
    return "none";
}

// Activation over [i, end) of a row.
template <typename V>
inline void activate_span(Act act, float* y, int64_t i, int64_t end) {
    if (act == Act::Gelu) gelu_span<V>(y, y, i, end);
    if (act == Act::GeluTanh) gelu_tanh_span<V>(y, y, i, end);
    if (act == Act::Relu) relu_span<V>(y, y, i, end);
    if (act == Act::Sigmoid) sigmoid_span<V>(y, y, i, end);
}

}  // namespace
}  // namespace bioinfer::cpu

#include "backend/cpu/gemm_panel.h"  // the own GEMM, over the spans above

namespace bioinfer::cpu {
namespace {

// The GEMM provider of a weight: the table's "matmul" choice for its shape or, for a weight that
// runs at a fold's few rows (rows > 0), its "matmul_fold" choice. oneDNN 2.6's fp32 GEMM runs at
// half its rate below about 512 rows on an AVX2 EPYC while the own GEMM keeps its rate
// (docs/performance.md): the sweep's fold set times both at those rows.
template <typename V>
tuning::Choice gemm_provider(DType compute, int64_t K, int64_t N, int64_t rows) {
    return tuned_dtype<V>(rows > 0 ? "matmul_fold" : "matmul", compute, {{"k", K}, {"n", N}});
}

template <typename V>
void* pack_linear(const void* w, DType w_dtype, int64_t K, int64_t N, DType compute, int64_t rows) {
    if (compute == DType::I8) {
        auto p = std::make_unique<CpuPacked>();
        p->K = K;
        p->N = N;
        p->compute = compute;
        pack_int8(w, w_dtype, K, N, *p);
        return p->dnnl || p->amx ? p.release() : nullptr;
    }
    const tuning::Choice c = gemm_provider<V>(compute, K, N, rows);
    auto p = std::make_unique<CpuPacked>();
    p->K = K;
    p->N = N;
    p->compute = compute;
    if (w_dtype == DType::BF16 && compute == DType::F32) {
        p->wb = aligned_array<uint16_t>(K * N);
        std::copy_n(static_cast<const uint16_t*>(w), K * N, p->wb);
        return p.release();
    }
    if (compute == DType::BF16 && (w_dtype == DType::F32 || w_dtype == DType::BF16) &&
        amx_gemm_usable()) {
        p->amx = pack_amx(w, w_dtype, K, N, compute);
        return p.release();
    }
    if (c.is("own_packed") && compute == DType::F32) {
        p->m_block = std::max<int64_t>(1, c.param("m_block"));
        p->n_block = std::max<int64_t>(1, c.param("n_block"));
        p->k_block = std::max<int64_t>(1, c.param("k_block"));
        int64_t np = 0;
        p->panels = pack_panels<V>(w, nullptr, w_dtype, K, N, np);
        return p.release();
    }
    p->dnnl = pack_linear_dnnl(w, w_dtype, K, N, compute);
    return p->dnnl ? p.release() : nullptr;
}

// y (+)= scale * act(x . w^T + b) with the own GEMM and the weight's blocking.
template <typename V>
void own_linear(const float* x, const CpuPacked& p, const float* b, float* y, int64_t M, Act act,
                float scale, bool accumulate) {
    kernels::PanelLinearArgs a{.x = x,
                               .x_rs = p.K,
                               .bias = b,
                               .act = act,
                               .scale = scale,
                               .y = y,
                               .y_rs = p.N,
                               .accumulate = accumulate,
                               .M = M,
                               .K = p.K,
                               .N = p.N};
    panel_linear<V>(a, p.panels, p.m_block, p.n_block, p.k_block);
}

// The fused linears' weights: panels of w, or of w and wb interleaved.
template <typename V>
void* pack_fused(const void* w, const void* wb, DType w_dtype, int64_t K, int64_t N) {
    auto p = std::make_unique<CpuPacked>();
    p->K = K;
    p->N = N;
    p->pairs = wb != nullptr;
    int64_t np = 0;
    p->panels = pack_panels<V>(w, wb, w_dtype, K, N, np);
    return p.release();
}

// A fused linear with the own GEMM's default blocking (backend/tuning/defaults.cpp's own_packed).
template <typename V>
void fused_linear(const kernels::PanelLinearArgs& a) {
    const auto& p = *static_cast<const CpuPacked*>(a.packed);
    static const tuning::Choice c = tuning::resolve("matmul", {"own_packed", {}});
    panel_linear<V>(a, p.panels, c.param("m_block"), c.param("n_block"), c.param("k_block"));
}

// rows x cols of bf16 src (row stride ld_src) widened into fp32 dst (row stride ld_dst), rows
// over the threads.
template <typename V>
void widen_bf16(const uint16_t* src, int64_t ld_src, float* dst, int64_t ld_dst, int64_t rows,
                int64_t cols) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const uint16_t* s = src + r * ld_src;
        float* d = dst + r * ld_dst;
        int64_t c = 0;
        for (; c + V::W <= cols; c += V::W) V::store(d + c, V::load_bf16(s + c));
        for (; c < cols; ++c) d[c] = bf16_to_f32(s[c]);
    }
}

// oneDNN's y (+)= scale * act(x . w^T + b), y's rows ldy apart. A scale without an activation is
// applied in a pass of our own: oneDNN 2.6's GEMM-based matmul (AVX2's fast one) takes a sum only
// as the first post-op, so eltwise_linear then sum went to its reference kernel (DNNL_VERBOSE=1
// shows ref:any), and an output scale with the sum was slower than this pass.
template <typename V>
void dnnl_linear(const float* x, const float* w, const void* pd, const float* b, float* y,
                 int64_t ldy, int64_t M, int64_t K, int64_t N, Act act, float scale,
                 bool accumulate) {
    if (scale == 1.0f || act != Act::None) {
        linear_dnnl(x, w, pd, b, y, M, K, N, act, scale, accumulate, ldy);
        return;
    }
    float* t =
        accumulate
            ? static_cast<float*>(thread_scratch(kScratchScaledSum, size_t(M * N) * sizeof(float)))
            : y;
    const int64_t ldt = accumulate ? N : ldy;
    linear_dnnl(x, w, pd, b, t, M, K, N, Act::None, 1.0f, false, ldt);
    const auto vs = V::set1(scale);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < M; ++r) {
        float* yr = y + r * ldy;
        const float* tr = t + r * ldt;
        int64_t c = 0;
        if (accumulate) {
            for (; c + V::W <= N; c += V::W)
                V::store(yr + c, V::fmadd(V::load(tr + c), vs, V::load(yr + c)));
            for (; c < N; ++c) yr[c] += scale * tr[c];
        } else {
            for (; c + V::W <= N; c += V::W) V::store(yr + c, V::mul(V::load(tr + c), vs));
            for (; c < N; ++c) yr[c] *= scale;
        }
    }
}

// y (+)= scale * act(x . w^T + b) for a bf16-stored w in fp32: panels of kWidenRows rows of w
// (output columns) widened into a cached fp32 buffer, each one oneDNN GEMM writing its columns
// of y in place. `bioinfer bench matmul --weights-dtype bf16|fp32` times it against the fp32 copy
// packed at load (docs/performance.md: 140 against 92 GFLOP/s at 130 x 2560 x 7680, 2 AVX2 cores).
template <typename V>
void widened_linear(const float* x, const CpuPacked& p, const float* b, float* y, int64_t M,
                    Act act, float scale, bool accumulate) {
    constexpr int64_t kWidenRows = 256;
    const int64_t K = p.K, N = p.N, rows = std::min(kWidenRows, N);
    float* panel =
        static_cast<float*>(thread_scratch(kScratchWidenedPanel, size_t(rows * K) * sizeof(float)));
    for (int64_t j0 = 0; j0 < N; j0 += rows) {
        const int64_t n = std::min(rows, N - j0);
        widen_bf16<V>(p.wb + j0 * K, K, panel, K, n, K);
        dnnl_linear<V>(x, panel, nullptr, b ? b + j0 : nullptr, y + j0, N, M, K, n, act, scale,
                       accumulate);
    }
}

// What an AMX GEMM block hands its epilogue: the output and the linear's terms.
struct AmxLinearEpi {
    float* y;
    const float* b;
    Act act;
    float scale;
    bool accumulate;
    const float* sx = nullptr;    // int8: the rows' activation scales
    const float* sw = nullptr;    // int8: the columns' weight scales
    const int32_t* ws = nullptr;  // int8: 128 x the columns' weight sums (the +128 shift)
    int64_t N = 0;
};

// y rows [m0, m0 + rows), columns [n0, n0 + cols) from an AMX block: int8 rescaled (as
// int8_linear's pass below), then the bias, the activation, the scale and the residual.
template <typename V, bool Int8>
void amx_linear_epilogue(void* ctx, const void* block, int64_t m0, int64_t rows, int64_t n0,
                         int64_t cols) {
    const auto& e = *static_cast<const AmxLinearEpi*>(ctx);
    alignas(64) float o[32];
    const auto vscale = V::set1(e.scale);
    // One vector of the block's row r at column c, rescaled (int8) and with the bias.
    auto value = [&](int64_t r, int64_t c) {
        typename V::R v;
        if constexpr (Int8) {
            const int32_t* ar = static_cast<const int32_t*>(block) + r * 32;
            v = V::mul(V::i32_diff(ar + c, e.ws + n0 + c),
                       V::mul(V::set1(e.sx[m0 + r]), V::load(e.sw + n0 + c)));
        } else {
            v = V::load(static_cast<const float*>(block) + r * 32 + c);
        }
        return e.b ? V::add(v, V::load(e.b + n0 + c)) : v;
    };
    for (int64_t r = 0; r < rows; ++r) {
        float* yr = e.y + (m0 + r) * e.N + n0;
        if (cols == 32 && e.act == Act::None) {  // in registers to y
            for (int64_t c = 0; c < 32; c += V::W) {
                auto v = value(r, c);
                if (e.scale != 1.0f) v = V::mul(v, vscale);
                V::store(yr + c, e.accumulate ? V::add(V::load(yr + c), v) : v);
            }
            continue;
        }
        int64_t c = 0;
        if (cols == 32)
            for (; c < 32; c += V::W) V::store(o + c, value(r, c));
        for (; c < cols; ++c) {
            if constexpr (Int8) {
                const int32_t* ar = static_cast<const int32_t*>(block) + r * 32;
                o[c] = float(ar[c] - e.ws[n0 + c]) * (e.sx[m0 + r] * e.sw[n0 + c]);
            } else {
                o[c] = static_cast<const float*>(block)[r * 32 + c];
            }
            if (e.b) o[c] += e.b[n0 + c];
        }
        activate_span<V>(e.act, o, 0, cols);
        c = 0;
        if (cols == 32)
            for (; c < 32; c += V::W) {
                auto v = V::load(o + c);
                if (e.scale != 1.0f) v = V::mul(v, vscale);
                V::store(yr + c, e.accumulate ? V::add(V::load(yr + c), v) : v);
            }
        for (; c < cols; ++c) yr[c] = (e.accumulate ? yr[c] : 0.0f) + o[c] * e.scale;
    }
}

// x's rows quantized to s8 with their own scales (max|x| / 127), shifted by 128 into u8, rows
// ldq bytes apart (the padding columns and the rows from M to M_pad hold 128, a zero).
template <typename V>
void quantize_rows_u8(const float* x, int64_t M, int64_t K, uint8_t* xq, int64_t ldq, int64_t M_pad,
                      float* sx) {
    const auto lo = V::set1(-127.0f), hi = V::set1(127.0f), shift = V::set1(128.0f);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < M_pad; ++r) {
        uint8_t* qr = xq + r * ldq;
        if (r >= M) {
            std::fill_n(qr, ldq, uint8_t(128));
            continue;
        }
        const float* xr = x + r * K;
        auto vm = V::zero();
        int64_t k = 0;
        for (; k + V::W <= K; k += V::W) vm = V::max(vm, V::abs(V::load(xr + k)));
        float mx = V::hmax(vm);
        for (; k < K; ++k) mx = std::max(mx, std::fabs(xr[k]));
        const float sc = mx > 0.0f ? mx / 127.0f : 1.0f, inv = 1.0f / sc;
        const auto vinv = V::set1(inv);
        k = 0;
        for (; k + V::W <= K; k += V::W) {
            const auto q = V::min(hi, V::max(lo, V::round(V::mul(V::load(xr + k), vinv))));
            V::store_u8(qr + k, V::add(q, shift));
        }
        for (; k < K; ++k)
            qr[k] = uint8_t(int(std::clamp(std::nearbyint(xr[k] * inv), -127.0f, 127.0f)) + 128);
        std::fill(qr + K, qr + ldq, uint8_t(128));
        sx[r] = sc;
    }
}

// y (+)= scale * act(x . w^T + b) in int8: each row of x quantized on the fly to s8 with its own
// scale (max|x| / 127) and shifted by 128 into u8, the u8 x s8 -> s32 GEMM against the
// per-channel quantized w (the own AMX GEMM where it runs, else oneDNN's), then y = sx * sw *
// (acc - 128 * w_sum) + b, the activation, the scale, the residual: fused into the AMX GEMM's
// blocks, one pass after oneDNN's.
template <typename V>
void int8_linear(const float* x, const CpuPacked& p, const float* b, float* y, int64_t M, Act act,
                 float scale, bool accumulate) {
    const int64_t K = p.K, N = p.N;
    const int64_t ldq = p.amx ? amx_lda(*p.amx) : K;
    const int64_t M_pad = p.amx ? (M + kAmxRows - 1) / kAmxRows * kAmxRows : M;
    const size_t xq_bytes = (size_t(M_pad * ldq) + 63) / 64 * 64;
    auto* xq = static_cast<uint8_t*>(
        thread_scratch(kScratchInt8Activations, xq_bytes + size_t(M_pad) * sizeof(float)));
    auto* sx = reinterpret_cast<float*>(xq + xq_bytes);
    quantize_rows_u8<V>(x, M, K, xq, ldq, M_pad, sx);
    const float* sw = p.w_scale.data();
    const int32_t* ws = p.w_sum.data();
    if (p.amx) {
        AmxLinearEpi e{y, b, act, scale, accumulate, sx, sw, p.w_sum128.data(), N};
        amx_gemm(xq, *p.amx, M, amx_linear_epilogue<V, true>, &e);
        return;
    }
    auto* acc = static_cast<int32_t*>(
        thread_scratch(kScratchInt8Accumulators, size_t(M * N) * sizeof(int32_t)));
    linear_int8_dnnl(xq, p.dnnl, acc, M, K, N);
#pragma omp parallel
    {
        // a row is rescaled straight into y, or, for a residual add, into a row of its own first
        std::vector<float> t(accumulate ? static_cast<size_t>(N) : 0);
#pragma omp for schedule(static)
        for (int64_t r = 0; r < M; ++r) {
            const int32_t* ar = acc + r * N;
            const float s = sx[r];
            float* yr = y + r * N;
            float* o = accumulate ? t.data() : yr;
            for (int64_t n = 0; n < N; ++n)
                o[n] = float(ar[n] - 128 * ws[n]) * (s * sw[n]) + (b ? b[n] : 0.0f);
            activate_span<V>(act, o, 0, N);
            if (scale != 1.0f) scale_row(o, N, scale);
            if (accumulate) add<V>(yr, o, yr, N);
        }
    }
}

// y (+)= scale * act(x . w^T + b) in bf16 on the own AMX GEMM: x rounded to bf16 (nearest even,
// as oneDNN's reorder), fp32 accumulation, the epilogue fused into the GEMM's blocks.
template <typename V>
void amx_bf16_linear(const float* x, const CpuPacked& p, const float* b, float* y, int64_t M,
                     Act act, float scale, bool accumulate) {
    const int64_t ld = amx_lda(*p.amx);
    const int64_t M_pad = (M + kAmxRows - 1) / kAmxRows * kAmxRows;
    auto* xb = static_cast<uint16_t*>(
        thread_scratch(kScratchBf16Activations, size_t(M_pad * ld) * sizeof(uint16_t)));
    amx_round_bf16(x, M, p.K, xb, ld);
    std::fill(xb + M * ld, xb + M_pad * ld, uint16_t(0));
    AmxLinearEpi e{y, b, act, scale, accumulate};
    e.N = p.N;
    amx_gemm(xb, *p.amx, M, amx_linear_epilogue<V, false>, &e);
}

// The linear kernel: the provider the weight was packed for (oneDNN when not packed). With an
// activation, oneDNN applies it as a post-op (fused, the default) or the GEMM writes y and the
// activation runs after it over y (separate), as the tuned table says for the shape.
template <typename V>
void linear(const float* x, const float* w, const void* packed, const float* b, float* y,
            int64_t M, int64_t K, int64_t N, Act act, float scale, bool accumulate) {
    const auto* p = static_cast<const CpuPacked*>(packed);
    if (p && p->compute == DType::I8) {
        int8_linear<V>(x, *p, b, y, M, act, scale, accumulate);
        return;
    }
    if (p && p->amx) {
        amx_bf16_linear<V>(x, *p, b, y, M, act, scale, accumulate);
        return;
    }
    if (p && p->panels) {
        own_linear<V>(x, *p, b, y, M, act, scale, accumulate);
        return;
    }
    if (p && p->wb) {
        widened_linear<V>(x, *p, b, y, M, act, scale, accumulate);
        return;
    }
    const void* pd = p ? p->dnnl : nullptr;
    if (act != Act::None && !accumulate &&
        tuned_dtype<V>("matmul_act", p ? p->compute : DType::F32,
                       {{"m", M}, {"k", K}, {"n", N}, {"act", int64_t(act)}})
            .is("separate")) {
        linear_dnnl(x, w, pd, b, y, M, K, N, Act::None, 1.0f, false);
        // One pass over y: the activation, then the scale, chunk by chunk.
        elementwise<V>(act_name(act), M * N, [&](int64_t i, int64_t e) {
            activate_span<V>(act, y, i, e);
            if (scale != 1.0f) scale_row(y + i, e - i, scale);
        });
        return;
    }
    dnnl_linear<V>(x, w, pd, b, y, N, M, K, N, act, scale, accumulate);
}

// The kernel table of one ISA: kernels_avx2.cpp and kernels_avx512.cpp each instantiate it
// with their own SIMD wrapper and target flags. The CPU runs every kernel synchronously on the
// calling thread's OpenMP team, so the context is not read; the glue kernels are shared by the
// ISAs (glue_kernels.h).
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
    return t;
}

}  // namespace
}  // namespace bioinfer::cpu
