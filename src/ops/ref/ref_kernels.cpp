// Plain fp32 reference kernels: the oracle every optimized kernel is tested against.
// Accumulation in double where it costs nothing in clarity, so the oracle is the more exact side.
#include <cmath>
#include <algorithm>
#include <limits>
#include <vector>

#include "ops/kernels.h"

namespace bioinfer::kernels {
namespace {

float gelu_erf(float x) { return float(0.5 * double(x) * (1.0 + std::erf(double(x) / std::sqrt(2.0)))); }
float gelu_tanh_1(float x) {
    const double d = x;
    return float(0.5 * d * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (d + 0.044715 * d * d * d))));
}

float activate(Act act, float x) {
    switch (act) {
        case Act::Gelu: return gelu_erf(x);
        case Act::GeluTanh: return gelu_tanh_1(x);
        case Act::Relu: return x > 0.0f ? x : 0.0f;
        case Act::Sigmoid: return float(1.0 / (1.0 + std::exp(-double(x))));
        case Act::None: break;
    }
    return x;
}

void linear(const float* x, const float* w, const void* /*packed*/, const float* b, float* y,
            int64_t M, int64_t K, int64_t N, Act act, float scale, bool accumulate) {
#pragma omp parallel for
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
            double acc = b ? b[n] : 0.0;
            for (int64_t k = 0; k < K; ++k) acc += double(x[m * K + k]) * w[n * K + k];
            float r = activate(act, float(acc)) * scale;
            y[m * N + n] = accumulate ? y[m * N + n] + r : r;
        }
    }
}

void gemm_nn(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
             int64_t M, int64_t N, int64_t K) {
    for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
            double acc = 0;
            for (int64_t k = 0; k < K; ++k) acc += double(a[m * lda + k]) * b[k * ldb + n];
            c[m * ldc + n] = float(acc);
        }
}

void layer_norm(const float* x, const float* g, const float* bt, float* y, int64_t rows,
                int64_t d, float eps) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * d;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < d; ++i) mean += xr[i];
        mean /= double(d);
        for (int64_t i = 0; i < d; ++i) var += (xr[i] - mean) * (xr[i] - mean);
        var /= double(d);  // biased variance, as torch.nn.LayerNorm
        const double inv = 1.0 / std::sqrt(var + double(eps));
        for (int64_t i = 0; i < d; ++i) y[r * d + i] = float((xr[i] - mean) * inv * g[i] + bt[i]);
    }
}

void gelu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = gelu_erf(x[i]);
}

void gelu_tanh(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = gelu_tanh_1(x[i]);
}

void softmax(float* x, int64_t rows, int64_t cols, const float* additive, const uint8_t* keep) {
    for (int64_t r = 0; r < rows; ++r) {
        float* xr = x + r * cols;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t c = 0; c < cols; ++c) {
            if (additive) xr[c] += additive[c];
            if (!keep || keep[c]) mx = std::max(mx, double(xr[c]));
        }
        double sum = 0;
        for (int64_t c = 0; c < cols; ++c) {
            double e = (!keep || keep[c]) ? std::exp(double(xr[c]) - mx) : 0.0;
            xr[c] = float(e);
            sum += e;
        }
        for (int64_t c = 0; c < cols; ++c) xr[c] = sum > 0 ? float(xr[c] / sum) : 0.0f;
    }
}

void rotary(float* x, int64_t n_pos, int64_t pos_stride, int64_t heads, int64_t dh,
            const float* cos, const float* sin) {
    const int64_t half = dh / 2;
    for (int64_t p = 0; p < n_pos; ++p)
        for (int64_t h = 0; h < heads; ++h) {
            float* v = x + p * pos_stride + h * dh;
            for (int64_t i = 0; i < half; ++i) {
                const float c = cos[p * half + i], s = sin[p * half + i];
                const float x1 = v[i], x2 = v[i + half];
                v[i] = x1 * c - x2 * s;  // x*cos + rotate_half(x)*sin, rotate_half = (-x2, x1)
                v[i + half] = x2 * c + x1 * s;
            }
        }
}

