// Plain fp32 reference kernels: the oracle every optimized kernel is tested against.
// Accumulation in double where it costs nothing in clarity, so the oracle is the more exact side.
#include "backend/ref/ref_kernels.h"

#include <cmath>
#include <algorithm>
#include <limits>
#include <vector>

#include "backend/geometry_units.h"
#include "backend/glue_units.h"

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

void linear(const Context&, const float* x, const float* w, const void* /*packed*/, const float* b, float* y,
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

void gemm_nn(const Context&, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
             int64_t M, int64_t N, int64_t K) {
    for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
            double acc = 0;
            for (int64_t k = 0; k < K; ++k) acc += double(a[m * lda + k]) * b[k * ldb + n];
            c[m * ldc + n] = float(acc);
        }
}

void layer_norm(const Context&, const float* x, const float* g, const float* bt, float* y, int64_t rows,
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

void gelu(const Context&, const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = gelu_erf(x[i]);
}

void gelu_tanh(const Context&, const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = gelu_tanh_1(x[i]);
}

void softmax(const Context&, float* x, int64_t rows, int64_t cols, const float* additive, const uint8_t* keep) {
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

void rotary(const Context&, float* x, int64_t n_pos, int64_t pos_stride, int64_t heads, int64_t dh,
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
void attention(const Context&, const float* q, const float* k, const float* v, float* out, const int64_t* cu,
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

void swiglu(const Context&, const float* g, const float* u, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = float(double(g[i]) / (1.0 + std::exp(-double(g[i]))) * u[i]);
}

void add(const Context&, const float* a, const float* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void bmm(const Context&, const float* a, const float* b, float* c, int64_t G, int64_t M, int64_t N, int64_t K,
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

void mul(const Context&, const float* a, const float* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

void scale(const Context&, const float* a, float s, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] * s;
}

// --- data movement and glue: the units of glue_units.h in order, on one thread ---

void copy_strided(const Context&, const void* src, void* dst, int ndim, const int64_t* shape,
                  const int64_t* ss, const int64_t* ds, bool accumulate) {
    int64_t total = 1;
    for (int d = 0; d < ndim; ++d) total *= shape[d];
    const auto* s = static_cast<const uint32_t*>(src);
    auto* y = static_cast<uint32_t*>(dst);
    for (int64_t flat = 0; flat < total; ++flat) {
        int64_t o = flat, so = 0, dof = 0;
        for (int d = ndim - 1; d >= 0; --d) {
            const int64_t i = o % shape[d];
            o /= shape[d];
            so += i * ss[d];
            dof += i * ds[d];
        }
        if (accumulate)
            reinterpret_cast<float*>(y)[dof] += reinterpret_cast<const float*>(s)[so];
        else
            y[dof] = s[so];
    }
}

void binary_rows(const Context&, int op, const float* a, int64_t lda, const float* b, int64_t ldb,
                 float* y, int64_t ldy, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
            const float x = a[r * lda + c], z = b[r * ldb + c];
            float& o = y[r * ldy + c];
            o = op == kBinaryAdd ? x + z : op == kBinaryMul ? x * z : o + x * z;
        }
}

void add_mul(const Context&, const float* a, const float* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += a[i] * b[i];
}

void axpy(const Context&, float alpha, const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void scale_rows(const Context&, const float* x, const float* f, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = x[r * cols + c] * f[r];
}

void activation_ref(const Context&, Act act, const float* x, float shift, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = activate(act, x[i] + shift);
}

void embedding(const Context&, const int32_t* ids, int64_t n, const float* table, int64_t D,
               float* out, bool accumulate) {
    for (int64_t i = 0; i < n; ++i)
        for (int64_t d = 0; d < D; ++d) {
            const float v = ids[i] < 0 ? 0.0f : table[int64_t(ids[i]) * D + d];
            out[i * D + d] = accumulate ? out[i * D + d] + v : v;
        }
}

void token_dropout(const Context&, float* x, const int32_t* ids, const int64_t* cu, int64_t B,
                   int64_t D, int32_t mask_id, float keep) {
    for (int64_t b = 0; b < B; ++b)
        glue::token_dropout_seq(x + cu[b] * D, ids + cu[b], cu[b + 1] - cu[b], D, mask_id, keep);
}

void outer_product_difference(const Context&, const float* qk, int64_t L, int64_t I, int64_t r0,
                              int64_t r1, float* out) {
    for (int64_t i = r0; i < r1; ++i)
        for (int64_t j = 0; j < L; ++j)
            glue::outer_product_difference_row(qk, I, i, j, out + ((i - r0) * L + j) * 2 * I);
}

void contact_apc(const Context&, const float* probs, int64_t H, int64_t P, int64_t L,
                 const float* w, float* acc) {
    std::vector<double> row(static_cast<size_t>(L));
    for (int64_t h = 0; h < H; ++h) {
        const double total = glue::contact_row_sums(probs + h * P * P, P, L, row.data());
        for (int64_t i = 0; i < L; ++i)
            glue::contact_apc_row(probs + h * P * P, P, L, w[h], row.data(), total, i, acc);
    }
}

void l2_normalize(const Context&, const float* x, float* y, int64_t rows, int64_t d, float eps) {
    for (int64_t r = 0; r < rows; ++r) glue::l2_normalize_row(x + r * d, y + r * d, d, eps);
}

void rms_norm(const Context&, const float* x, float* y, int64_t rows, int64_t d, float eps) {
    for (int64_t r = 0; r < rows; ++r) glue::rms_norm_row(x + r * d, y + r * d, d, eps);
}

void bin_expectation(const Context&, const float* probs, const float* values, float* out,
                     int64_t rows, int64_t K) {
    for (int64_t r = 0; r < rows; ++r) out[r] = glue::bin_expectation_row(probs + r * K, values, K);
}

void max_value(const Context&, const float* x, int64_t n, float* out) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
    out[0] = m;
}

void relpos_classes(const Context&, const int32_t* index, int64_t L, int64_t bins, int32_t* out) {
    for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < L; ++j) out[i * L + j] = glue::relpos_class(index, bins, i, j);
}

void virtual_cb(const Context&, const float* atoms, int64_t L, int64_t stride, float* out) {
    for (int64_t i = 0; i < L; ++i) glue::virtual_cb_1(atoms + i * stride * 3, out + i * 3);
}

void atom_pair_geometry(const Context&, const float* pos, const float* valid, const float* uid,
                        const int32_t* keys, int64_t K, int64_t W, int64_t H, float* out) {
    for (int64_t k = 0; k < K; ++k)
        for (int64_t w = 0; w < W; ++w)
            glue::atom_pair_geometry_row(pos, valid, uid, keys + k * H, k * W + w, H,
                                         out + (k * W + w) * H * 5);
}

void distance_bins(const Context&, const float* points, int64_t L, const float* bounds_sq,
                   int64_t nb, int32_t* out) {
    for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < L; ++j)
            out[i * L + j] = glue::distance_bin(points + i * 3, points + j * 3, bounds_sq, nb);
}

void quat_update(const Context&, float* frames, const float* update, int64_t L) {
    for (int64_t i = 0; i < L; ++i) glue::quat_update_1(frames + i * 7, update + i * 6);
}

// Invariant point attention written out in double from its definition (AlphaFold 2 algorithm 22):
// an oracle independent of the fp32 unit the CPU runs.
void ipa(const Context&, const IpaArgs& A) {
    const int64_t L = A.L, H = A.H, C = A.C, Pq = A.Pq, Pv = A.Pv, Pkv = Pq + Pv, Cz = A.Cz;
    const int64_t F = H * (C + 4 * Pv + Cz);
    struct R { double rot[9], t[3]; };
    std::vector<R> fr(static_cast<size_t>(L));
    for (int64_t i = 0; i < L; ++i) {
        const float* f = A.frames + i * 7;
        const double a = f[0], b = f[1], c = f[2], d = f[3];
        fr[size_t(i)] = {{a * a + b * b - c * c - d * d, 2 * (b * c - a * d), 2 * (b * d + a * c),
                          2 * (b * c + a * d), a * a - b * b + c * c - d * d, 2 * (c * d - a * b),
                          2 * (b * d - a * c), 2 * (c * d + a * b), a * a - b * b - c * c + d * d},
                         {f[4], f[5], f[6]}};
    }
    // point p of residue i from a raw (3 * n) block, in the global frame
    const auto global = [&](const float* raw, int64_t n, int64_t i, int64_t p, double* g) {
        const double x[3] = {raw[i * 3 * n + p], raw[i * 3 * n + n + p], raw[i * 3 * n + 2 * n + p]};
        const R& r = fr[size_t(i)];
        for (int e = 0; e < 3; ++e)
            g[e] = r.rot[e * 3] * x[0] + r.rot[e * 3 + 1] * x[1] + r.rot[e * 3 + 2] * x[2] + r.t[e];
    };
    const double scalar_scale = std::sqrt(1.0 / (3.0 * double(C))), bias_scale = std::sqrt(1.0 / 3.0);
    std::vector<double> w(static_cast<size_t>(L));
    for (int64_t i = 0; i < L; ++i)
        for (int64_t h = 0; h < H; ++h) {
            double mx = -1e300;
            for (int64_t j = 0; j < L; ++j) {
                double dot = 0, d2 = 0;
                for (int64_t c = 0; c < C; ++c)
                    dot += double(A.q[i * H * C + h * C + c]) * A.kv[j * 2 * H * C + h * 2 * C + c];
                for (int64_t p = 0; p < Pq; ++p) {
                    double x[3], y[3];
                    global(A.q_points, H * Pq, i, h * Pq + p, x);
                    global(A.kv_points, H * Pkv, j, h * Pkv + p, y);
                    for (int e = 0; e < 3; ++e) d2 += (x[e] - y[e]) * (x[e] - y[e]);
                }
                w[size_t(j)] = dot * scalar_scale + bias_scale * A.bias[(i * L + j) * H + h] -
                               0.5 * A.head_weights[h] * d2;
                mx = std::max(mx, w[size_t(j)]);
            }
            double sum = 0;
            for (int64_t j = 0; j < L; ++j) sum += w[size_t(j)] = std::exp(w[size_t(j)] - mx);
            float* f = A.out + i * F;
            for (int64_t c = 0; c < C; ++c) {
                double o = 0;
                for (int64_t j = 0; j < L; ++j) o += w[size_t(j)] / sum * A.kv[j * 2 * H * C + h * 2 * C + C + c];
                f[h * C + c] = float(o);
            }
            for (int64_t c = 0; c < Cz; ++c) {
                double o = 0;
                for (int64_t j = 0; j < L; ++j) o += w[size_t(j)] / sum * A.z[(i * L + j) * Cz + c];
                f[H * (C + 4 * Pv) + h * Cz + c] = float(o);
            }
            for (int64_t p = 0; p < Pv; ++p) {
                double g[3] = {0, 0, 0};
                for (int64_t j = 0; j < L; ++j) {
                    double y[3];
                    global(A.kv_points, H * Pkv, j, h * Pkv + Pq + p, y);
                    for (int e = 0; e < 3; ++e) g[e] += w[size_t(j)] / sum * y[e];
                }
                const R& r = fr[size_t(i)];
                double local[3];
                for (int e = 0; e < 3; ++e)  // R^T (g - t)
                    local[e] = r.rot[e] * (g[0] - r.t[0]) + r.rot[3 + e] * (g[1] - r.t[1]) +
                               r.rot[6 + e] * (g[2] - r.t[2]);
                const int64_t k = h * Pv + p;
                for (int e = 0; e < 3; ++e) f[H * C + e * H * Pv + k] = float(local[e]);
                f[H * C + 3 * H * Pv + k] = float(std::sqrt(
                    local[0] * local[0] + local[1] * local[1] + local[2] * local[2] + A.eps));
            }
        }
}

void atom_frames(const Context&, const AtomFrameArgs& A) {
    for (int64_t i = 0; i < A.L; ++i) glue::atom_frames_1(A, i);
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
                               .scale = scale,
                               .copy_strided = copy_strided,
                               .binary_rows = binary_rows,
                               .add_mul = add_mul,
                               .axpy = axpy,
                               .scale_rows = scale_rows,
                               .activation = activation_ref,
                               .embedding = embedding,
                               .token_dropout = token_dropout,
                               .outer_product_difference = outer_product_difference,
                               .contact_apc = contact_apc,
                               .l2_normalize = l2_normalize,
                               .rms_norm = rms_norm,
                               .bin_expectation = bin_expectation,
                               .max_value = max_value,
                               .relpos_classes = relpos_classes,
                               .virtual_cb = virtual_cb,
                               .distance_bins = distance_bins,
                               .atom_pair_geometry = atom_pair_geometry,
                               .quat_update = quat_update,
                               .ipa = ipa,
                               .atom_frames = atom_frames};
    return t;
}

}  // namespace bioinfer::kernels
