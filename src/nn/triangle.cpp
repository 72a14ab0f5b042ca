// Triangle multiplication and triangle attention over a pair representation, chunked over rows.
#include "nn/triangle.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "bioinfer/error.h"
#include "ops/ops.h"
#include "tuning/tuned_table.h"

namespace bioinfer::nn {
namespace {

// Rows [r0, r1) of z (L, L, C) as a ((r1 - r0) * L, C) view.
Tensor pair_rows(const Tensor& z, int64_t r0, int64_t r1) {
    return z.narrow0(r0, r1).reshape({(r1 - r0) * z.size(1), z.size(2)});
}

// out ((r1 - r0) * L, C) = columns [r0, r1) of z: out[r - r0, j] = z[j, r].
void gather_columns(const Tensor& z, int64_t r0, int64_t r1, Tensor& out) {
    const int64_t L = z.size(0), C = z.size(2);
    const float* src = z.f32();
    float* dst = out.f32();
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t r = r0; r < r1; ++r)
        for (int64_t j = 0; j < L; ++j)
            std::copy_n(src + (j * L + r) * C, C, dst + ((r - r0) * L + j) * C);
}

// z[j, r] += y[r - r0, j] for the columns [r0, r1).
void scatter_add_columns(const Tensor& y, int64_t r0, int64_t r1, Tensor& z) {
    const int64_t L = z.size(0), C = z.size(2);
    const float* src = y.f32();
    float* dst = z.f32();
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < L; ++j)
        for (int64_t r = r0; r < r1; ++r) {
            const float* s = src + ((r - r0) * L + j) * C;
            float* d = dst + (j * L + r) * C;
            for (int64_t c = 0; c < C; ++c) d[c] += s[c];
        }
}

void check_pair(const Tensor& z, int64_t C, const char* what) {
    BI_CHECK(z.ndim() == 3 && z.size(0) == z.size(1) && z.size(2) == C && z.is_contiguous(), what,
             "pair: expected contiguous (L, L, ", C, "), got ", shape_str(z.shape()));
}


}  // namespace

void transpose_block(const float* src, int64_t lds, float* dst, int64_t ldd, int64_t rows,
                     int64_t cols) {
    constexpr int64_t T = 32;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i0 = 0; i0 < rows; i0 += T)
        for (int64_t j0 = 0; j0 < cols; j0 += T) {
            const int64_t i1 = std::min(rows, i0 + T), j1 = std::min(cols, j0 + T);
            for (int64_t j = j0; j < j1; ++j)
                for (int64_t i = i0; i < i1; ++i) dst[j * ldd + i] = src[i * lds + j];
        }
}

int64_t default_pair_chunk(int64_t L, int64_t C) {
    // About 256 MiB of per-chunk temporaries: a chunk row holds up to ~8 (L, C) fp32 rows.
    const int64_t per_row = std::max<int64_t>(1, L * C * 4 * 8);
    return std::clamp<int64_t>((int64_t(256) << 20) / per_row, 1, std::max<int64_t>(L, 1));
}

Tensor pair_bias(const Tensor& z, const LayerNorm& ln, const Linear& linear, int64_t chunk,
                 bool transposed) {
    const int64_t L = z.size(0), C = z.size(2), H = linear.out_features();
    if (chunk <= 0) chunk = default_pair_chunk(L, C);
    Tensor bias = Tensor::empty({H, L, L});
    for (int64_t r0 = 0; r0 < L; r0 += chunk) {
        const int64_t r1 = std::min(L, r0 + chunk), n = (r1 - r0) * L;
        Tensor zn = Tensor::empty({n, C}), b = Tensor::empty({n, H});
        ln(pair_rows(z, r0, r1), zn);
        linear(zn, b);
        const float* src = b.f32();
        float* dst = bias.f32();
#pragma omp parallel for collapse(2) schedule(static)
        for (int64_t h = 0; h < H; ++h)
            for (int64_t r = r0; r < r1; ++r)
                for (int64_t x = 0; x < L; ++x)
                    dst[transposed ? (h * L + x) * L + r : (h * L + r) * L + x] =
                        src[((r - r0) * L + x) * H + h];
    }
    return bias;
}

