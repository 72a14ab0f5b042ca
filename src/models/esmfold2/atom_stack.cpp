// ESMFold2's sliding-window atom transformer: see atom_stack.h.
#include "models/esmfold2/atom_stack.h"

#include <cmath>
#include <limits>

#include "bioinfer/error.h"
#include "ops/ops.h"

namespace bioinfer::esmfold2 {
namespace {

constexpr const char* kWhere = "esmfold2 atoms";
constexpr int64_t kBlock = 32;  // query block of the windowed attention (atoms are padded to it)

// out = a * b per sample: a (A, c) shared, b and out (S * A, c).
void mul_shared(const Tensor& a, const Tensor& b, Tensor& out) {
    const int64_t A = a.size(0);
    for (int64_t r0 = 0; r0 < b.size(0); r0 += A) {
        Tensor o = out.narrow0(r0, r0 + A);
        ops::mul(a, b.narrow0(r0, r0 + A), o);
    }
}

// x = x * scale + shift per sample (scale and shift (A, c) shared).
void modulate(Tensor& x, const Tensor& scale, const Tensor& shift) {
    mul_shared(scale, x, x);
    const int64_t A = scale.size(0);
    for (int64_t r0 = 0; r0 < x.size(0); r0 += A) {
        Tensor o = x.narrow0(r0, r0 + A);
        ops::add(o, shift, o);
    }
}

// out += gate * x per sample (gate (A, c) shared).
void add_gated(const Tensor& gate, const Tensor& x, Tensor& out) {
    const int64_t A = gate.size(0);
    for (int64_t r0 = 0; r0 < x.size(0); r0 += A) {
        Tensor o = out.narrow0(r0, r0 + A);
        ops::add_mul(gate, x.narrow0(r0, r0 + A), o);
    }
}

}  // namespace

AtomStack AtomStack::load(const io::ModelDir& m, const std::string& p, const AtomStackConfig& cfg,
                          int64_t window, int64_t atom_features, bool encoder) {
    AtomStack s;
    s.cfg = cfg;
    s.half_window = window / 2;
    const int64_t c = cfg.hidden, F = cfg.intermediate;
    if (encoder) {
        s.embed = nn::Linear::load(m, p + ".atom_linear", atom_features, c, false);
        s.embed_norm = nn::LayerNorm::load(m, p + ".atom_norm", c, 1e-5f);
        s.to_token = nn::Linear::load(m, p + ".atom_to_token_linear", c, cfg.output_dim, false);
    }
    for (int64_t l = 0; l < cfg.layers; ++l) {
        const std::string q = p + ".layers." + std::to_string(l);
        AtomLayer a;
        a.adaln = nn::Linear::load(m, q + ".adaln_linear", c, 6 * c, false);
        a.q = nn::Linear::load(m, q + ".self_attn.q_proj", c, c, false);
        a.k = nn::Linear::load(m, q + ".self_attn.k_proj", c, c, false);
        a.v = nn::Linear::load(m, q + ".self_attn.v_proj", c, c, false);
        a.o = nn::Linear::load(m, q + ".self_attn.o_proj", c, c, false);
        a.gate = nn::Linear::load(m, q + ".self_attn.gate_proj", c, c, false);
        const Tensor gu = m.get_f32(q + ".mlp.gate_up_proj.weight", {2 * F, c});
        a.mlp_gate = nn::Linear::from_rows(gu, 0, F);
        a.mlp_up = nn::Linear::from_rows(gu, F, 2 * F);
        a.mlp_down = nn::Linear::load(m, q + ".mlp.down_proj", F, c, false);
        s.layers.push_back(std::move(a));
    }
    return s;
}

Tensor embed_atoms(const AtomStack& s, const AtomFeatures& f, int64_t elements,
                   int64_t char_vocab) {
    const int64_t A = f.atoms, D = 5 + elements + 4 * char_vocab;
    BI_CHECK(s.embed.w.defined() && s.embed.w.size(1) == D, kWhere,
             "atom features: the stack takes ", s.embed.w.defined() ? s.embed.w.size(1) : 0,
             " features, the layout makes ", D);
    std::vector<float> x(size_t(A * D), 0.f);
    // host-side: the reference features one-hot encoded once per target
    for (int64_t a = 0; a < f.real_atoms; ++a) {
        float* r = x.data() + a * D;
        for (int e = 0; e < 3; ++e) r[e] = f.ref_pos[size_t(a * 3 + e)];
        r[3] = f.ref_charge[size_t(a)];
        r[4] = 1.f;
        const int32_t el = f.ref_element[size_t(a)];
        BI_CHECK(el >= 0 && el < elements, kWhere, "atom ", a, ": element ", el, " out of range");
        r[5 + el] = 1.f;
        for (int k = 0; k < 4; ++k) {
            const int32_t ch = f.name_chars[size_t(a * 4 + k)];
            BI_CHECK(ch >= 0 && ch < char_vocab, kWhere, "atom ", a, ": name character ", ch,
                     " out of range");
            r[5 + elements + k * char_vocab + ch] = 1.f;
        }
    }
    // padding atoms: position and charge as given (zeros), mask 0, no one-hots
    for (int64_t a = f.real_atoms; a < A; ++a) {
        float* r = x.data() + a * D;
        for (int e = 0; e < 3; ++e) r[e] = f.ref_pos[size_t(a * 3 + e)];
        r[3] = f.ref_charge[size_t(a)];
    }
    const Tensor feats = Tensor::of(x, {A, D});
    Tensor h = Tensor::empty({A, s.cfg.hidden}), out = Tensor::empty({A, s.cfg.hidden});
    s.embed(feats, h);
    s.embed_norm(h, out);
    return out;
}

AtomContext atom_context(const AtomStack& s, const AtomFeatures& f, const Tensor& cond) {
    const AtomStackConfig& cfg = s.cfg;
    const int64_t A = f.atoms, c = cfg.hidden, H = cfg.heads, Dh = cfg.head_dim, half = Dh / 2;
    BI_CHECK(A % kBlock == 0 && f.real_atoms <= A, kWhere,
             "expected atoms padded to a multiple of ", kBlock, ", got ", A, " (", f.real_atoms,
             " real)");
    AtomContext ctx;
    ctx.atoms = A;
    ctx.real_atoms = f.real_atoms;
    ctx.tokens = f.tokens;
    ctx.cond = cond;

    // 3D rotary: inverse frequencies [spatial (x3), uid, zeros], positions [x, y, z each repeated
    // per spatial pair, uid for the rest]; angles in fp32 as transformers builds them
    std::vector<float> inv(size_t(half), 0.f);
    const int64_t P = cfg.spatial_pairs, U = cfg.uid_pairs;
    for (int64_t k = 0; k < P; ++k) {
        const float v = 1.0f / std::pow(float(cfg.spatial_base), float(k) / float(P));
        for (int64_t axis = 0; axis < 3; ++axis) inv[size_t(axis * P + k)] = v;
    }
    for (int64_t k = 0; k < U; ++k)
        inv[size_t(3 * P + k)] = 1.0f / std::pow(float(cfg.uid_base), float(k) / float(U));
    std::vector<float> cos_t(static_cast<size_t>(A * half)), sin_t(static_cast<size_t>(A * half));
    for (int64_t a = 0; a < A; ++a)
        for (int64_t d = 0; d < half; ++d) {
            const float pos =
                d < 3 * P ? f.ref_pos[size_t(a * 3 + d / P)] : float(f.space_uid[size_t(a)]);
            const float angle = pos * inv[size_t(d)];
            cos_t[size_t(a * half + d)] = std::cos(angle);
            sin_t[size_t(a * half + d)] = std::sin(angle);
        }
    ctx.cos = Tensor::of(cos_t, {A, half});
    ctx.sin = Tensor::of(sin_t, {A, half});

    // windows: block k's queries 32k .. 32k + 31 see keys 32k - half .. 32k + 31 + half
    const int64_t Wk = kBlock + 2 * s.half_window;
    ctx.windows = nn::AtomWindows::make(A, kBlock, Wk);
    const int64_t NW = ctx.windows.windows;
    const float masked = std::numeric_limits<float>::lowest();
    Tensor mask = Tensor::empty({NW, kBlock, Wk});
    // host-side: the window mask, made once per target
    for (int64_t k = 0; k < NW; ++k)
        for (int64_t r = 0; r < kBlock; ++r)
            for (int64_t h = 0; h < Wk; ++h) {
                const int64_t qa = k * kBlock + r, ka = k * kBlock - s.half_window + h;
                const bool ok = ka >= 0 && ka < f.real_atoms && std::abs(qa - ka) <= s.half_window;
                mask.f32()[(k * kBlock + r) * Wk + h] = ok ? 0.f : masked;
            }
    ctx.bias = Tensor::empty({NW, H, kBlock, Wk});
    ops::copy(mask.reshape({NW, 1, kBlock, Wk}).expand({NW, H, kBlock, Wk}), ctx.bias);

    // per-layer modulation adaln(silu(cond)), chunked shift, scale, gate, shift, scale, gate
    Tensor act = Tensor::empty({A, c});
    ops::activation(cond, Act::Sigmoid, act);
    ops::mul(cond, act, act);
    const Tensor ones = Tensor::of(std::vector<float>(size_t(A * c), 1.f), {A, c});
    for (const AtomLayer& l : s.layers) {
        Tensor mod = Tensor::empty({A, 6 * c});
        l.adaln(act, mod);
        const auto part = [&](int64_t i) {
            return ops::contiguous(mod.slice(1, i * c, (i + 1) * c));
        };
        AtomContext::Mod m{part(0), part(1), part(2), part(3), part(4), part(5)};
        ops::add(m.scale_a, ones, m.scale_a);
        ops::add(m.scale_f, ones, m.scale_f);
        ctx.mods.push_back(std::move(m));
    }

    // token averaging: the sum over a token's valid atoms, then 1 / count
    const int64_t N = f.tokens;
    ctx.token_sum = Tensor::zeros({N, A});
    std::vector<float> count(size_t(N), 0.f);
    // host-side: the atom-to-token table, made once per target
    for (int64_t a = 0; a < f.real_atoms; ++a) {
        const int32_t t = f.atom_to_token[size_t(a)];
        BI_CHECK(t >= 0 && t < N, kWhere, "atom ", a, " belongs to token ", t, " of ", N);
        ctx.token_sum.f32()[t * A + a] = 1.f;
        count[size_t(t)] += 1.f;
    }
    for (float& n : count) n = n > 0 ? 1.f / n : 0.f;
    ctx.inv_count = Tensor::of(count, {N});
    return ctx;
}

void run_atom_layers(const AtomStack& s, const AtomContext& ctx, Tensor& q) {
    const AtomStackConfig& cfg = s.cfg;
    const int64_t A = ctx.atoms, c = cfg.hidden, H = cfg.heads, Dh = cfg.head_dim;
    const int64_t R = q.size(0), S = R / A;
    BI_CHECK(R == S * A && q.size(1) == c, kWhere, "atom states ", shape_str(q.shape()),
             ": expected whole samples of (", A, ", ", c, ")");
    Tensor h = Tensor::empty({R, c}), qp = Tensor::empty({R, c}), kp = Tensor::empty({R, c}),
           vp = Tensor::empty({R, c}), gp = Tensor::empty({R, c}), att = Tensor::empty({R, c});
    for (size_t li = 0; li < s.layers.size(); ++li) {
        const AtomLayer& l = s.layers[li];
        const AtomContext::Mod& m = ctx.mods[li];
        // attention on RMSNorm(q) * (1 + scale) + shift
        ops::rms_norm(q, 1e-6f, h);
        modulate(h, m.scale_a, m.shift_a);
        l.q(h, qp);
        l.k(h, kp);
        l.v(h, vp);
        l.gate(h, gp, {.act = Act::Sigmoid});
        Tensor qh = qp.reshape({R * H, Dh}), kh = kp.reshape({R * H, Dh});
        ops::rms_norm(qh, 1e-6f, qh);
        ops::rms_norm(kh, 1e-6f, kh);
        Tensor q4 = qp.reshape({S, A, H, Dh}), k4 = kp.reshape({S, A, H, Dh});
        ops::rotary(q4, ctx.cos, ctx.sin);
        ops::rotary(k4, ctx.cos, ctx.sin);
        nn::window_attention(qp, kp, vp, ctx.bias, ctx.windows, H, att);
        ops::mul(att, gp, att);
        l.o(att, h);
        add_gated(m.gate_a, h, q);
        // SwiGLU on RMSNorm(q) * (1 + scale) + shift
        ops::rms_norm(q, 1e-6f, h);
        modulate(h, m.scale_f, m.shift_f);
        const int64_t F = l.mlp_up.out_features();
        Tensor g = Tensor::empty({R, F}), u = Tensor::empty({R, F});
        l.mlp_gate(h, g);
        l.mlp_up(h, u);
        ops::swiglu(g, u, u);
        l.mlp_down(u, h);
        add_gated(m.gate_f, h, q);
    }
}

Tensor atoms_to_tokens(const AtomStack& s, const AtomContext& ctx, const Tensor& q) {
    const int64_t A = ctx.atoms, N = ctx.tokens, S = q.size(0) / A, D = s.cfg.output_dim;
    Tensor t = Tensor::empty({S * A, D});
    s.to_token(q, t, {.act = Act::Relu});
    Tensor out = Tensor::empty({S * N, D});
    for (int64_t si = 0; si < S; ++si) {
        Tensor o = out.narrow0(si * N, (si + 1) * N).reshape({1, N, D});
        ops::bmm(ctx.token_sum.reshape({1, N, A}),
                 t.narrow0(si * A, (si + 1) * A).reshape({1, A, D}), o);
        Tensor o2 = out.narrow0(si * N, (si + 1) * N);
        ops::scale_rows(o2, ctx.inv_count, o2);
    }
    return out;
}

}  // namespace bioinfer::esmfold2
