// Boltz-2's score model and EDM preconditioning: see diffusion.h.
#include "models/boltz2/diffusion.h"

#include <cmath>
#include <numbers>

#include "bioinfer/error.h"
#include "ops/ops.h"

namespace bioinfer::boltz2 {

namespace {
int64_t rows_of(const Tensor& t) { return t.numel() / t.size(-1); }
}  // namespace

SingleConditioning SingleConditioning::load(const io::ModelDir& m, const std::string& p,
                                            int64_t token_s, int64_t dim_fourier,
                                            int64_t num_transitions) {
    SingleConditioning s;
    const int64_t D = 2 * token_s;
    s.norm_single = nn::LayerNorm::load(m, p + ".norm_single", D, 1e-5f);
    s.single_embed = nn::Linear::load(m, p + ".single_embed", D, D);
    const Tensor w = m.get_f32(p + ".fourier_embed.proj.weight", {dim_fourier, 1}).to_f32();
    const Tensor b = m.get_f32(p + ".fourier_embed.proj.bias", {dim_fourier}).to_f32();
    // host-side: F scalars kept for the per-step Fourier features
    s.fourier_w.assign(w.f32(), w.f32() + dim_fourier);
    // host-side: as above
    s.fourier_b.assign(b.f32(), b.f32() + dim_fourier);
    s.norm_fourier = nn::LayerNorm::load(m, p + ".norm_fourier", dim_fourier, 1e-5f);
    s.fourier_to_single = nn::Linear::load(m, p + ".fourier_to_single", dim_fourier, D, false);
    for (int64_t i = 0; i < num_transitions; ++i)
        s.transitions.push_back(
            nn::ResidueMlp::load(m, p + ".transitions." + std::to_string(i), D, 2 * D,
                                 nn::ResidueMlpNames::boltz2()));
    return s;
}

Tensor SingleConditioning::embed_single(const Tensor& s_trunk, const Tensor& s_inputs) const {
    const int64_t N = rows_of(s_trunk), ts = s_trunk.size(-1), D = 2 * ts;
    BI_CHECK(rows_of(s_inputs) == N && s_inputs.size(-1) == ts &&
                 single_embed.out_features() == D,
             "boltz2::SingleConditioning", "s_trunk ", shape_str(s_trunk.shape()),
             " and s_inputs ", shape_str(s_inputs.shape()), ": expected two (N, ",
             single_embed.out_features() / 2, ")");
    Tensor cat = Tensor::empty({N, D});
    Tensor lo = cat.slice(1, 0, ts), hi = cat.slice(1, ts, D);
    ops::copy(s_trunk.reshape({N, ts}), lo);
    ops::copy(s_inputs.reshape({N, ts}), hi);
    Tensor n = Tensor::empty({N, D}), out = Tensor::empty({N, D});
    norm_single(cat, n);
    single_embed(n, out);
    return out;
}

Tensor SingleConditioning::forward(const std::vector<float>& times, const Tensor& emb,
                                   Tensor* normed_fourier) const {
    const int64_t S = int64_t(times.size()), F = int64_t(fourier_w.size()), N = emb.size(0),
                  D = emb.size(1);
    // host-side: S x F Fourier features of the noise levels, cos(2 pi (w t + b)) in fp32 as the
    // reference computes them (the linear with one input is one multiply-add per feature)
    std::vector<float> fv(size_t(S * F));
    const float two_pi = float(2.0 * std::numbers::pi);
    for (int64_t i = 0; i < S; ++i)
        for (int64_t f = 0; f < F; ++f) {
            const float proj = times[size_t(i)] * fourier_w[size_t(f)] + fourier_b[size_t(f)];
            fv[size_t(i * F + f)] = float(std::cos(double(two_pi * proj)));
        }
    const Tensor four = Tensor::of(fv, {S, F});
    Tensor fn = Tensor::empty({S, F}), f2s = Tensor::empty({S, 1, D});
    norm_fourier(four, fn);
    Tensor f2s2 = f2s.reshape({S, D});
    fourier_to_single(fn, f2s2);
    if (normed_fourier) *normed_fourier = fn;
    Tensor s = Tensor::empty({S, N, D});
    ops::copy(emb.reshape({1, N, D}).expand({S, N, D}), s);
    ops::add_into(f2s.expand({S, N, D}), s);
    Tensor rows = s.reshape({S * N, D});
    for (const auto& t : transitions) t.add_to(rows);
    return s;
}

Precondition Precondition::of(float sigma, float sigma_data) {
    // fp32 as boltz evaluates them on a float32 sigma tensor
    const float s2 = sigma * sigma, d2 = sigma_data * sigma_data;
    Precondition p;
    p.c_skip = d2 / (s2 + d2);
    p.c_out = sigma * sigma_data / std::sqrt(d2 + s2);
    p.c_in = 1.0f / std::sqrt(s2 + d2);
    p.c_noise = std::log(std::max(sigma / sigma_data, 1e-20f)) * 0.25f;
    return p;
}

DiffusionModule DiffusionModule::load(const io::ModelDir& m, const std::string& p,
                                      const Config& cfg) {
    DiffusionModule d;
    const int64_t D = 2 * cfg.token_s;
    d.single_conditioner = SingleConditioning::load(m, p + ".single_conditioner", cfg.token_s,
                                                    cfg.dim_fourier,
                                                    cfg.conditioning_transition_layers);
    d.s_to_a_norm = nn::LayerNorm::load(m, p + ".s_to_a_linear.0", D, 1e-5f);
    d.s_to_a = nn::Linear::load(m, p + ".s_to_a_linear.1", D, D, false);
    d.token_transformer = nn::DiffusionTransformer::load(m, p + ".token_transformer", D, D,
                                                         cfg.token_transformer_depth,
                                                         cfg.token_transformer_heads);
    d.a_norm = nn::LayerNorm::load(m, p + ".a_norm", D, 1e-5f);
    d.sigma_data = float(cfg.sigma_data);
    return d;
}

ScoreContext DiffusionModule::prepare(const Tensor& s_trunk, const Tensor& s_inputs,
                                      const Tensor& token_trans_bias,
                                      const Tensor& token_pad_mask) const {
    return {single_conditioner.embed_single(s_trunk, s_inputs),
            token_transformer.prepare(token_trans_bias, token_pad_mask)};
}

Tensor DiffusionModule::token_stage(const Tensor& a, const Tensor& s,
                                    const ScoreContext& ctx) const {
    const int64_t R = rows_of(a), D = a.size(-1);
    Tensor sn = Tensor::empty({R, D}), x = a.clone();
    s_to_a_norm(s.reshape({R, D}), sn);
    Tensor x2 = x.reshape({R, D});
    s_to_a(sn, x2, {.accumulate = true});
    Tensor y = token_transformer.forward(x, s, ctx.token_bias);
    Tensor out = Tensor::empty(a.shape());
    Tensor o2 = out.reshape({R, D});
    a_norm(y.reshape({R, D}), o2);
    return out;
}

Tensor DiffusionModule::denoise(const Tensor& x_noisy, float sigma, const ScoreContext& ctx,
                                const AtomStages& atoms,
                                const std::function<void(const std::string&, const Tensor&)>& tap) const {
    BI_CHECK(x_noisy.ndim() == 3 && x_noisy.size(2) == 3, "boltz2::DiffusionModule",
             "x_noisy: expected (S, A, 3), got ", shape_str(x_noisy.shape()));
    BI_CHECK(atoms.encode && atoms.decode, "boltz2::DiffusionModule",
             "the atom encoder and decoder stages are not set");
    const int64_t S = x_noisy.size(0);
    const Precondition pc = Precondition::of(sigma, sigma_data);
    Tensor fourier;
    const Tensor s = single_conditioner.forward(std::vector<float>(size_t(S), pc.c_noise),
                                                ctx.single_embedded, tap ? &fourier : nullptr);
    if (tap) {
        tap("single.s", s);
        tap("single.fourier", fourier);
    }
    Tensor r = Tensor::empty(x_noisy.shape());
    ops::scale(x_noisy, pc.c_in, r);
    if (tap) tap("r_noisy", r);
    Tensor q_skip;
    const Tensor a = atoms.encode(r, q_skip);
    if (tap) tap("enc.a", a);
    const Tensor an = token_stage(a, s, ctx);
    if (tap) tap("a_norm", an);
    const Tensor r_update = atoms.decode(an, q_skip);
    if (tap) tap("r_update", r_update);
    Tensor den = Tensor::empty(x_noisy.shape());
    ops::scale(x_noisy, pc.c_skip, den);
    ops::axpy(pc.c_out, r_update, den);
    return den;
}

nn::SamplerParams sampler_params(const Config& cfg, int64_t steps, int64_t samples,
                                 int64_t max_parallel_samples) {
    nn::SamplerParams p;
    p.steps = steps;
    p.samples = samples;
    p.max_parallel_samples = max_parallel_samples;
    p.sigma_min = cfg.sigma_min;
    p.sigma_max = cfg.sigma_max;
    p.sigma_data = cfg.sigma_data;
    p.rho = cfg.rho;
    p.gamma_0 = cfg.gamma_0;
    p.gamma_min = cfg.gamma_min;
    p.noise_scale = cfg.noise_scale;
    p.step_scale = cfg.step_scale;
    p.alignment_reverse_diff = cfg.alignment_reverse_diff;
    p.fk_particles = 1;
    p.fk_lambda = 4.0;
    p.fk_interval = 3;
    p.masked_centering = false;  // the mean of every atom, padding included
    p.sigma_cap = 0;
    return p;
}

}  // namespace bioinfer::boltz2
