// Conditioned transformers: AdaLN, the conditioned transition, DiT layers with a precomputed pair
// bias over full token attention or atom windows (see dit.h).
#include "nn/dit.h"

#include <cmath>
#include <vector>

#include "bioinfer/error.h"
#include "ops/ops.h"

namespace bioinfer::nn {

namespace {

int64_t rows_of(const Tensor& t) { return t.numel() / t.size(-1); }

// boltz's AttentionPairBias masks keys by adding (1 - mask) * -inf with inf = 1e6.
constexpr float kMaskInf = 1e6f;

// Per-head layout for batched GEMMs: x (G, L, H * Dh) -> (G * H, L, Dh).
Tensor heads_first(const Tensor& x, int64_t G, int64_t L, int64_t H, int64_t Dh) {
    return ops::contiguous(x.reshape({G, L, H, Dh}).permute({0, 2, 1, 3})).reshape({G * H, L, Dh});
}

// Runs f(r0, r1) over each sample's rows [r0, r1) of R = S * A rows.
template <class F>
void each_sample(int64_t R, int64_t A, F f) {
    for (int64_t r0 = 0; r0 < R; r0 += A) f(r0, r0 + A);
}

// out = g * x per sample, g (A, D) shared; x and out (S * A, D).
void mul_shared(const Tensor& g, const Tensor& x, Tensor& out) {
    const int64_t A = g.size(0);
    each_sample(x.size(0), A, [&](int64_t r0, int64_t r1) {
        Tensor o = out.narrow0(r0, r1);
        ops::mul(g, x.narrow0(r0, r1), o);
    });
}

nn::LayerNorm plain_layer_norm(int64_t d) {
    return nn::LayerNorm::from(Tensor::of(std::vector<float>(size_t(d), 1.0f)), Tensor(), 1e-5f);
}

}  // namespace

AdaLn AdaLn::load(const io::ModelDir& m, const std::string& p, int64_t dim, int64_t dim_cond) {
    AdaLn a;
    a.a_norm = plain_layer_norm(dim);
    a.s_norm = nn::LayerNorm::load(m, p + ".s_norm", dim_cond, 1e-5f, false);
    a.s_scale = nn::Linear::load(m, p + ".s_scale", dim_cond, dim);
    a.s_bias = nn::Linear::load(m, p + ".s_bias", dim_cond, dim, false);
    return a;
}

void AdaLn::terms(const Tensor& s, Tensor& scale, Tensor& shift) const {
    const int64_t R = rows_of(s), Ds = s.size(-1), D = s_scale.out_features();
    Tensor sn = Tensor::empty({R, Ds});
    s_norm(s.reshape({R, Ds}), sn);
    scale = Tensor::empty({R, D});
    shift = Tensor::empty({R, D});
    s_scale(sn, scale, {.act = Act::Sigmoid});
    s_bias(sn, shift);
}

void AdaLn::apply(const Tensor& a, const Tensor& scale, const Tensor& shift, Tensor& out) const {
    const int64_t R = rows_of(a), D = a.size(-1);
    Tensor an = Tensor::empty({R, D});
    a_norm(a.reshape({R, D}), an);
    Tensor o = out.reshape({R, D});
    mul_shared(scale, an, o);
    each_sample(R, scale.size(0), [&](int64_t r0, int64_t r1) {
        Tensor os = o.narrow0(r0, r1);
        ops::add(os, shift, os);
    });
}

ConditionedTransition ConditionedTransition::load(const io::ModelDir& m, const std::string& p,
                                                  int64_t dim, int64_t dim_cond) {
    ConditionedTransition t;
    const int64_t F = 2 * dim;  // expansion factor 2
    t.adaln = AdaLn::load(m, p + ".adaln", dim, dim_cond);
    const Tensor sg = m.get_f32(p + ".swish_gate.0.weight", {2 * F, dim});
    t.up = nn::Linear::from(sg.narrow0(0, F).clone(), Tensor());
    t.gate = nn::Linear::from(sg.narrow0(F, 2 * F).clone(), Tensor());
    t.a_to_b = nn::Linear::load(m, p + ".a_to_b", dim, F, false);
    t.b_to_a = nn::Linear::load(m, p + ".b_to_a", F, dim, false);
    t.out_proj = nn::Linear::load(m, p + ".output_projection.0", dim_cond, dim);
    return t;
}

void ConditionedTransition::operator()(const Tensor& a, const Tensor& scale, const Tensor& shift,
                                       const Tensor& out_gate, Tensor& out) const {
    const int64_t R = rows_of(a), D = a.size(-1), F = up.out_features();
    Tensor an = Tensor::empty({R, D});
    adaln.apply(a, scale, shift, an);
    Tensor x1 = Tensor::empty({R, F}), x2 = Tensor::empty({R, F}), x3 = Tensor::empty({R, F});
    up(an, x1);
    gate(an, x2);
    ops::swiglu(x2, x1, x1);  // silu(gate half) * first half
    if (a_to_b.w.defined()) {
        a_to_b(an, x3);
        ops::mul(x1, x3, x1);
    }
    Tensor y = Tensor::empty({R, D});
    b_to_a(x1, y);
    Tensor o = out.reshape({R, D});
    mul_shared(out_gate, y, o);
}

DitLayer DitLayer::load(const io::ModelDir& m, const std::string& p, int64_t dim, int64_t dim_cond,
                        int64_t heads) {
    BI_CHECK(heads > 0 && dim % heads == 0, p, "width ", dim, " is not a multiple of ", heads,
             " heads");
    DitLayer l;
    l.heads = heads;
    l.adaln = AdaLn::load(m, p + ".adaln", dim, dim_cond);
    l.attn = nn::GatedBiasedAttention::load(m, p + ".pair_bias_attn", dim, dim / heads,
                                            nn::GatedBiasedAttentionNames::boltz2());
    // boltz registers this linear twice (output_projection_linear and output_projection.0): the
    // same tensor under two names. Read both so the load accounts for them.
    l.out_proj = nn::Linear::load(m, p + ".output_projection_linear", dim_cond, dim);
    if (m.has(p + ".output_projection.0.weight")) {
        m.get_raw(p + ".output_projection.0.weight");
        m.get_raw(p + ".output_projection.0.bias");
    }
    l.transition = ConditionedTransition::load(m, p + ".transition", dim, dim_cond);
    if (m.has(p + ".post_lnorm.weight")) l.post_ln = nn::LayerNorm::load(m, p + ".post_lnorm", dim, 1e-5f);
    return l;
}

DitCond DitLayer::condition(const Tensor& s) const {
    const int64_t R = rows_of(s), D = out_proj.out_features();
    const Tensor s2 = s.reshape({R, s.size(-1)});
    DitCond c;
    adaln.terms(s2, c.scale, c.shift);
    transition.adaln.terms(s2, c.tr_scale, c.tr_shift);
    c.gate = Tensor::empty({R, D});
    c.tr_gate = Tensor::empty({R, D});
    out_proj(s2, c.gate, {.act = Act::Sigmoid});
    transition.out_proj(s2, c.tr_gate, {.act = Act::Sigmoid});
    return c;
}

void DitLayer::forward(Tensor& a, const Tensor& s, const Tensor& bias, const DitBias& lay,
                       const DitCond* cond) const {
    const int64_t R = rows_of(a), D = a.size(-1);
    Tensor a2 = a.reshape({R, D});
    DitCond own;  // the conditioning terms of this call's s, unless made once for every call
    if (!cond) {
        own = condition(s);
        cond = &own;
    }
    Tensor b = Tensor::empty({R, D});
    adaln.apply(a2, cond->scale, cond->shift, b);
    Tensor att = Tensor::empty({R, D});
    if (lay.window_q > 0) {
        // k and v have no bias, so projecting the atoms before windowing equals boltz's
        // projection of the windowed keys (out-of-range keys stay zero vectors).
        attn.forward(
            b,
            [&](const Tensor& tq, const Tensor& tk, const Tensor& tv, Tensor& ctx) {
                window_attention(tq, tk, tv, bias, lay.windows, heads, ctx);
            },
            att);
    } else {
        const int64_t S = R / lay.length;
        std::vector<uint8_t> valid;
        valid.reserve(size_t(R));
        for (int64_t i = 0; i < S; ++i) valid.insert(valid.end(), lay.key_valid.begin(), lay.key_valid.end());
        attn.forward(b, bias, valid, att);
    }
    each_sample(R, cond->gate.size(0), [&](int64_t r0, int64_t r1) {  // a += gate * attn
        Tensor as = a2.narrow0(r0, r1);
        ops::add_mul(cond->gate, att.narrow0(r0, r1), as);
    });
    Tensor t = Tensor::empty({R, D});
    transition(a2, cond->tr_scale, cond->tr_shift, cond->tr_gate, t);
    ops::add(a2, t, a2);
    if (post_ln.defined()) {
        Tensor n = Tensor::empty({R, D});
        post_ln(a2, n);
        ops::copy(n, a2);
    }
}

DiffusionTransformer DiffusionTransformer::load(const io::ModelDir& m, const std::string& p,
                                                int64_t dim, int64_t dim_cond, int64_t depth,
                                                int64_t heads) {
    DiffusionTransformer t;
    t.dim = dim;
    t.heads = heads;
    for (int64_t i = 0; i < depth; ++i)
        t.layers.push_back(DitLayer::load(m, p + ".layers." + std::to_string(i), dim, dim_cond, heads));
    return t;
}

DitBias DiffusionTransformer::prepare(const Tensor& bias, const Tensor& mask) const {
    const int64_t L = int64_t(layers.size()), N = mask.numel();
    BI_CHECK(bias.ndim() == 3 && bias.size(0) == N && bias.size(1) == N &&
                 bias.size(2) == L * heads,
             "nn::DiffusionTransformer", "bias: expected (", N, ", ", N, ", ", L * heads,
             "), got ", shape_str(bias.shape()));
    std::vector<Tensor> per_layer;
    const Tensor b4 = bias.reshape({N, N, L, heads});
    for (int64_t l = 0; l < L; ++l)  // (N, N, H) of layer l -> (H, N, N)
        per_layer.push_back(ops::contiguous(b4.slice(2, l, l + 1).permute({2, 3, 0, 1}))
                                .reshape({heads, N, N}));
    return prepare_layers(std::move(per_layer), mask);
}

DitBias DiffusionTransformer::prepare_layers(std::vector<Tensor> per_layer,
                                             const Tensor& mask) const {
    const int64_t N = mask.numel();
    BI_CHECK(per_layer.size() == layers.size(), "nn::DiffusionTransformer", "bias: expected ",
             layers.size(), " layers, got ", per_layer.size());
    for (const Tensor& b : per_layer)
        BI_CHECK(b.shape() == (Shape{heads, N, N}) && b.is_contiguous(),
                 "nn::DiffusionTransformer", "layer bias: expected contiguous (", heads, ", ", N,
                 ", ", N, "), got ", shape_str(b.shape()));
    DitBias out;
    out.length = N;
    const Tensor m = mask.to_f32();
    // host-side: the token mask as attention flags, once per run
    const float* mv = m.f32();
    for (int64_t i = 0; i < N; ++i) out.key_valid.push_back(mv[i] != 0.0f ? 1 : 0);
    out.layers = std::move(per_layer);
    return out;
}

Tensor DiffusionTransformer::forward(const Tensor& a, const Tensor& s, const DitBias& bias,
                                     const std::function<void(int, const Tensor&)>& after) const {
    BI_CHECK(a.size(-1) == dim && bias.length > 0 && rows_of(a) % bias.length == 0 &&
                 (bias.cond.empty() ? rows_of(s) == rows_of(a)
                                    : bias.cond.size() == layers.size()) &&
                 bias.layers.size() == layers.size(),
             "nn::DiffusionTransformer", "a ", shape_str(a.shape()), " and s ",
             shape_str(s.shape()), " must hold whole samples of ", bias.length, " rows of width ",
             dim, " and bias ", layers.size(), " layers");
    Tensor x = a.clone();
    for (size_t l = 0; l < layers.size(); ++l) {
        layers[l].forward(x, s, bias.layers[l], bias, bias.cond.empty() ? nullptr : &bias.cond[l]);
        if (after) after(int(l), x);
    }
    return x;
}

AtomTransformer AtomTransformer::load(const io::ModelDir& m, const std::string& p, int64_t dim,
                                      int64_t depth, int64_t heads, int64_t window_q,
                                      int64_t window_k) {
    BI_CHECK(window_q > 0 && window_k >= window_q && (window_k - window_q) % 2 == 0,
             p, "unsupported atom windows: ", window_q, " queries, ", window_k, " keys");
    AtomTransformer t;
    t.dit = DiffusionTransformer::load(m, p + ".diffusion_transformer", dim, dim, depth, heads);
    t.window_q = window_q;
    t.window_k = window_k;
    return t;
}

DitBias AtomTransformer::prepare(const Tensor& bias, const Tensor& mask) const {
    return prepare(bias, mask, AtomWindows::make(mask.numel(), window_q, window_k));
}

DitBias AtomTransformer::prepare(const Tensor& bias, const Tensor& mask,
                                 const AtomWindows& windows) const {
    const int64_t A = mask.numel(), L = int64_t(dit.layers.size()), H = dit.heads;
    const int64_t Wq = window_q, Wk = window_k, NW = windows.windows;
    BI_CHECK(windows.atoms == A && windows.window_q == Wq && windows.window_k == Wk,
             "nn::AtomTransformer", "windows of ", windows.atoms, " atoms (", windows.window_q,
             " x ", windows.window_k, "): expected ", A, " atoms (", Wq, " x ", Wk, ")");
    BI_CHECK(bias.ndim() == 4 && bias.size(0) == NW && bias.size(1) == Wq && bias.size(2) == Wk &&
                 bias.size(3) == L * H,
             "nn::AtomTransformer", "bias: expected (", NW, ", ", Wq, ", ", Wk, ", ", L * H,
             "), got ", shape_str(bias.shape()));
    DitBias out;
    out.length = A;
    out.window_q = Wq;
    out.window_k = Wk;
    out.windows = windows;
    // (NW, Wk) additive key mask: 0 for real atoms, -1e6 for padding and keys outside the atoms
    Tensor km = windows.keys(mask.to_f32().reshape({A, 1})).reshape({NW, 1, 1, Wk});
    ops::activation(km, Act::None, km, -1.0f);
    ops::scale(km, kMaskInf, km);
    const Tensor b5 = bias.reshape({NW, Wq, Wk, L, H});
    for (int64_t l = 0; l < L; ++l) {  // (NW, Wq, Wk, H) of layer l -> (NW, H, Wq, Wk)
        Tensor bl = ops::contiguous(b5.slice(3, l, l + 1).permute({0, 3, 4, 1, 2}))
                        .reshape({NW, H, Wq, Wk});
        ops::add_into(km.expand({NW, H, Wq, Wk}), bl);
        out.layers.push_back(bl);
    }
    return out;
}

void AtomTransformer::condition(DitBias& bias, const Tensor& c) const {
    BI_CHECK(rows_of(c) == bias.length, "nn::AtomTransformer", "c ", shape_str(c.shape()),
             ": expected ", bias.length, " rows");
    bias.cond.clear();
    for (const DitLayer& l : dit.layers) bias.cond.push_back(l.condition(c));
}

Tensor AtomTransformer::forward(const Tensor& q, const Tensor& c, const DitBias& bias,
                                const std::function<void(int, const Tensor&)>& after) const {
    const int64_t R = rows_of(q), A = bias.length;
    BI_CHECK(A > 0 && R % A == 0, "nn::AtomTransformer", "q ", shape_str(q.shape()),
             ": expected whole samples of ", A, " atoms");
    if (!bias.cond.empty()) return dit.forward(q, c, bias, after);  // c's terms made once
    const int64_t S = R / A, Ds = c.size(-1);
    Tensor cc = c;
    if (rows_of(c) == A && S > 1) {  // one conditioning shared by every sample
        cc = Tensor::empty({S, A, Ds});
        ops::copy(c.reshape({1, A, Ds}).expand({S, A, Ds}), cc);
    }
    BI_CHECK(rows_of(cc) == R, "nn::AtomTransformer", "c ", shape_str(c.shape()),
             ": expected ", A, " or ", R, " rows");
    return dit.forward(q, cc, bias, after);
}

}  // namespace bioinfer::nn
