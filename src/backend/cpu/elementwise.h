// The CPU's elementwise kernels over a SIMD wrapper V: GELU (erf and tanh forms), SwiGLU,
// sigmoid and ReLU spans, add, mul and scale, and the activation a linear's epilogue applies.
#pragma once
#include <cmath>
#include <cstdint>

#include "backend/cpu/kernel_common.h"

namespace bioinfer::cpu {
namespace {  // internal linkage: see kernel_common.h

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