int64_t pair_chunk(const char* op, int64_t L, int64_t C, int64_t requested) {
    if (requested > 0) return std::min(requested, L);
    const int64_t cap = default_pair_chunk(L, C);
    const int64_t tuned = tuning::lookup(ops::backend_name(), op, "fp32", {{"seq", L}, {"channels", C}})
                              .param("chunk", 0);
    return std::clamp<int64_t>(tuned > 0 ? std::min(tuned, cap) : cap, 1, L);
}

TriangleMultiplicationNames TriangleMultiplicationNames::boltz2() {
    TriangleMultiplicationNames n;
    n.ln_in = "norm_in", n.ln_out = "norm_out";
    n.ab_p = "p_in", n.ab_g = "g_in";
    n.g = "g_out", n.z = "p_out";
    n.bias = false;
    return n;
}

TriangleMultiplication TriangleMultiplication::load(const io::ModelDir& m, const std::string& p,
                                                    int64_t c, bool outgoing,
                                                    const TriangleMultiplicationNames& n) {
    TriangleMultiplication t;
    t.outgoing = outgoing;
    t.ln_in = LayerNorm::load(m, p + "." + n.ln_in, c, 1e-5f);
    t.ln_out = LayerNorm::load(m, p + "." + n.ln_out, c, 1e-5f);
    // Linears stacked row-wise into one fp32 matrix: (name, rows) each, rows a multiple of c.
    const auto stacked = [&](std::initializer_list<std::pair<const std::string*, int64_t>> parts) {
        int64_t rows = 0;
        for (auto& [name, r] : parts) rows += r;
        Tensor w = Tensor::empty({rows, c});
        Tensor b = n.bias ? Tensor::empty({rows}) : Tensor();
        int64_t row = 0;
        for (auto& [name, r] : parts) {
            const Tensor wi = m.get_f32(p + "." + *name + ".weight", {r, c});
            std::copy_n(wi.f32(), r * c, w.f32() + row * c);
            if (n.bias) {
                const Tensor bi = m.get_f32(p + "." + *name + ".bias", {r});
                std::copy_n(bi.f32(), r, b.f32() + row);
            }
            row += r;
        }
        return Linear::from(w, b);
    };
    if (n.ab_p.empty()) t.proj = stacked({{&n.a_p, c}, {&n.b_p, c}});
    else t.proj = stacked({{&n.ab_p, 2 * c}});
    if (n.ab_g.empty()) t.gate = stacked({{&n.a_g, c}, {&n.b_g, c}, {&n.g, c}});
    else t.gate = stacked({{&n.ab_g, 2 * c}, {&n.g, c}});
    t.z = Linear::load(m, p + "." + n.z, c, c, n.bias);
    return t;
}

void TriangleMultiplication::add_to(Tensor& z_pair, int64_t chunk) const {
    const int64_t C = ln_in.g.size(0);
    check_pair(z_pair, C, "triangle_multiplication");
    const int64_t L = z_pair.size(0), LL = L * L;
    chunk = pair_chunk("trimul", L, C, chunk);
    // a and b channel-major, A_c[i][k] = a[i,k,c] and B_c[j][k] = b[j,k,c], so that
    //   outgoing: P_c = A_c . B_c^T  (p[i,j] = sum_k a[i,k] b[j,k])
    //   incoming: P_c = A_c^T . B_c  (p[i,j] = sum_k a[k,i] b[k,j])
    // and the output gate sigmoid(linear_g(LN_in(z))) kept row-major.
    Tensor A = Tensor::empty({C, L, L}), B = Tensor::empty({C, L, L}), G = Tensor::empty({LL, C});
    for (int64_t r0 = 0; r0 < L; r0 += chunk) {
        const int64_t r1 = std::min(L, r0 + chunk), n = (r1 - r0) * L;
        Tensor zn = Tensor::empty({n, C}), t = Tensor::empty({n, 2 * C}),
               s = Tensor::empty({n, 3 * C});
        ln_in(pair_rows(z_pair, r0, r1), zn);
        proj(zn, t);                        // [a_p | b_p]
        gate(zn, s, {.act = Act::Sigmoid});  // sigmoid of [a_g | b_g | g]
        float* td = t.f32();
        const float* sd = s.f32();
        float* gd = G.f32() + r0 * L * C;
#pragma omp parallel for schedule(static)
        for (int64_t m = 0; m < n; ++m) {
            float* row = td + m * 2 * C;
            const float* g = sd + m * 3 * C;
            for (int64_t c = 0; c < 2 * C; ++c) row[c] *= g[c];  // a, b
            std::copy_n(g + 2 * C, C, gd + m * C);
        }
        transpose_block(td, 2 * C, A.f32() + r0 * L, LL, n, C);
        transpose_block(td + C, 2 * C, B.f32() + r0 * L, LL, n, C);
    }
    Tensor P = Tensor::empty({C, L, L});  // P_c[i][j]
    ops::bmm(A, B, P, /*trans_a=*/!outgoing, /*trans_b=*/outgoing);
    A = Tensor();
    B = Tensor();
    for (int64_t r0 = 0; r0 < L; r0 += chunk) {
        const int64_t r1 = std::min(L, r0 + chunk), n = (r1 - r0) * L;
        Tensor x = Tensor::empty({n, C}), xn = Tensor::empty({n, C}), y = Tensor::empty({n, C});
        transpose_block(P.f32() + r0 * L, LL, x.f32(), C, C, n);
        ln_out(x, xn);
        z(xn, y);
        float* zd = z_pair.f32() + r0 * L * C;
        const float* yd = y.f32();
        const float* gd = G.f32() + r0 * L * C;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n * C; ++i) zd[i] += yd[i] * gd[i];
    }
}