// Textbook attention, one query row at a time, in double.
void attention(const float* q, const float* k, const float* v, float* out, const int64_t* cu,
               int64_t B, int64_t H, int64_t Hkv, int64_t Dh, float scale, bool causal,
               const uint8_t* key_valid, float* probs, int64_t P, const float* bias,
               int64_t bias_stride) {
    const int64_t D = H * Dh, Dkv = Hkv * Dh, group = H / Hkv;
    if (probs) std::fill(probs, probs + B * H * P * P, 0.0f);
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h) {
            const int64_t r0 = cu[b], L = cu[b + 1] - cu[b], hk = h / group;
            std::vector<double> p(static_cast<size_t>(L));
            for (int64_t i = 0; i < L; ++i) {
                const auto sees = [&](int64_t j) {
                    return (!key_valid || key_valid[r0 + j]) && (!causal || j <= i);
                };
                const float* qi = q + (r0 + i) * D + h * Dh;
                const float* bi = bias ? bias + b * bias_stride + (h * L + i) * L : nullptr;
                double mx = -std::numeric_limits<double>::infinity();
                for (int64_t j = 0; j < L; ++j) {
                    if (!sees(j)) continue;
                    const float* kj = k + (r0 + j) * Dkv + hk * Dh;
                    double d = 0;
                    for (int64_t c = 0; c < Dh; ++c) d += double(qi[c]) * kj[c];
                    p[size_t(j)] = d * scale + (bi ? double(bi[j]) : 0.0);
                    mx = std::max(mx, p[size_t(j)]);
                }
                double sum = 0;
                for (int64_t j = 0; j < L; ++j)
                    sum += p[size_t(j)] = sees(j) ? std::exp(p[size_t(j)] - mx) : 0.0;
                for (int64_t j = 0; j < L; ++j) p[size_t(j)] = sum > 0 ? p[size_t(j)] / sum : 0.0;
                if (probs)
                    for (int64_t j = 0; j < L; ++j)
                        probs[((b * H + h) * P + i) * P + j] = float(p[size_t(j)]);
                float* oi = out + (r0 + i) * D + h * Dh;
                for (int64_t c = 0; c < Dh; ++c) {
                    double o = 0;
                    for (int64_t j = 0; j < L; ++j)
                        o += p[size_t(j)] * v[(r0 + j) * Dkv + hk * Dh + c];
                    oi[c] = float(o);
                }
            }
        }
}

void swiglu(const float* g, const float* u, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = float(double(g[i]) / (1.0 + std::exp(-double(g[i]))) * u[i]);
}

void add(const float* a, const float* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void bmm(const float* a, const float* b, float* c, int64_t G, int64_t M, int64_t N, int64_t K,
         bool trans_a, bool trans_b) {
#pragma omp parallel for collapse(2)
    for (int64_t g = 0; g < G; ++g)
        for (int64_t m = 0; m < M; ++m) {
            const float* ag = a + g * M * K;
            const float* bg = b + g * K * N;
            for (int64_t n = 0; n < N; ++n) {
                double s = 0;
                for (int64_t k = 0; k < K; ++k)
                    s += double(trans_a ? ag[k * M + m] : ag[m * K + k]) *
                         (trans_b ? bg[n * K + k] : bg[k * N + n]);
                c[(g * M + m) * N + n] = float(s);
            }
        }
}

void mul(const float* a, const float* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

void scale(const float* a, float s, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] * s;
}

}  // namespace

const KernelTable& ref_kernels() {
    static const KernelTable t{.name = "ref",
                               .linear = linear,
                               .pack_linear = nullptr,
                               .free_packed = nullptr,
                               .gemm_nn = gemm_nn,
                               .attention = attention,
                               .layer_norm = layer_norm,
                               .gelu = gelu,
                               .gelu_tanh = gelu_tanh,
                               .swiglu = swiglu,
                               .softmax = softmax,
                               .rotary = rotary,
                               .bmm = bmm,
                               .add = add,
                               .mul = mul,
                               .scale = scale};
    return t;
}

}  // namespace bioinfer::kernels
