// Triangle multiplication and triangle attention over a pair representation, chunked over rows.
#include "nn/triangle.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/tuning/defaults.h"
#include "bioinfer/error.h"
#include "ops/ops.h"

namespace bioinfer::nn {
namespace {

// Rows [r0, r1) of z (L, L, C) as a ((r1 - r0) * L, C) view.
Tensor pair_rows(const Tensor& z, int64_t r0, int64_t r1) {
    return z.narrow0(r0, r1).reshape({(r1 - r0) * z.size(1), z.size(2)});
}

// Columns [r0, r1) of z (L, L, C) as a (r1 - r0, L, C) view: [r - r0, j] is z[j, r].
Tensor pair_columns(const Tensor& z, int64_t r0, int64_t r1) {
    return z.slice(1, r0, r1).permute({1, 0, 2});
}

void check_pair(const Tensor& z, int64_t C, const char* what) {
    BI_CHECK(z.ndim() == 3 && z.size(0) == z.size(1) && z.size(2) == C && z.is_contiguous(), what,
             "pair: expected contiguous (L, L, ", C, "), got ", shape_str(z.shape()));
}

// Pairs per step of the whole-pair pipelines below: about 1 MiB of one (pairs, C) fp32
// temporary, so what a step's LayerNorm writes is still in the cores' L2 when its GEMMs read it
// (`bioinfer bench matmul --k 128 --n 128`: much faster at --m 4096, operands in cache, than at
// --m 65536, operands streamed from memory).
int64_t step_pairs(int64_t C) { return std::max<int64_t>(64, (int64_t(1) << 20) / (4 * C)); }

// Whole rows of an (L, L, C) pair per step: step_pairs' worth, at least one row.
int64_t step_rows(int64_t L, int64_t C) {
    return std::clamp<int64_t>(step_pairs(C) / std::max<int64_t>(L, 1), 1, std::max<int64_t>(L, 1));
}

}  // namespace

int64_t default_pair_chunk(int64_t L, int64_t C) {
    // About 256 MiB of per-chunk temporaries: a chunk row holds up to ~8 (L, C) fp32 rows.
    const int64_t per_row = std::max<int64_t>(1, L * C * 4 * 8);
    return std::clamp<int64_t>((int64_t(256) << 20) / per_row, 1, std::max<int64_t>(L, 1));
}

namespace {

// Rows [r0, r1) of the bias (H, L, L) from those pair rows normalised, zn ((r1 - r0) * L, C):
// bias[h, r, x] = linear(zn)[r - r0, x, h], or bias[h, x, r] when transposed.
void pair_bias_rows(const Tensor& zn, const Linear& linear, int64_t r0, int64_t r1, bool transposed,
                    Tensor& bias) {
    const int64_t L = bias.size(1), H = linear.out_features();
    Tensor b = Tensor::empty({zn.size(0), H});
    linear(zn, b);
    const Tensor bv = b.reshape({r1 - r0, L, H});
    Tensor dst = transposed ? bias.slice(2, r0, r1) : bias.slice(1, r0, r1);
    ops::copy(transposed ? bv.permute({2, 1, 0}) : bv.permute({2, 0, 1}), dst);
}

}  // namespace

Tensor pair_bias(const Tensor& z, const LayerNorm& ln, const Linear& linear, int64_t chunk,
                 bool transposed) {
    const int64_t L = z.size(0), C = z.size(2), H = linear.out_features();
    if (chunk <= 0) chunk = step_rows(L, C);  // a cached step of rows at a time
    Tensor bias = Tensor::empty({H, L, L});
    Tensor zn_buf = Tensor::empty({std::min(chunk, L) * L, C});
    for (int64_t r0 = 0; r0 < L; r0 += chunk) {
        const int64_t r1 = std::min(L, r0 + chunk);
        Tensor zn = zn_buf.narrow0(0, (r1 - r0) * L);
        ln(pair_rows(z, r0, r1), zn);
        pair_bias_rows(zn, linear, r0, r1, transposed, bias);
    }
    return bias;
}

int64_t pair_chunk(const char* op, int64_t L, int64_t C, int64_t requested) {
    if (requested > 0) return std::min(requested, L);
    const int64_t cap = default_pair_chunk(L, C);
    const int64_t tuned = tuning::choose(ops::backend_name(), op, "fp32", {{"seq", L}, {"channels", C}})
                              .param("chunk");
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

TriangleMultiplicationNames TriangleMultiplicationNames::esmfold2() {
    TriangleMultiplicationNames n;
    n.ln_in = "norm_start", n.ln_out = "norm_mix";
    n.bundle = "proj_bundle";
    n.g = "proj_gate", n.z = "proj_emit";
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
    // Linears stacked row-wise into one fp32 matrix: rows [first, first + count) of each part's
    // (rows, c) checkpoint matrix.
    struct Part {
        const std::string* name;
        int64_t rows, first, count;
    };
    const auto stacked = [&](std::initializer_list<Part> parts) {
        int64_t rows = 0;
        for (const Part& q : parts) rows += q.count;
        Tensor w = Tensor::empty({rows, c});
        Tensor b = n.bias ? Tensor::empty({rows}) : Tensor();
        int64_t row = 0;
        for (const Part& q : parts) {  // host-side: weights stacked once at load
            const Tensor wi = m.get_f32(p + "." + *q.name + ".weight", {q.rows, c});
            std::copy_n(wi.f32() + q.first * c, q.count * c, w.f32() + row * c);
            if (n.bias) {
                const Tensor bi = m.get_f32(p + "." + *q.name + ".bias", {q.rows});
                std::copy_n(bi.f32() + q.first, q.count, b.f32() + row);
            }
            row += q.count;
        }
        return Linear::from(w, b);
    };
    if (!n.bundle.empty()) {
        t.proj = stacked({{&n.bundle, 4 * c, 0, 2 * c}});
        t.gate = stacked({{&n.bundle, 4 * c, 2 * c, 2 * c}, {&n.g, c, 0, c}});
    } else {
        if (n.ab_p.empty())
            t.proj = stacked({{&n.a_p, c, 0, c}, {&n.b_p, c, 0, c}});
        else
            t.proj = stacked({{&n.ab_p, 2 * c, 0, 2 * c}});
        if (n.ab_g.empty())
            t.gate = stacked({{&n.a_g, c, 0, c}, {&n.b_g, c, 0, c}, {&n.g, c, 0, c}});
        else
            t.gate = stacked({{&n.ab_g, 2 * c, 0, 2 * c}, {&n.g, c, 0, c}});
    }
    t.z = Linear::load(m, p + "." + n.z, c, c, n.bias);
    if (ops::matmul_precision() == DType::F32) {
        const Tensor w_ab = t.gate.w.narrow0(0, 2 * c), w_g = t.gate.w.narrow0(2 * c, 3 * c);
        t.fused_ab = ops::pack_fused_weight(w_ab, &t.proj.w);
        t.fused_g = ops::pack_fused_weight(w_g);
        t.fused_z = ops::pack_fused_weight(t.z.w);
        if (t.fused_ab && t.fused_g && t.fused_z) {  // every path runs the fused GEMMs then
            t.proj.packed = nullptr;
            t.gate.packed = nullptr;
            t.z.packed = nullptr;
        } else {
            t.fused_ab = t.fused_g = t.fused_z = nullptr;
        }
    }
    return t;
}

void TriangleMultiplication::add_to(Tensor& z_pair, int64_t chunk, const Tensor* pair_mask) const {
    const int64_t C = ln_in.g.size(0);
    check_pair(z_pair, C, "triangle_multiplication");
    const int64_t L = z_pair.size(0), LL = L * L;
    if (pair_mask)
        BI_CHECK(pair_mask->numel() == LL, "triangle_multiplication",
                 "pair_mask: expected (", L, ", ", L, "), got ", shape_str(pair_mask->shape()));
    const Tensor mask_flat = pair_mask ? pair_mask->to_f32().reshape({LL}) : Tensor();
    // The whole pair at once for bias-free linears (Boltz-2, ESMFold2) whenever its temporaries
    // fit the default budget: faster than any row chunking at 128 and 256 residues. Biased ones
    // (ESMFold) follow the tuned chunk, as the tuned chunk sizes were measured for them, and so
    // does a masked pair (Boltz-2's affinity module).
    const bool biased = proj.b.defined() || gate.b.defined();
    chunk = !biased && !pair_mask && chunk <= 0 && default_pair_chunk(L, C) >= L
                ? L
                : pair_chunk("trimul", L, C, chunk);
    if (fused_ab) {
        add_fused(z_pair, chunk, pair_mask ? &mask_flat : nullptr);
        return;
    }
    if (!biased && !pair_mask && chunk >= L) {
        add_whole(z_pair);
        return;
    }
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
        ops::mul(t, s.slice(1, 0, 2 * C), t);  // a, b
        if (pair_mask) ops::scale_rows(t, mask_flat.narrow0(r0 * L, r0 * L + n), t);
        Tensor g_rows = G.narrow0(r0 * L, r0 * L + n);
        ops::copy(s.slice(1, 2 * C, 3 * C), g_rows);
        // channel-major: A[c, r0 * L + m] = a[m, c], B likewise
        Tensor a_cols = A.reshape({C, LL}).slice(1, r0 * L, r0 * L + n),
               b_cols = B.reshape({C, LL}).slice(1, r0 * L, r0 * L + n);
        ops::copy(t.slice(1, 0, C).permute({1, 0}), a_cols);
        ops::copy(t.slice(1, C, 2 * C).permute({1, 0}), b_cols);
    }
    Tensor P = Tensor::empty({C, L, L});  // P_c[i][j]
    ops::bmm(A, B, P, /*trans_a=*/!outgoing, /*trans_b=*/outgoing);
    A = Tensor();
    B = Tensor();
    for (int64_t r0 = 0; r0 < L; r0 += chunk) {
        const int64_t r1 = std::min(L, r0 + chunk), n = (r1 - r0) * L;
        Tensor x = Tensor::empty({n, C}), xn = Tensor::empty({n, C}), y = Tensor::empty({n, C});
        ops::copy(P.reshape({C, LL}).slice(1, r0 * L, r0 * L + n).permute({1, 0}), x);
        ln_out(x, xn);
        z(xn, y);
        Tensor z_rows = pair_rows(z_pair, r0, r1);
        ops::add_mul(y, G.narrow0(r0 * L, r0 * L + n), z_rows);  // z += y * g
    }
}

void TriangleMultiplication::add_fused(Tensor& z_pair, int64_t chunk, const Tensor* mask) const {
    const int64_t C = ln_in.g.size(0), L = z_pair.size(0), LL = L * L;
    // AB[c, m]: a (c < C) or b (c >= C) at pair m, channel-major, as the product wants them,
    // written by the paired GEMM through AB's transposed view (a bias-free, unmasked chunk) or
    // gathered from a row-major chunk after the mask; G: the output gate, row-major.
    Tensor AB = Tensor::empty({2 * C, LL}), G = Tensor::empty({LL, C});
    const Tensor w_ab = gate.w.narrow0(0, 2 * C), w_g = gate.w.narrow0(2 * C, 3 * C);
    const bool biased = gate.b.defined();
    const Tensor b_ab = biased ? gate.b.narrow0(0, 2 * C) : Tensor(),
                 b_g = biased ? gate.b.narrow0(2 * C, 3 * C) : Tensor();
    ops::FusedLinear in;  // LN_in on the input of both input GEMMs
    in.ln_gamma = &ln_in.g;
    in.ln_beta = &ln_in.b;
    in.ln_eps = ln_in.eps;
    ops::FusedLinear pairs = in;  // sigmoid(LN_in(z) . [a_g; b_g]^T) * (LN_in(z) . [a_p; b_p]^T)
    pairs.w2 = &proj.w;
    pairs.bias2 = proj.b.defined() ? &proj.b : nullptr;
    pairs.glu = kernels::Glu::Sigmoid;
    ops::FusedLinear gated = in;
    gated.ep.act = Act::Sigmoid;
    for (int64_t r0 = 0; r0 < L; r0 += chunk) {
        const int64_t r1 = std::min(L, r0 + chunk), m0 = r0 * L, n = (r1 - r0) * L;
        const Tensor z_rows = pair_rows(z_pair, r0, r1);
        Tensor ab_cols = AB.slice(1, m0, m0 + n);
        if (mask) {
            Tensor t = Tensor::empty({n, 2 * C});
            ops::fused_linear(z_rows, w_ab, biased ? &b_ab : nullptr, t, pairs, fused_ab.get());
            ops::scale_rows(t, mask->narrow0(m0, m0 + n), t);
            ops::copy(t.permute({1, 0}), ab_cols);
        } else {
            Tensor ab_rows = ab_cols.permute({1, 0});
            ops::fused_linear(z_rows, w_ab, biased ? &b_ab : nullptr, ab_rows, pairs,
                              fused_ab.get());
        }
        Tensor g_rows = G.narrow0(m0, m0 + n);
        ops::fused_linear(z_rows, w_g, biased ? &b_g : nullptr, g_rows, gated, fused_g.get());
    }
    Tensor P = Tensor::empty({C, L, L});  // P_c[i][j], as in add_to
    ops::bmm(AB.narrow0(0, C).reshape({C, L, L}), AB.narrow0(C, 2 * C).reshape({C, L, L}), P,
             /*trans_a=*/!outgoing, /*trans_b=*/outgoing);
    AB = Tensor();
    // z += linear_z(LN_out(p)) * g: p's rows read through its channel-major view
    const Tensor P_cols = P.reshape({C, LL});
    const ops::FusedLinear out{.ln_gamma = &ln_out.g,
                               .ln_beta = &ln_out.b,
                               .ln_eps = ln_out.eps,
                               .ep = {.accumulate = true}};
    for (int64_t r0 = 0; r0 < L; r0 += chunk) {
        const int64_t r1 = std::min(L, r0 + chunk), m0 = r0 * L, n = (r1 - r0) * L;
        ops::FusedLinear o = out;
        const Tensor g_rows = G.narrow0(m0, m0 + n);
        o.mul = &g_rows;
        Tensor z_rows = pair_rows(z_pair, r0, r1);
        ops::fused_linear(P_cols.slice(1, m0, m0 + n).permute({1, 0}), z.w,
                          z.b.defined() ? &z.b : nullptr, z_rows, o, fused_z.get());
    }
}

void TriangleMultiplication::add_whole(Tensor& z_pair) const {
    const int64_t C = ln_in.g.size(0), L = z_pair.size(0), LL = L * L;
    const int64_t step = std::min(LL, step_pairs(C));
    Tensor z_flat = z_pair.reshape({LL, C});
    // AB[c, m]: a (c < C) or b (c >= C) at pair m, channel-major, as the product wants them;
    // G: the output gate, row-major. Made a step of pairs at a time: LN_in(z) for the step, then
    // its projections straight out of the GEMM channel-major, W (2C, C) . zn^T, gated by
    // sigmoid([a_g; b_g] . zn^T), written into the step's columns of AB.
    Tensor AB = Tensor::empty({2 * C, LL}), G = Tensor::empty({LL, C});
    {
        const Tensor w_gate = gate.w.narrow0(0, 2 * C), w_g = gate.w.narrow0(2 * C, 3 * C);
        Tensor zn_buf = Tensor::empty({step, C}), t_buf = Tensor::empty({2 * C, step}),
               s_buf = Tensor::empty({2 * C, step});
        for (int64_t m0 = 0; m0 < LL; m0 += step) {
            const int64_t m1 = std::min(LL, m0 + step), n = m1 - m0;
            Tensor zn = zn_buf.narrow0(0, n);
            Tensor t = n == step ? t_buf : Tensor::empty({2 * C, n});
            Tensor sg = n == step ? s_buf : Tensor::empty({2 * C, n});
            ln_in(z_flat.narrow0(m0, m1), zn);
            ops::linear(proj.w, zn, nullptr, t);
            ops::linear(w_gate, zn, nullptr, sg, {.act = Act::Sigmoid});
            Tensor ab_cols = AB.slice(1, m0, m1);
            ops::mul(t, sg, ab_cols);
            Tensor g_rows = G.narrow0(m0, m1);
            ops::linear(zn, w_g, nullptr, g_rows, {.act = Act::Sigmoid});
        }
    }
    Tensor P = Tensor::empty({C, L, L});  // P_c[i][j], as in add_to
    ops::bmm(AB.narrow0(0, C).reshape({C, L, L}), AB.narrow0(C, 2 * C).reshape({C, L, L}), P,
             /*trans_a=*/!outgoing, /*trans_b=*/outgoing);
    AB = Tensor();
    // z += linear_z(LN_out(p)) * g, a step of pairs at a time: p's columns transposed back to rows.
    const Tensor P_cols = P.reshape({C, LL});
    Tensor x_buf = Tensor::empty({step, C}), xn_buf = Tensor::empty({step, C});
    for (int64_t m0 = 0; m0 < LL; m0 += step) {
        const int64_t m1 = std::min(LL, m0 + step), n = m1 - m0;
        Tensor x = x_buf.narrow0(0, n), xn = xn_buf.narrow0(0, n);
        ops::copy(P_cols.slice(1, m0, m1).permute({1, 0}), x);
        ln_out(x, xn);
        z(xn, x);
        Tensor z_rows = z_flat.narrow0(m0, m1);
        ops::add_mul(x, G.narrow0(m0, m1), z_rows);  // z += y * g
    }
}

TriangleAttentionNames TriangleAttentionNames::boltz2() {
    TriangleAttentionNames n;
    n.g_o_bias = false;
    return n;
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
    t.g = Linear::load(m, p + "." + n.g, c, hc, n.g_o_bias);
    t.o = Linear::load(m, p + "." + n.o, hc, c, n.g_o_bias);
    return t;
}

namespace {

// Attention along one attended row whose keys are all masked, as boltz computes it: the score
// q.k (q scaled first), then the mask's -1e9, then the triangle bias, each added in fp32, so the
// scores keep only what survives rounding at 1e9 (multiples of 64): nearly always every key ties
// and the softmax is uniform. q, k, v (rows, L, H * Dh), bias (H, L, L); out's row `row` is
// replaced.
void masked_row_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                          int64_t row, float scale, Tensor& out) {
    // host-side: a rare row (no binder or receptor token), L x L x H scores
    const int64_t L = q.size(1), HC = q.size(2), H = bias.size(0), Dh = HC / H;
    const float* qp = q.f32() + row * L * HC;
    const float* kp = k.f32() + row * L * HC;
    const float* vp = v.f32() + row * L * HC;
    const float* bp = bias.f32();
    float* op = out.f32() + row * L * HC;
    std::vector<float> a(static_cast<size_t>(L));
    for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < L; ++i) {
            float mx = -INFINITY;
            for (int64_t j = 0; j < L; ++j) {
                float sc = 0;
                for (int64_t d = 0; d < Dh; ++d)
                    sc += (qp[i * HC + h * Dh + d] * scale) * kp[j * HC + h * Dh + d];
                volatile float t = sc - 1e9f;  // rounded before the bias is added
                a[size_t(j)] = t + bp[(h * L + i) * L + j];
                mx = std::max(mx, a[size_t(j)]);
            }
            float sum = 0;
            for (int64_t j = 0; j < L; ++j) sum += (a[size_t(j)] = std::exp(a[size_t(j)] - mx));
            for (int64_t d = 0; d < Dh; ++d) {
                float acc = 0;
                for (int64_t j = 0; j < L; ++j) acc += a[size_t(j)] * vp[j * HC + h * Dh + d];
                op[i * HC + h * Dh + d] = acc / sum;
            }
        }
}

}  // namespace