TriangleAttention TriangleAttention::load(const io::ModelDir& m, const std::string& p, int64_t c,
                                          int64_t head_dim, int64_t heads, bool starting,
                                          const TriangleAttentionNames& n) {
    TriangleAttention t;
    t.starting = starting;
    t.heads = heads;
    t.head_dim = head_dim;
    const int64_t hc = heads * head_dim;
    t.ln = LayerNorm::load(m, p + "." + n.ln, c, 1e-5f);
    t.bias = Linear::load(m, p + "." + n.bias, c, heads, false);
    t.q = Linear::load(m, p + "." + n.q, c, hc, false);
    t.k = Linear::load(m, p + "." + n.k, c, hc, false);
    t.v = Linear::load(m, p + "." + n.v, c, hc, false);
    t.g = Linear::load(m, p + "." + n.g, c, hc);
    t.o = Linear::load(m, p + "." + n.o, hc, c);
    return t;
}

void TriangleAttention::add_to(Tensor& z, int64_t chunk) const {
    const int64_t C = ln.g.size(0), H = heads, HC = heads * head_dim;
    check_pair(z, C, "triangle_attention");
    const int64_t L = z.size(0);
    chunk = pair_chunk("triatt", L, C, chunk);
    // The triangle bias (H, L, L) from the whole (normalised) pair first: every row reads it.
    // Around the ending node the attended matrix is z transposed, so bias[h][q][k] = lin(z[k, q]).
    const Tensor tri_bias = pair_bias(z, ln, bias, chunk, !starting);
    const float scale = 1.0f / std::sqrt(float(head_dim));
    for (int64_t r0 = 0; r0 < L; r0 += chunk) {
        const int64_t r1 = std::min(L, r0 + chunk), rows = r1 - r0, n = rows * L;
        Tensor x;  // the attended rows: rows of z, or columns gathered
        if (starting) {
            x = pair_rows(z, r0, r1);
        } else {
            x = Tensor::empty({n, C});
            gather_columns(z, r0, r1, x);
        }
        Tensor xn = Tensor::empty({n, C});
        ln(x, xn);
        Tensor tq = Tensor::empty({rows, L, HC}), tk = Tensor::empty({rows, L, HC}),
               tv = Tensor::empty({rows, L, HC}), tg = Tensor::empty({n, HC}),
               to = Tensor::empty({rows, L, HC});
        Tensor q2 = tq.reshape({n, HC}), k2 = tk.reshape({n, HC}), v2 = tv.reshape({n, HC});
        q(xn, q2);
        k(xn, k2);
        v(xn, v2);
        g(xn, tg, {.act = Act::Sigmoid});
        const std::vector<uint8_t> valid(size_t(n), 1);
        ops::attention(tq, tk, tv, H, scale, valid, to, nullptr, {.bias = &tri_bias});
        Tensor o2 = to.reshape({n, HC});
        ops::mul(o2, tg, o2);
        if (starting) {
            o(o2, x, {.accumulate = true});  // x is a view of z's rows
        } else {
            o(o2, xn);
            scatter_add_columns(xn, r0, r1, z);
        }
    }
}

}  // namespace bioinfer::nn
