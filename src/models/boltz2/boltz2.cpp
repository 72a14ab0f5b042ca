// Boltz-2's inference forward: see boltz2.h.
#include "models/boltz2/boltz2.h"
#include "models/boltz2/potentials.h"

#include <algorithm>

#include "io/boltz_outputs.h"

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
    // Stored and not used at inference: the template module (no templates are taken yet; without
    // templates its output is exactly zero) and, in checkpoints that have them, the affinity heads.
    m.check_consumed({"template_module.*", "affinity_module*.*"}, "boltz2");
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
        [&](int pass, int passes) { progress("trunk pass", pass, passes); });

    progress("diffusion conditioning", 0, 0);
    // Memory: every pair-sized tensor the sampler does not read is released as soon as its last
    // reader is done, and the token transformer's biases are made per layer in their final layout
    // (no (N, N, depth * heads) tensor beside them).
    DiffusionConditioningOut cond = conditioning_.forward(out.trunk.s, out.trunk.z, out.trunk.relpos,
                                                          f, /*token_bias=*/false);
    out.trunk.relpos = Tensor();
    DitBias enc_bias = encoder_.prepare(cond.atom_enc_bias, cond.layout);
    DitBias dec_bias = decoder_.prepare(cond.atom_dec_bias, cond.layout);
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
    SamplerParams p = SamplerParams::from(cfg_, o.sampling_steps, o.diffusion_samples,
                                          std::max(1, o.max_parallel_samples));
    p.step_scale = o.step_scale;
    SeededNormal seeded(o.seed);
    NormalSource& rng = o.rng ? *o.rng : static_cast<NormalSource&>(seeded);
    // Forced pocket and contact constraints steer the denoised coordinates (boltz's default
    // contact guidance); without them nothing is added.
    const ContactTerms contacts = ContactTerms::from(f);
    Guidance guide;
    if (!contacts.empty())
        guide = [&](int64_t step, Tensor& den) {
            apply_contact_guidance(contacts, 1.0 - double(step) / double(o.sampling_steps), den);
        };
    out.coords = sample(
        [&](const Tensor& x, float sigma) { return score_.denoise(x, sigma, ctx, atoms); },
        f.at("atom_pad_mask"), p, rng,
        [&](const SamplerStep& s) { progress("diffusion step", int(s.index), o.sampling_steps); },
        guide);
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

}  // namespace bioinfer::boltz2