void TriangleAttention::add_to(Tensor& z, int64_t chunk, const Tensor* pair_mask) const {
    const int64_t C = ln.g.size(0), H = heads, HC = heads * head_dim;
    check_pair(z, C, "triangle_attention");
    const int64_t L = z.size(0);
    chunk = pair_chunk("triatt", L, C, chunk);
    // Keys kept per attended row (row r, key k): mask[r, k] starting, mask[k, r] ending.
    std::vector<uint8_t> kept, all_masked;
    if (pair_mask) {
        BI_CHECK(pair_mask->numel() == L * L, "triangle_attention", "pair_mask: expected (", L,
                 ", ", L, "), got ", shape_str(pair_mask->shape()));
        const Tensor m = pair_mask->to_f32();
        kept.resize(size_t(L * L));
        all_masked.resize(size_t(L));
        // host-side: the mask's (L, L) bytes
        for (int64_t r = 0; r < L; ++r) {
            bool any = false;
            for (int64_t k = 0; k < L; ++k) {
                const float v = starting ? m.f32()[r * L + k] : m.f32()[k * L + r];
                kept[size_t(r * L + k)] = v > 0.5f;
                any |= v > 0.5f;
            }
            // A row with every key masked: boltz's scores are all about -1e9 there; they are
            // made below as boltz rounds them, and the kernel sees every key meanwhile.
            all_masked[size_t(r)] = !any;
            if (!any) std::fill(kept.begin() + r * L, kept.begin() + (r + 1) * L, uint8_t(1));
        }
    } else if (chunk >= L) {
        add_whole(z);
        return;
    }
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
            Tensor x3 = x.reshape({rows, L, C});
            ops::copy(pair_columns(z, r0, r1), x3);
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
        const std::vector<uint8_t> valid =
            pair_mask ? std::vector<uint8_t>(kept.begin() + r0 * L, kept.begin() + r1 * L)
                      : std::vector<uint8_t>(size_t(n), 1);
        ops::attention(tq, tk, tv, H, scale, valid, to, nullptr, {.bias = &tri_bias});
        for (int64_t r = r0; r < r1; ++r)
            if (pair_mask && all_masked[size_t(r)])
                masked_row_attention(tq, tk, tv, tri_bias, r - r0, scale, to);
        Tensor o2 = to.reshape({n, HC});
        ops::mul(o2, tg, o2);
        if (starting) {
            o(o2, x, {.accumulate = true});  // x is a view of z's rows
        } else {
            o(o2, xn);
            Tensor columns = pair_columns(z, r0, r1);
            ops::add_into(xn.reshape({rows, L, C}), columns);
        }
    }
}

