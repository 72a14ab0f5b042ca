// Sequence <-> pair coupling blocks and the residual MLP of ESMFold-style trunks.
#include "nn/pair_seq.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "bioinfer/error.h"
#include "nn/triangle.h"
#include "ops/ops.h"

namespace bioinfer::nn {

PairToSequence PairToSequence::load(const io::ModelDir& m, const std::string& p, int64_t c,
                                    int64_t heads, const PairToSequenceNames& n) {
    return {LayerNorm::load(m, p + "." + n.ln, c, 1e-5f),
            Linear::load(m, p + "." + n.linear, c, heads, false)};
}

Tensor PairToSequence::operator()(const Tensor& z, int64_t chunk) const {
    return pair_bias(z, ln, linear, chunk, false);
}

GatedBiasedAttentionNames GatedBiasedAttentionNames::boltz2() {
    GatedBiasedAttentionNames n;
    n.proj.clear();
    n.q = "proj_q", n.k = "proj_k", n.v = "proj_v", n.g = "proj_g", n.o = "proj_o";
    n.q_bias = true;
    n.g_o_bias = false;
    return n;
}

GatedBiasedAttention GatedBiasedAttention::load(const io::ModelDir& m, const std::string& p,
                                                int64_t dim, int64_t head_dim,
                                                const GatedBiasedAttentionNames& n) {
    BI_CHECK(head_dim > 0 && dim % head_dim == 0, p, "width ", dim,
             " is not a multiple of the head width ", head_dim);
    GatedBiasedAttention a;
    a.heads = dim / head_dim;
    a.head_dim = head_dim;
    if (n.proj.empty()) {
        a.q = Linear::load(m, p + "." + n.q, dim, dim, n.q_bias);
        a.k = Linear::load(m, p + "." + n.k, dim, dim, false);
        a.v = Linear::load(m, p + "." + n.v, dim, dim, false);
        a.g = Linear::load(m, p + "." + n.g, dim, dim, n.g_o_bias);
        a.o = Linear::load(m, p + "." + n.o, dim, dim, n.g_o_bias);
        return a;
    }
    // proj (3 * dim, dim): output column h * 3 * hw + part * hw + c is head h's q/k/v channel c.
    Tensor w = m.get_f32(p + "." + n.proj + ".weight", {3 * dim, dim});
    // host-side: the weight rearranged once at load
    Tensor parts[3];
    for (int part = 0; part < 3; ++part) {
        parts[part] = Tensor::empty({dim, dim});
        for (int64_t h = 0; h < a.heads; ++h)
            std::copy_n(w.f32() + (h * 3 * head_dim + part * head_dim) * dim, head_dim * dim,
                        parts[part].f32() + h * head_dim * dim);
    }
    a.q = Linear::from(parts[0], Tensor());
    a.k = Linear::from(parts[1], Tensor());
    a.v = Linear::from(parts[2], Tensor());
    a.g = Linear::load(m, p + "." + n.g, dim, dim, n.g_o_bias);
    a.o = Linear::load(m, p + "." + n.o, dim, dim, n.g_o_bias);
    return a;
}

void GatedBiasedAttention::forward(const Tensor& y, const Core& core, Tensor& out,
                                   bool accumulate) const {
    const int64_t R = y.size(0), D = heads * head_dim;
    Tensor tq = Tensor::empty({R, D}), tk = Tensor::empty({R, D}), tv = Tensor::empty({R, D}),
           tg = Tensor::empty({R, D}), ctx = Tensor::empty({R, D});
    q(y, tq);
    k(y, tk);
    v(y, tv);
    core(tq, tk, tv, ctx);
    g(y, tg, {.act = Act::Sigmoid});
    ops::mul(ctx, tg, ctx);
    o(ctx, out, {.accumulate = accumulate});
}

void GatedBiasedAttention::forward(const Tensor& y, const Tensor& bias,
                                   const std::vector<uint8_t>& key_valid, Tensor& out,
                                   bool accumulate) const {
    const int64_t R = y.size(0), D = heads * head_dim, L = bias.size(-1), S = R / L;
    BI_CHECK(S * L == R && (key_valid.empty() || int64_t(key_valid.size()) == R),
             "nn::GatedBiasedAttention", "rows ", R, ": expected whole sequences of ", L,
             " and as many key flags, got ", key_valid.size());
    const std::vector<uint8_t> all = key_valid.empty() ? std::vector<uint8_t>(size_t(R), 1)
                                                       : std::vector<uint8_t>();
    const std::vector<uint8_t>& valid = key_valid.empty() ? all : key_valid;
    forward(
        y,
        [&](const Tensor& tq, const Tensor& tk, const Tensor& tv, Tensor& ctx) {
            Tensor c3 = ctx.reshape({S, L, D});
            ops::attention(tq.reshape({S, L, D}), tk.reshape({S, L, D}), tv.reshape({S, L, D}),
                           heads, 1.0f / std::sqrt(float(head_dim)), valid, c3, nullptr,
                           {.bias = &bias});
        },
        out, accumulate);
}

void GatedBiasedAttention::add_to(const Tensor& y, const Tensor& bias, Tensor& s) const {
    forward(y, bias, {}, s, /*accumulate=*/true);
}

SequenceToPair SequenceToPair::load(const io::ModelDir& m, const std::string& p, int64_t dim,
                                    int64_t inner, int64_t c, const SequenceToPairNames& n) {
    return {LayerNorm::load(m, p + "." + n.ln, dim, 1e-5f),
            Linear::load(m, p + "." + n.proj, dim, 2 * inner),
            Linear::load(m, p + "." + n.o_proj, 2 * inner, c)};
}

void SequenceToPair::add_to(const Tensor& s, Tensor& z, int64_t chunk) const {
    const int64_t L = s.size(0), D = s.size(1), I2 = proj.out_features(), C = z.size(2);
    if (chunk <= 0) chunk = default_pair_chunk(L, C);
    Tensor sn = Tensor::empty({L, D}), qk = Tensor::empty({L, I2});
    ln(s, sn);
    proj(sn, qk);
    for (int64_t r0 = 0; r0 < L; r0 += chunk) {
        const int64_t r1 = std::min(L, r0 + chunk), n = (r1 - r0) * L;
        Tensor x = Tensor::empty({n, I2});
        ops::outer_product_difference(qk, r0, r1, x);
        Tensor zr = z.narrow0(r0, r1).reshape({n, C});
        o_proj(x, zr, {.accumulate = true});
    }
}

ResidueMlpNames ResidueMlpNames::boltz2() {
    ResidueMlpNames n;
    n.ln = "norm", n.gate = "fc1", n.up = "fc2", n.down = "fc3";
    n.bias = false;
    return n;
}

ResidueMlpNames ResidueMlpNames::esmfold2() {
    ResidueMlpNames n;
    n.ln = "norm", n.gate_up = "mlp.gate_up_proj", n.down = "mlp.down_proj";
    n.bias = false;
    return n;
}

ResidueMlp ResidueMlp::load(const io::ModelDir& m, const std::string& p, int64_t dim, int64_t inner,
                            const ResidueMlpNames& n) {
    ResidueMlp r;
    r.ln = LayerNorm::load(m, p + "." + n.ln, dim, 1e-5f);
    if (!n.gate_up.empty()) {
        BI_CHECK(!n.bias, p, "a stacked gate_up projection is read without biases");
        const Tensor gu = m.get_f32(p + "." + n.gate_up + ".weight", {2 * inner, dim});
        r.gate = Linear::from_rows(gu, 0, inner);
        r.up = Linear::from_rows(gu, inner, 2 * inner);
    } else {
        r.up = Linear::load(m, p + "." + n.up, dim, inner, n.bias);
        if (!n.gate.empty()) r.gate = Linear::load(m, p + "." + n.gate, dim, inner, n.bias);
    }
    r.down = Linear::load(m, p + "." + n.down, inner, dim, n.bias);
    if (ops::matmul_precision() == DType::F32) {
        const bool swiglu = r.gate.w.defined();
        r.fused_in =
            swiglu ? ops::pack_fused_weight(r.gate.w, &r.up.w) : ops::pack_fused_weight(r.up.w);
        if (r.fused_in) {  // the fused GEMM reads the panels: no second packing of the same rows
            r.up.packed = nullptr;
            r.gate.packed = nullptr;
        }
    }
    return r;
}

void ResidueMlp::add_to(Tensor& x, int64_t chunk) const {
    const int64_t rows = x.size(0), D = x.size(1), F = up.out_features();
    const bool swiglu = gate.w.defined();
    if (chunk <= 0) {
        // Small weights (pair transitions, hundreds of KiB): chunks of ~4.5 MiB of temporaries,
        // so a chunk's normalised rows and hidden activations are still in cache when the next
        // GEMM reads them. Large weights: ~256 MiB chunks, so the weights are streamed from
        // memory few times.
        const int64_t row_bytes = (D + (swiglu ? 2 : 1) * F) * 4;
        const int64_t weight_bytes = (swiglu ? 3 : 2) * D * F * 4;
        const int64_t budget = weight_bytes <= (int64_t(4) << 20) ? (int64_t(9) << 19) : (int64_t(256) << 20);
        chunk = std::max<int64_t>(16, budget / row_bytes);
    }
    chunk = std::min(chunk, std::max<int64_t>(rows, 1));
    if (fused_in) {
        const Tensor* bias =
            (swiglu ? gate.b : up.b).defined() ? &(swiglu ? gate.b : up.b) : nullptr;
        ops::FusedLinear f;
        f.ln_gamma = &ln.g;
        f.ln_beta = &ln.b;
        f.ln_eps = ln.eps;
        if (swiglu) {
            f.w2 = &up.w;
            f.bias2 = up.b.defined() ? &up.b : nullptr;
        } else {
            f.ep.act = Act::Relu;
        }
        Tensor h_buf = Tensor::empty({chunk, F});
        for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
            const int64_t r1 = std::min(rows, r0 + chunk);
            Tensor xr = x.narrow0(r0, r1), h = h_buf.narrow0(0, r1 - r0);
            ops::fused_linear(xr, swiglu ? gate.w : up.w, bias, h, f, fused_in.get());
            down(h, xr, {.accumulate = true});
        }
        return;
    }
    // Temporaries allocated once and narrowed for the last chunk.
    Tensor xn_buf = Tensor::empty({chunk, D}), h_buf = Tensor::empty({chunk, F}),
           gt_buf = swiglu ? Tensor::empty({chunk, F}) : Tensor();
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t r1 = std::min(rows, r0 + chunk), n = r1 - r0;
        Tensor xr = x.narrow0(r0, r1), xn = xn_buf.narrow0(0, n), h = h_buf.narrow0(0, n);
        ln(xr, xn);
        if (swiglu) {
            Tensor gt = gt_buf.narrow0(0, n);
            gate(xn, gt);
            up(xn, h);
            ops::swiglu(gt, h, h);  // silu(gate) * up
        } else {
            up(xn, h, {.act = Act::Relu});
        }
        down(h, xr, {.accumulate = true});
    }
}

}  // namespace bioinfer::nn
