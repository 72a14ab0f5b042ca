// Boltz-2's inference forward: see boltz2.h.
#include "models/boltz2/boltz2.h"
#include "models/boltz2/potentials.h"

#include <algorithm>
#include <cmath>

#include "io/boltz_outputs.h"
#include "ops/ops.h"

namespace bioinfer::boltz2 {

std::unique_ptr<Boltz2Model> Boltz2Model::load(const io::ModelDir& m) {
    auto b = std::make_unique<Boltz2Model>();
    b->cfg_ = Config::load(m);
    const Config& c = b->cfg_;
    b->embedder_ = InputEmbedder::load(m, c);
    b->trunk_ = Trunk::load(m, c);
    b->conditioning_ = DiffusionConditioning::load(m, c);
    b->score_ = DiffusionModule::load(m, "structure_module.score_model", c);
    b->encoder_ = AtomAttentionEncoder::load(m, "structure_module.score_model.atom_attention_encoder",
                                             c, /*structure_prediction=*/true, c.atom_encoder_depth,
                                             c.atom_encoder_heads);
    b->decoder_ = AtomAttentionDecoder::load(m, "structure_module.score_model.atom_attention_decoder", c);
    b->has_confidence_ = c.confidence_prediction;
    if (b->has_confidence_) b->confidence_ = ConfidenceModule::load(m, c);
    for (const char* name : {"affinity_module1", "affinity_module2", "affinity_module"})
        if (m.has(std::string(name) + ".z_linear.weight"))
            b->affinity_.push_back(AffinityModule::load(m, name, c.token_s, c.token_z));
    BI_CHECK(b->affinity_.empty() || b->has_confidence_, "boltz2",
             "an affinity checkpoint needs the confidence module (it picks the sample by ipTM)");
    // Stored and not used at inference: the template module (no templates are taken yet; without
    // templates its output is exactly zero).
    m.check_consumed({"template_module.*"}, "boltz2");
    return b;
}

RunOutput Boltz2Model::run(const Features& f, const RunOptions& o) const {
    BI_CHECK(o.recycling_steps >= 0, "boltz2", "recycling_steps must be >= 0, got ", o.recycling_steps);
    BI_CHECK(o.sampling_steps >= 1, "boltz2", "sampling_steps must be >= 1, got ", o.sampling_steps);
    BI_CHECK(o.diffusion_samples >= 1, "boltz2", "diffusion_samples must be >= 1, got ",
             o.diffusion_samples);
    const auto progress = [&](const std::string& stage, int step, int steps) {
        if (o.progress) o.progress(stage, step, steps);
    };
    const auto tap = [&](const std::string& name, const Tensor& t) {
        if (o.tap) o.tap(name, t);
    };
    RunOutput out;
    progress("input embedder", 0, 0);
    out.s_inputs = embedder_.forward(f);
    tap("s_inputs", out.s_inputs);

    out.trunk = trunk_.run(
        f, out.s_inputs, o.recycling_steps,
        [&](const std::string& name, const Tensor& t) { tap("trunk." + name, t); },
        [&](int pass, int passes) { progress("trunk pass", pass, passes); }, o.msa_subsample);

    progress("diffusion conditioning", 0, 0);
    // Memory: every pair-sized tensor the sampler does not read is released as soon as its last
    // reader is done, and the token transformer's biases are made per layer in their final layout
    // (no (N, N, depth * heads) tensor beside them).
    DiffusionConditioningOut cond = conditioning_.forward(out.trunk.s, out.trunk.z, out.trunk.relpos,
                                                          f, /*token_bias=*/false);
    out.trunk.relpos = Tensor();
    nn::DitBias enc_bias = encoder_.prepare(cond.atom_enc_bias, cond.layout);
    nn::DitBias dec_bias = decoder_.prepare(cond.atom_dec_bias, cond.layout);
    // The atom transformers' conditioning c is the same in every step: its terms once per run.
    encoder_.transformer.condition(enc_bias, cond.c);
    decoder_.transformer.condition(dec_bias, cond.c);
    cond.atom_enc_bias = cond.atom_dec_bias = Tensor();
    const ScoreContext ctx{
        score_.single_conditioner.embed_single(out.trunk.s, out.s_inputs),
        score_.token_transformer.prepare_layers(conditioning_.token_bias_layers(cond.z),
                                                f.at("token_pad_mask"))};
    cond.z = Tensor();
    AtomStages atoms;
    Tensor c_skip;  // (A, atom_s), the same for every sample and call
    atoms.encode = [&](const Tensor& r, Tensor& q_skip) {
        AtomAttentionOut e = encoder_.forward(cond.layout, cond.q, cond.c, enc_bias, r);
        q_skip = e.q_skip;
        c_skip = e.c_skip;
        return e.a;
    };
    atoms.decode = [&](const Tensor& a, const Tensor& q_skip) {
        return decoder_.forward(cond.layout, a, q_skip, c_skip, dec_bias);
    };
    nn::SamplerParams p = sampler_params(cfg_, o.sampling_steps, o.diffusion_samples,
                                         std::max(1, o.max_parallel_samples));
    p.step_scale = o.step_scale;
    if (o.use_potentials) {  // boltz's BoltzSteeringParams: 3 particles, lambda 4, every 3 steps
        p.fk_particles = 3;
        p.samples *= p.fk_particles;
    }
    nn::SeededNormal seeded(o.seed);
    nn::NormalSource& rng = o.rng ? *o.rng : static_cast<nn::NormalSource&>(seeded);
    // Forced pocket and contact constraints and forced templates steer the denoised coordinates
    // (boltz's default contact guidance); without them nothing is added.
    const SteeringTerms steering =
        o.steering || o.use_potentials ? SteeringTerms::from(f, o.use_potentials) : SteeringTerms();
    const auto steering_t = [&](int64_t step) {
        return 1.0 - double(step) / double(o.sampling_steps);
    };
    nn::Guidance guide;
    if (!steering.empty())
        guide = [&](int64_t step, Tensor& den) { apply_guidance(steering, steering_t(step), den); };
    nn::SteeringEnergy energy;
    if (o.use_potentials)
        energy = [&](int64_t step, const Tensor& den) {
            return steering_energy(steering, steering_t(step), den);
        };
    out.coords = nn::sample(
        [&](const Tensor& x, float sigma) { return score_.denoise(x, sigma, ctx, atoms); },
        f.at("atom_pad_mask"), p, rng,
        [&](const nn::SamplerStep& s) { progress("diffusion step", int(s.index), o.sampling_steps); },
        guide, energy);
    tap("coords", out.coords);

    if (o.confidence && has_confidence_) {
        progress("confidence", 0, 0);
        out.confidence = confidence_.run(f, out.s_inputs, out.trunk.s, out.trunk.z, out.coords,
                                         out.trunk.pdistogram);
        out.has_confidence = true;
        const auto vec = [](const Tensor& t) {
            // host-side: per-sample scalars (S values) for the ranking score
            return std::vector<float>(t.f32(), t.f32() + t.numel());
        };
        const std::vector<float> score = io::boltz_confidence_scores(
            vec(out.confidence.complex_plddt), vec(out.confidence.iptm), vec(out.confidence.ptm));
        out.confidence_score.assign(score.begin(), score.end());
    }
    return out;
}

RunOptions affinity_run_options() {
    RunOptions o;
    o.recycling_steps = 5;
    o.sampling_steps = 200;
    o.diffusion_samples = 5;
    o.max_parallel_samples = 5;  // boltz passes 1, which its chunking turns into one batch of 5
    o.steering = false;
    return o;
}

AffinityResult Boltz2Model::predict_affinity(const Features& f, const RunOptions& opts,
                                             const double* mw) const {
    BI_CHECK(has_affinity(), "boltz2", "this checkpoint has no affinity module");
    for (const char* k : {"profile_affinity", "deletion_mean_affinity"})
        BI_CHECK(f.has(k), "boltz2", "affinity: the features have no ", k,
                 " (featurise with the affinity stage's options)");
    RunOptions o = opts;
    o.steering = false;
    o.confidence = true;
    AffinityResult r;
    r.run = run(f, o);
    // The sample with the highest ipTM; torch's descending argsort puts the lowest index first
    // among equal values.
    const Tensor& iptm = r.run.confidence.iptm;
    for (int64_t s = 1; s < iptm.numel(); ++s)
        // host-side: S per-sample scalars
        if (iptm.f32()[s] > iptm.f32()[r.best_sample]) r.best_sample = s;
    const auto progress = [&](const std::string& stage) {
        if (o.progress) o.progress(stage, 0, 0);
    };
    progress("affinity modules");
    // The input embedding again, with the first MSA row as the profile.
    Features fa = f;
    fa.set("profile", f.at("profile_affinity"));
    fa.set("deletion_mean", f.at("deletion_mean_affinity"));
    const Tensor s_aff = embedder_.forward(fa);
    if (o.tap) o.tap("affinity.s_inputs", s_aff);
    // The trunk's pair on binder-receptor and binder-binder pairs only.
    const Tensor& z = r.run.trunk.z;
    const int64_t N = z.shape()[0], C = z.shape()[2];
    Tensor z_aff = Tensor::empty({N * N, C});
    ops::scale_rows(z.reshape({N * N, C}), affinity_pair_mask(f).reshape({N * N}), z_aff);
    z_aff = z_aff.reshape({N, N, C});
    const Tensor coords = r.run.coords.narrow0(r.best_sample, r.best_sample + 1)
                              .reshape({r.run.coords.shape()[1], 3})
                              .clone();
    double value = 0, probability = 0;
    for (const AffinityModule& m : affinity_) {
        const AffinityOutput a = m.forward(s_aff, z_aff, coords, f);
        const double p = 1.0 / (1.0 + std::exp(-double(a.logit)));
        // boltz computes in fp32: the sigmoid and the means are fp32 values
        r.module_values.push_back(double(a.value));
        r.module_probabilities.push_back(double(float(p)));
        value += double(a.value);
        probability += double(float(p));
    }
    const double n = double(affinity_.size());
    r.value = double(float(value / n));
    r.probability = double(float(probability / n));
    if (mw) {
        // boltz's correction (with --affinity_mw_correction): the MW term in float64, the rest
        // fp32 as torch adds Python scalars to an fp32 tensor
        const float scaled = float(1.03525938) * float(r.value);
        r.value = double(scaled + float(-0.59992683 * std::pow(*mw, 0.3)) + float(2.83288489));
    }
    return r;
}

}  // namespace bioinfer::boltz2