void TriangleAttention::add_whole(Tensor& z) const {
    const int64_t C = ln.g.size(0), H = heads, HC = heads * head_dim, L = z.size(0), LL = L * L;
    // A step of whole rows of the attended matrix (z's rows, or its columns gathered), ~1 MiB.
    const int64_t step = step_rows(L, C);
    Tensor x_buf = starting ? Tensor() : Tensor::empty({step * L, C});
    Tensor xn_buf = Tensor::empty({step * L, C}), og_buf = Tensor::empty({step * L, HC});
    // Per step: LN, then the bias rows and q, k, v, g of those rows from the cached LN output.
    // bias[h][q][k] = lin(xn)[q, k, h] over the attended matrix's rows, so it needs every step
    // before any attention runs.
    Tensor tri_bias = Tensor::empty({H, L, L});
    Tensor tq = Tensor::empty({L, L, HC}), tk = Tensor::empty({L, L, HC}),
           tv = Tensor::empty({L, L, HC}), tg = Tensor::empty({LL, HC});
    const auto attended = [&](int64_t r0, int64_t r1) {
        if (starting) return pair_rows(z, r0, r1);
        Tensor x = x_buf.narrow0(0, (r1 - r0) * L);
        Tensor x3 = x.reshape({r1 - r0, L, C});
        ops::copy(pair_columns(z, r0, r1), x3);
        return x;
    };
    for (int64_t r0 = 0; r0 < L; r0 += step) {
        const int64_t r1 = std::min(L, r0 + step), p0 = r0 * L, p1 = r1 * L;
        Tensor xn = xn_buf.narrow0(0, p1 - p0);
        ln(attended(r0, r1), xn);
        pair_bias_rows(xn, bias, r0, r1, /*transposed=*/false, tri_bias);
        Tensor q2 = tq.reshape({LL, HC}).narrow0(p0, p1), k2 = tk.reshape({LL, HC}).narrow0(p0, p1),
               v2 = tv.reshape({LL, HC}).narrow0(p0, p1), g2 = tg.narrow0(p0, p1);
        q(xn, q2);
        k(xn, k2);
        v(xn, v2);
        g(xn, g2, {.act = Act::Sigmoid});
    }
    Tensor to = Tensor::empty({L, L, HC});
    {
        const std::vector<uint8_t> valid(size_t(LL), 1);
        ops::attention(tq, tk, tv, H, 1.0f / std::sqrt(float(head_dim)), valid, to, nullptr,
                       {.bias = &tri_bias});
    }
    tq = tk = tv = Tensor();
    // Per step: gate, output projection, added into z's rows (or scattered into its columns).
    const Tensor o_flat = to.reshape({LL, HC});
    for (int64_t r0 = 0; r0 < L; r0 += step) {
        const int64_t r1 = std::min(L, r0 + step), p0 = r0 * L, p1 = r1 * L;
        Tensor og = og_buf.narrow0(0, p1 - p0);
        ops::mul(o_flat.narrow0(p0, p1), tg.narrow0(p0, p1), og);
        if (starting) {
            Tensor z_rows = pair_rows(z, r0, r1);
            o(og, z_rows, {.accumulate = true});
        } else {
            Tensor y = x_buf.narrow0(0, p1 - p0);
            o(og, y);
            Tensor columns = pair_columns(z, r0, r1);
            ops::add_into(y.reshape({r1 - r0, L, C}), columns);
        }
    }
}

}  // namespace bioinfer::nn
