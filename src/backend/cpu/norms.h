// The CPU's row normalisations over a SIMD wrapper V: layer norm (two-pass or one-pass row
// statistics) and softmax (three-pass or online, with additive and keep masks).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "backend/cpu/kernel_common.h"

namespace bioinfer::cpu {
namespace {  // internal linkage: see kernel_common.h

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

}  // namespace
}  // namespace bioinfer::cpu
