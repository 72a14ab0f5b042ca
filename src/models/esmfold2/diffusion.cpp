// ESMFold2's denoiser: see diffusion.h.
#include "models/esmfold2/diffusion.h"

#include <cmath>

#include "bioinfer/error.h"
#include "nn/triangle.h"
#include "ops/ops.h"

namespace bioinfer::esmfold2 {
namespace {

// EsmFold2AdaptiveLayerNorm as nn::AdaLn: sigmoid(gate_proj(LN_w(s))) * LN(a) +
// shift_proj(LN_w(s)).
nn::AdaLn adaln(const io::ModelDir& m, const std::string& p, int64_t d) {
    nn::AdaLn a;
    a.a_norm =
        nn::LayerNorm::from(Tensor::of(std::vector<float>(size_t(d), 1.0f)), Tensor(), 1e-5f);
    a.s_norm = nn::LayerNorm::load(m, p + ".cond_norm", d, 1e-5f, false);
    a.s_scale = nn::Linear::load(m, p + ".gate_proj", d, d);
    a.s_bias = nn::Linear::load(m, p + ".shift_proj", d, d, false);
    return a;
}

}  // namespace

DiffusionModule DiffusionModule::load(const io::ModelDir& m, const Config& cfg) {
    DiffusionModule d;
    d.cfg = cfg;
    const auto& dc = cfg.diffusion;
    const int64_t C = cfg.c_z, D = dc.hidden, ca = cfg.diff_atom.hidden;
    const std::string h = "structure_head", c = h + ".conditioning";
    d.encoder =
        AtomStack::load(m, h + ".atom_encoder", cfg.diff_atom, cfg.window, cfg.atom_features, true);
    d.decoder = AtomStack::load(m, h + ".atom_decoder", cfg.diff_atom, cfg.window,
                                cfg.atom_features, false);
    d.pair_in_norm = nn::LayerNorm::load(m, c + ".pair_input_norm", 2 * C, 1e-5f);
    d.pair_proj = nn::Linear::load(m, c + ".pair_proj", 2 * C, C, false);
    d.pair_tr0 = nn::ResidueMlp::load(m, c + ".pair_transition_0", C, dc.pair_intermediate,
                                      nn::ResidueMlpNames::esmfold2());
    d.pair_tr1 = nn::ResidueMlp::load(m, c + ".pair_transition_1", C, dc.pair_intermediate,
                                      nn::ResidueMlpNames::esmfold2());
    d.single_in_norm = nn::LayerNorm::load(m, c + ".single_input_norm", cfg.c_inputs, 1e-5f);
    d.single_proj = nn::Linear::load(m, c + ".single_proj", cfg.c_inputs, D, false);
    const Tensor fw = m.get_f32(c + ".fourier.frequencies", {dc.fourier});
    const Tensor fb = m.get_f32(c + ".fourier.phases", {dc.fourier});
    // host-side: the Fourier embedding's fixed frequencies and phases, read once at load
    d.fourier_w.assign(fw.f32(), fw.f32() + dc.fourier);
    d.fourier_b.assign(fb.f32(), fb.f32() + dc.fourier);
    d.noise_norm = nn::LayerNorm::load(m, c + ".noise_norm", dc.fourier, 1e-5f);
    d.noise_proj = nn::Linear::load(m, c + ".noise_proj", dc.fourier, D, false);
    d.single_tr0 = nn::ResidueMlp::load(m, c + ".single_transition_0", D, dc.intermediate,
                                        nn::ResidueMlpNames::esmfold2());
    d.single_tr1 = nn::ResidueMlp::load(m, c + ".single_transition_1", D, dc.intermediate,
                                        nn::ResidueMlpNames::esmfold2());
    const Tensor cw = m.get_f32(h + ".coords_linear.weight", {ca, 6});
    d.coords_linear = nn::Linear::from(ops::contiguous(cw.slice(1, 0, 3)), Tensor());
    d.single_to_token = nn::Linear::load(m, h + ".single_to_token", D, D, false);
    d.single_step_norm = nn::LayerNorm::load(m, h + ".single_step_norm", D, 1e-5f);
    d.token_norm = nn::LayerNorm::load(m, h + ".token_norm", D, 1e-5f);
    d.tokens.dim = D;
    d.tokens.heads = dc.heads;
    nn::GatedBiasedAttentionNames an;
    an.proj.clear();
    an.q = "q_proj", an.k = "k_proj", an.v = "v_proj", an.g = "gate_proj", an.o = "o_proj";
    an.q_bias = true;
    an.g_o_bias = false;
    for (int64_t i = 0; i < dc.layers; ++i) {
        const std::string p = h + ".token_transformer.layers." + std::to_string(i);
        nn::DitLayer l;
        l.heads = dc.heads;
        l.adaln = adaln(m, p + ".input_layernorm", D);
        l.attn = nn::GatedBiasedAttention::load(m, p + ".self_attn", D, dc.head_dim, an);
        l.out_proj = nn::Linear::load(m, p + ".attn_gate", D, D);
        l.transition.adaln = adaln(m, p + ".post_attention_layernorm", D);
        const Tensor gu = m.get_f32(p + ".mlp.gate_up_proj.weight", {2 * dc.intermediate, D});
        l.transition.gate = nn::Linear::from_rows(gu, 0, dc.intermediate);
        l.transition.up = nn::Linear::from_rows(gu, dc.intermediate, 2 * dc.intermediate);
        l.transition.b_to_a = nn::Linear::load(m, p + ".mlp.down_proj", dc.intermediate, D, false);
        l.transition.out_proj = nn::Linear::load(m, p + ".mlp_gate", D, D);
        d.tokens.layers.push_back(std::move(l));
        d.bias_norms.push_back(nn::LayerNorm::load(m, p + ".pair_norm", C, 1e-5f));
        d.bias_projs.push_back(nn::Linear::load(m, p + ".pair_bias_proj", C, dc.heads, false));
    }
    d.token_to_atom = nn::Linear::load(m, h + ".atom_decoder.token_to_atom_linear", D, ca, false);
    d.out_norm = nn::LayerNorm::load(m, h + ".atom_decoder.norm", ca, 1e-5f);
    d.out_linear = nn::Linear::load(m, h + ".atom_decoder.output_linear", ca, 3, false);
    return d;
}

DiffusionModule::Conditioning DiffusionModule::prepare(const Inputs& in,
                                                       const TrunkOutput& trunk) const {
    Conditioning k;
    const int64_t N = in.tokens, C = cfg.c_z;
    k.tokens = N;
    k.atoms = in.atoms.atoms;
    k.embeds = embed_atoms(encoder, in.atoms, cfg.elements, cfg.char_vocab);
    k.enc = atom_context(encoder, in.atoms, k.embeds);
    k.dec = atom_context(decoder, in.atoms, k.embeds);
    // pair half: LN(cat(z_trunk, relpos)) -> proj -> two transitions
    Tensor cat = Tensor::empty({N * N, 2 * C});
    Tensor c0 = cat.slice(1, 0, C), c1 = cat.slice(1, C, 2 * C);
    ops::copy(trunk.pair.reshape({N * N, C}), c0);
    ops::copy(trunk.relpos.reshape({N * N, C}), c1);
    layer_norm_in_place(cat);
    k.pair = Tensor::empty({N, N, C});
    Tensor p2 = k.pair.reshape({N * N, C});
    pair_proj(cat, p2);
    pair_tr0.add_to(p2);
    pair_tr1.add_to(p2);
    std::vector<Tensor> biases;
    for (size_t l = 0; l < bias_projs.size(); ++l)
        biases.push_back(nn::pair_bias(k.pair, bias_norms[l], bias_projs[l], 0, false));
    k.bias =
        tokens.prepare_layers(std::move(biases), Tensor::of(std::vector<float>(size_t(N), 1.f)));
    Tensor sn = Tensor::empty({N, cfg.c_inputs});
    single_in_norm(trunk.s_inputs, sn);
    k.single_proj = Tensor::empty({N, cfg.diffusion.hidden});
    single_proj(sn, k.single_proj);
    std::vector<int32_t> at(in.atoms.atom_to_token.begin(), in.atoms.atom_to_token.end());
    for (int64_t a = in.atoms.real_atoms; a < k.atoms; ++a) at[size_t(a)] = 0;
    k.atom_token = Tensor::of(at, {k.atoms});
    return k;
}

void DiffusionModule::layer_norm_in_place(Tensor& x) const {
    Tensor y = Tensor::empty(x.shape());
    pair_in_norm(x, y);
    x = y;
}

Tensor DiffusionModule::denoise(const Conditioning& k, const Tensor& x_noisy, float sigma,
                                const Tap& tap) const {
    const auto& dc = cfg.diffusion;
    const int64_t N = k.tokens, A = k.atoms, S = x_noisy.size(0), D = dc.hidden;
    const int64_t ca = cfg.diff_atom.hidden, F = dc.fourier;
    BI_CHECK(x_noisy.shape() == (Shape{S, A, 3}), "esmfold2 denoiser", "coordinates ",
             shape_str(x_noisy.shape()), ": expected (S, ", A, ", 3)");
    const auto emit = [&](const std::string& name, const Tensor& t) {
        if (tap) tap(name, t);
    };
    const float sd = float(dc.sigma_data);
    // single conditioning: s_proj + noise_proj(LN(cos(2 pi (c_noise w + b)))), two transitions
    const float c_noise = 0.25f * std::log(std::max(sigma / sd, 1e-20f));
    std::vector<float> four(static_cast<size_t>(F));
    const float two_pi = float(2.0 * M_PI);
    for (int64_t i = 0; i < F; ++i)
        four[size_t(i)] =
            std::cos(two_pi * (c_noise * fourier_w[size_t(i)] + fourier_b[size_t(i)]));
    Tensor fn = Tensor::empty({1, F}), ne = Tensor::empty({1, D});
    noise_norm(Tensor::of(four, {1, F}), fn);
    noise_proj(fn, ne);
    Tensor single = Tensor::empty({N, D});
    ops::add(k.single_proj, ne.expand({N, D}), single);
    single_tr0.add_to(single);
    single_tr1.add_to(single);
    Tensor single_s = Tensor::empty({S * N, D});
    Tensor single_s3 = single_s.reshape({S, N, D});
    ops::copy(single.reshape({1, N, D}).expand({S, N, D}), single_s3);
    emit("diff.call.single", single_s.reshape({S, N, D}));

    // atom encoder on the scaled coordinates
    Tensor r = x_noisy.to_f32().clone();
    ops::scale(r, 1.0f / std::sqrt(sigma * sigma + sd * sd), r);
    Tensor q = Tensor::empty({S * A, ca});
    coords_linear(r.reshape({S * A, 3}), q);
    for (int64_t s = 0; s < S; ++s) {
        Tensor qs = q.narrow0(s * A, (s + 1) * A);
        ops::add(qs, k.embeds, qs);
    }
    run_atom_layers(encoder, k.enc, q);
    Tensor a = atoms_to_tokens(encoder, k.enc, q);
    emit("diff.call.atom_tokens", a.reshape({S, N, D}));
    Tensor sn = Tensor::empty({S * N, D});
    single_step_norm(single_s, sn);
    single_to_token(sn, a, {.accumulate = true});
    a = tokens.forward(a, single_s, k.bias);
    emit("diff.call.tokens", a.reshape({S, N, D}));
    Tensor an = Tensor::empty({S * N, D});
    token_norm(a, an);

    // atom decoder: q + the tokens' projection at each atom, layers, LN, 3 coordinates
    Tensor ta = Tensor::empty({S * N, ca});
    token_to_atom(an, ta);
    ops::embedding(nn::stacked_rows(k.atom_token, S, N), ta, q, /*accumulate=*/true);
    run_atom_layers(decoder, k.dec, q);
    Tensor qn = Tensor::empty({S * A, ca}), upd = Tensor::empty({S * A, 3});
    out_norm(q, qn);
    out_linear(qn, upd);
    emit("diff.call.update", upd.reshape({S, A, 3}));

    // EDM output: c_skip x + c_out update
    const float t2 = sigma * sigma, sd2 = sd * sd;
    Tensor den = x_noisy.to_f32().clone().reshape({S * A, 3});
    ops::scale(den, sd2 / (sd2 + t2), den);
    ops::axpy((sd * sigma) / std::sqrt(sd2 + t2), upd, den);
    return den.reshape({S, A, 3});
}

nn::SamplerParams sampler_params(const Config& cfg, int64_t steps, int64_t samples,
                                 int64_t max_parallel_samples) {
    const auto& s = cfg.sampler;
    nn::SamplerParams p;
    p.steps = steps > 0 ? steps : s.num_steps;
    p.samples = samples;
    p.max_parallel_samples = max_parallel_samples;
    p.sigma_min = s.sigma_min_ratio;
    p.sigma_max = s.sigma_max_ratio;
    p.sigma_data = cfg.diffusion.sigma_data;
    p.rho = s.exponent;
    p.gamma_0 = s.gamma_0;
    p.gamma_min = s.gamma_min;
    p.noise_scale = s.noise_scale;
    p.step_scale = s.step_scale;
    p.alignment_reverse_diff = true;
    p.masked_centering = true;
    p.sigma_cap = s.capped ? s.sigma_cap : 0;
    return p;
}

}  // namespace bioinfer::esmfold2
