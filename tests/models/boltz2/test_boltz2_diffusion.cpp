// Boltz-2's diffusion transformers, score model and sampler against the reference's dumps
// (tools/reference/boltz2_dump_diffusion.py): per module on every case, plus tests that a wrong
// gate half or mask fails the bar.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "boltz2_fixture.h"
#include "models/boltz2/config.h"
#include "models/boltz2/diffusion.h"
#include "models/boltz2/potentials.h"
#include "nn/dit.h"
#include "nn/edm_sampler.h"

namespace bioinfer::test {
namespace {

using nn::AtomTransformer;
using nn::DiffusionTransformer;

const std::string kScore = "structure_module.score_model";

// A transformer's output: its last layer's (the reference's "<tag>.layer<depth - 1>").
Tensor last_layer(const Boltz2Case& c, const std::string& tag, size_t depth) {
    return c.get("diffusion.call." + tag + ".layer" + std::to_string(depth - 1));
}

DiffusionTransformer token_transformer() {
    const auto& cfg = boltz2_config();
    return DiffusionTransformer::load(boltz2_weights(), kScore + ".token_transformer",
                                      2 * cfg.token_s, 2 * cfg.token_s,
                                      cfg.token_transformer_depth, cfg.token_transformer_heads);
}

AtomTransformer atom_transformer(bool decoder) {
    const auto& cfg = boltz2_config();
    const std::string p = decoder ? kScore + ".atom_attention_decoder.atom_decoder"
                                  : kScore + ".atom_attention_encoder.atom_encoder";
    return AtomTransformer::load(boltz2_weights(), p, cfg.atom_s,
                                 decoder ? cfg.atom_decoder_depth : cfg.atom_encoder_depth,
                                 decoder ? cfg.atom_decoder_heads : cfg.atom_encoder_heads,
                                 cfg.window_queries, cfg.window_keys);
}

TEST(Boltz2Dit, TokenTransformerMatchesReference) {
    const DiffusionTransformer tt = token_transformer();
    for (const auto& name : boltz2_cases()) {
        SCOPED_TRACE(name);
        const Boltz2Case c = load_boltz2_case(name);
        const Tensor a = c.get("diffusion.call.tok.in_a"), s = c.get("diffusion.call.single.s");
        const nn::DitBias bias =
            tt.prepare(c.get0("diffusion.cond.token_trans_bias"), c.feats.at("token_pad_mask"));
        const Tensor out = tt.forward(a, s, bias, [&](int l, const Tensor& x) {
            expect_parity(x, c.get("diffusion.call.tok.layer" + std::to_string(l)),
                          name + " token layer " + std::to_string(l));
        });
        expect_parity(out, last_layer(c, "tok", tt.layers.size()), name + " token transformer");
    }
}

TEST(Boltz2Dit, AtomTransformersMatchReference) {
    for (bool decoder : {false, true}) {
        const AtomTransformer at = atom_transformer(decoder);
        const std::string tag = decoder ? "dec" : "enc";
        for (const auto& name : boltz2_cases()) {
            SCOPED_TRACE(name + " " + tag);
            const Boltz2Case c = load_boltz2_case(name);
            const Tensor q = c.get("diffusion.call." + tag + ".in_q");
            const Tensor cc = c.get("diffusion.call.enc.in_c");  // the decoder's c is the same
            const boltz2::DiffusionConditioningOut cond = reference_conditioning(c);
            const nn::DitBias bias = at.prepare(
                decoder ? cond.atom_dec_bias : cond.atom_enc_bias, c.feats.at("atom_pad_mask"));
            const Tensor out = at.forward(q, cc, bias, [&](int l, const Tensor& x) {
                expect_parity(x, c.get("diffusion.call." + tag + ".layer" + std::to_string(l)),
                              name + " " + tag + " layer " + std::to_string(l));
            });
            expect_parity(out, last_layer(c, tag, at.dit.layers.size()), name + " " + tag);
            // The conditioning c is the same for every sample: given once, it gives the same.
            const Tensor c_one = c.get0("diffusion.cond.c");
            if (!decoder) expect_parity(at.forward(q, c_one, bias), out, name + " shared c");
            // Its layer terms made once (as a sampler run does) and shared by every sample.
            nn::DitBias conditioned = bias;
            at.condition(conditioned, c_one);
            expect_parity(at.forward(q, Tensor(), conditioned), out, name + " terms of c made once");
        }
    }
}

// The SwiGLU gate is the second half of swish_gate: taking the first half instead fails the bar.
TEST(Boltz2Dit, WrongTransitionGateHalfFailsTheBar) {
    DiffusionTransformer tt = token_transformer();
    const Boltz2Case c = load_boltz2_case("monomer");
    const Tensor a = c.get("diffusion.call.tok.in_a"), s = c.get("diffusion.call.single.s");
    const Tensor bias = c.get0("diffusion.cond.token_trans_bias");
    for (auto& l : tt.layers) std::swap(l.transition.up, l.transition.gate);
    const Stats st = parity_stats(tt.forward(a, s, bias, c.feats.at("token_pad_mask")),
                                  last_layer(c, "tok", tt.layers.size()));
    EXPECT_FALSE(within_bar(st)) << "PCC " << st.pcc << " rel L2 " << st.rel_l2;
}

// Padded atoms are masked as keys: attending to them fails the bar (every case has padding).
TEST(Boltz2Dit, UnmaskedPaddedAtomsFailTheBar) {
    const AtomTransformer at = atom_transformer(false);
    for (const auto& name : boltz2_cases()) {
        const Boltz2Case c = load_boltz2_case(name);
        const Tensor mask = c.feats.at("atom_pad_mask");
        const Tensor all = Tensor::of(std::vector<float>(size_t(mask.numel()), 1.0f));
        const Tensor out = at.forward(c.get("diffusion.call.enc.in_q"),
                                      c.get("diffusion.call.enc.in_c"),
                                      reference_conditioning(c).atom_enc_bias, all);
        const Stats st = parity_stats(out, last_layer(c, "enc", at.dit.layers.size()));
        EXPECT_FALSE(within_bar(st)) << name << ": PCC " << st.pcc << " rel L2 " << st.rel_l2;
    }
}


// A batch of samples gives what each sample gives alone (atom and token transformers).
TEST(Boltz2Dit, BatchedSamplesEqualOneAtATime) {
    const AtomTransformer at = atom_transformer(false);
    const DiffusionTransformer tt = token_transformer();
    const Boltz2Case c = load_boltz2_case("protein_rna");
    const Tensor q = c.get("diffusion.call.enc.in_q"), cc = c.get("diffusion.call.enc.in_c");
    const nn::DitBias ab =
        at.prepare(reference_conditioning(c).atom_enc_bias, c.feats.at("atom_pad_mask"));
    const Tensor both = at.forward(q, cc, ab);
    const Tensor a = c.get("diffusion.call.tok.in_a"), s = c.get("diffusion.call.single.s");
    const nn::DitBias tb =
        tt.prepare(c.get0("diffusion.cond.token_trans_bias"), c.feats.at("token_pad_mask"));
    const Tensor tboth = tt.forward(a, s, tb);
    for (int64_t i = 0; i < 2; ++i) {
        const Tensor one = at.forward(q.narrow0(i, i + 1), cc.narrow0(i, i + 1), ab);
        const Stats st = parity_stats(one, both.narrow0(i, i + 1));
        EXPECT_LE(st.max_abs, 1e-5) << "atom sample " << i;
        const Tensor tone = tt.forward(a.narrow0(i, i + 1), s.narrow0(i, i + 1), tb);
        const Stats ts = parity_stats(tone, tboth.narrow0(i, i + 1));
        EXPECT_LE(ts.max_abs, 1e-5) << "token sample " << i;
    }
}

boltz2::DiffusionModule score_module() {
    return boltz2::DiffusionModule::load(boltz2_weights(), kScore, boltz2_config());
}

boltz2::ScoreContext score_context(const boltz2::DiffusionModule& dm, const Boltz2Case& c) {
    return dm.prepare(c.get0("trunk.s"), c.get0("trunk.s_inputs"),
                      c.get0("diffusion.cond.token_trans_bias"), c.feats.at("token_pad_mask"));
}

TEST(Boltz2Diffusion, SingleConditioningMatchesReference) {
    const boltz2::DiffusionModule dm = score_module();
    for (const auto& name : boltz2_cases()) {
        const Boltz2Case c = load_boltz2_case(name);
        const boltz2::ScoreContext ctx = score_context(dm, c);
        const Tensor times = c.get("diffusion.call.times");
        // host-side (test): the reference's noise levels
        const std::vector<float> t(times.f32(), times.f32() + times.numel());
        Tensor fourier;
        const Tensor s = dm.single_conditioner.forward(t, ctx.single_embedded, &fourier);
        expect_parity(fourier, c.get("diffusion.call.single.fourier"), name + " fourier");
        expect_parity(s, c.get("diffusion.call.single.s"), name + " single conditioning");
    }
}

// One denoiser call: the preconditioning, the single conditioning and the token stage in
// between the atom encoder and decoder (given here by the reference's own outputs of those).
TEST(Boltz2Diffusion, DenoiserCallMatchesReference) {
    const boltz2::DiffusionModule dm = score_module();
    for (const auto& name : boltz2_cases()) {
        SCOPED_TRACE(name);
        const Boltz2Case c = load_boltz2_case(name);
        const boltz2::ScoreContext ctx = score_context(dm, c);
        const float sigma = c.get("diffusion.call.sigma").f32()[0];
        boltz2::AtomStages atoms;
        atoms.encode = [&](const Tensor& r, Tensor& q_skip) {
            expect_parity(r, c.get("diffusion.call.r_noisy"), name + " r_noisy");
            q_skip = last_layer(c, "enc", boltz2_config().atom_encoder_depth)
                         .reshape(c.get("diffusion.call.enc.in_q").shape());
            return c.get("diffusion.call.enc.a");
        };
        atoms.decode = [&](const Tensor& a, const Tensor&) {
            expect_parity(a, c.get("diffusion.call.a_norm"), name + " token stage (a_norm)");
            return c.get("diffusion.call.r_update");
        };
        const Tensor den = dm.denoise(c.get("diffusion.call.x_noisy"), sigma, ctx, atoms,
                                      [&](const std::string& k, const Tensor& t) {
                                          if (k == "single.s")
                                              expect_parity(t, c.get("diffusion.call.single.s"),
                                                            name + " single.s");
                                      });
        expect_parity(den, c.get("diffusion.call.denoised"), name + " denoised");
    }
}


nn::SamplerParams tiny_sampler(const Boltz2Case& c) {
    const int64_t steps = c.get("diffusion.sample.t_hat").numel(),
                  samples = c.get("diffusion.sample.x0_randn").size(0);
    return boltz2::sampler_params(boltz2_config(), steps, samples, samples);
}

// Runs the sampler on the reference's draws with a denoiser that returns the reference's
// denoised coordinates of each step; returns the final coordinates' error relative to the
// reference's coordinate spread (std).
// The case's forced constraints and templates as the model steers with them (none: no steering).
nn::Guidance case_guidance(const Boltz2Case& c, int64_t steps) {
    auto terms = std::make_shared<boltz2::SteeringTerms>(boltz2::SteeringTerms::from(c.feats));
    if (terms->empty()) return {};
    return [terms, steps](int64_t step, Tensor& den) {
        boltz2::apply_guidance(*terms, 1.0 - double(step) / double(steps), den);
    };
}

double replay_sampler(const Boltz2Case& c, const nn::SamplerParams& p, bool check_steps,
                      bool steer = true) {
    const Tensor ref_noisy = c.get("diffusion.sample.noisy"), ref_den = c.get("diffusion.sample.denoised"),
                 ref_aligned = c.get("diffusion.sample.aligned"), ref_t = c.get("diffusion.sample.t_hat");
    nn::ReplayNormal rng(reference_draws(c, p.steps));
    int64_t step = 0;
    const auto denoise = [&](const Tensor& x, float sigma) {
        EXPECT_NEAR(sigma, ref_t.f32()[step], 1e-5 * ref_t.f32()[step]) << "step " << step;
        if (check_steps) expect_parity(x, ref_noisy.narrow0(step, step + 1), "noisy step " + std::to_string(step));
        return ref_den.narrow0(step, step + 1).reshape(x.shape()).clone();
    };
    const Tensor out = nn::sample(denoise, c.feats.at("atom_pad_mask"), p, rng,
                                  [&](const nn::SamplerStep& s) {
                                      if (check_steps)
                                          expect_parity(s.aligned, ref_aligned.narrow0(s.index, s.index + 1),
                                                        "aligned step " + std::to_string(s.index));
                                      ++step;
                                  },
                                  steer ? case_guidance(c, p.steps) : nn::Guidance{});
    EXPECT_EQ(rng.used(), size_t(1 + 3 * p.steps));
    const Tensor ref = c.get("e2e.sample_atom_coords");  // the same run's final coordinates
    // host-side (test): spread and error of the coordinates
    const float* r = ref.f32();
    const float* g = out.f32();
    const int64_t n = ref.numel();
    double mean = 0, var = 0, err = 0;
    for (int64_t i = 0; i < n; ++i) mean += r[i];
    mean /= double(n);
    for (int64_t i = 0; i < n; ++i) {
        var += (r[i] - mean) * (r[i] - mean);
        err = std::max(err, std::abs(double(g[i]) - r[i]));
    }
    return err / std::sqrt(var / double(n));
}

TEST(Boltz2Sampler, ScheduleMatchesReference) {
    const Boltz2Case c = load_boltz2_case("monomer");
    const nn::SamplerParams p = tiny_sampler(c);
    const std::vector<float> s = nn::sample_schedule(p);
    ASSERT_EQ(int64_t(s.size()), p.steps + 1);
    EXPECT_EQ(s.back(), 0.0f);
    EXPECT_NEAR(s[0], 2560.0f, 1e-2);  // sigma_data * sigma_max
}

TEST(Boltz2Sampler, ReplayedRunMatchesReference) {
    for (const auto& name : boltz2_cases()) {
        SCOPED_TRACE(name);
        const Boltz2Case c = load_boltz2_case(name);
        const double rel = replay_sampler(c, tiny_sampler(c), true);
        EXPECT_LE(rel, 1e-3) << name << ": max error / coordinate std";
    }
}

// Forced pocket and contact constraints steer every step's denoised coordinates: the same run
// without the steering misses the reference's coordinates.
TEST(Boltz2Sampler, ForcedConstraintsSteerTheSampler) {
    const Boltz2Case c = load_boltz2_case("constrained");
    ASSERT_FALSE(boltz2::ContactTerms::from(c.feats).empty());
    EXPECT_LE(replay_sampler(c, tiny_sampler(c), false, true), 1e-3);
    EXPECT_GT(replay_sampler(c, tiny_sampler(c), false, false), 1e-2);
}

// Forced templates steer every step's denoised coordinates towards the aligned template CBs:
// the same run without the steering misses the reference's coordinates.
TEST(Boltz2Sampler, ForcedTemplatesSteerTheSampler) {
    const Boltz2Case c = load_boltz2_case("template");
    const boltz2::SteeringTerms terms = boltz2::SteeringTerms::from(c.feats);
    ASSERT_TRUE(terms.contacts.empty());
    ASSERT_EQ(terms.templates.ref.size(), 2u);
    EXPECT_LE(replay_sampler(c, tiny_sampler(c), false, true), 1e-3);
    EXPECT_GT(replay_sampler(c, tiny_sampler(c), false, false), 1e-2);
}

// The physical potentials of --use_potentials, on the reference's constraint features and seeded
// coordinates (fixture part `potentials`): every potential's energy and gradient at two steering
// times on every case, and the homomer and planar-bond potentials on feature variants.
TEST(Boltz2Potentials, EnergiesAndGradientsMatchReference) {
    const std::vector<std::pair<std::string, std::string>> names = {
        {"com", "SymmetricChainCOMPotential"},   {"vdw", "VDWOverlapPotential"},
        {"connections", "ConnectionsPotential"}, {"posebusters", "PoseBustersPotential"},
        {"chiral", "ChiralAtomPotential"},       {"stereo", "StereoBondPotential"},
        {"planar", "PlanarBondPotential"}};
    int nonzero = 0;
    const auto compare = [&](const Boltz2Case& c, const boltz2::PhysicalTerms& terms, double t,
                             const Tensor& x, const std::string& pre, const std::string& mine,
                             const std::string& ref) {
        const Tensor re = x.to_f32();
        const int64_t S = x.size(0), A = x.size(1);
        std::vector<float> grad(static_cast<size_t>(S * A * 3), 0.f);
        std::vector<float> energy(static_cast<size_t>(S), 0.f);
        for (int64_t s = 0; s < S; ++s)
            energy[size_t(s)] =
                float(terms.evaluate(mine, re.f32() + s * A * 3, t, grad.data() + s * A * 3));
        const Tensor want_e = c.get(pre + ref + ".energy");
        const Tensor want_g = c.get(pre + ref + ".gradient");
        for (int64_t s = 0; s < S; ++s) {
            const float w = want_e.f32()[s];
            EXPECT_NEAR(energy[size_t(s)], w, 1e-4 * std::max(1.0f, std::fabs(w)))
                << pre << ref << " sample " << s;
            nonzero += w != 0.f;
        }
        double scale = 0, err = 0;
        for (int64_t i = 0; i < S * A * 3; ++i) {
            scale = std::max(scale, double(std::fabs(want_g.f32()[i])));
            err = std::max(err, double(std::fabs(grad[size_t(i)] - want_g.f32()[i])));
        }
        EXPECT_LE(err, 1e-4 * std::max(1.0, scale)) << pre << ref << " gradient";
    };
    for (const auto& name : boltz2_cases()) {
        const Boltz2Case c = load_boltz2_case(name);
        const boltz2::Features& f = c.feats;
        const Tensor x = c.get("potentials.coords");
        for (const auto& [t, tag] : {std::pair{0.9, "t90"}, std::pair{0.3, "t30"}}) {
            const boltz2::PhysicalTerms terms = boltz2::PhysicalTerms::from(f);
            for (const auto& [mine, ref] : names)
                compare(c, terms, t, x, "potentials." + std::string(tag) + ".", mine, ref);
        }
        if (!c.has("potentials.variant.symmetric_chain_index")) continue;
        boltz2::Features v = f;
        v.set("symmetric_chain_index", c.get("potentials.variant.symmetric_chain_index"));
        v.set("planar_bond_index", c.get("potentials.variant.planar_bond_index"));
        const boltz2::PhysicalTerms terms = boltz2::PhysicalTerms::from(v);
        compare(c, terms, 0.3, x, "potentials.variant.", "com", "SymmetricChainCOMPotential");
        compare(c, terms, 0.3, x, "potentials.variant.", "planar", "PlanarBondPotential");
    }
    EXPECT_GT(nonzero, 40);  // the cases reach every potential
}

// --use_potentials: 3 particles per sample guided by every potential and resampled by their
// energies (fixture part `steering`, the reference's sampler with its draws recorded, its
// denoiser's outputs replayed): the resampling weights and the final coordinates match; the run
// without the physical potentials misses the reference.
double replay_steering(const Boltz2Case& c, bool physical, std::vector<std::vector<float>>* w) {
    const Tensor den = c.get("steering.denoised");
    const int64_t steps = den.size(0), S = den.size(1);
    std::vector<Tensor> draws = {c.get("steering.x0_randn")};
    for (int64_t k = 0; k < steps; ++k) {
        draws.push_back(c.get("steering.quat_randn").narrow0(k, k + 1).clone());
        draws.push_back(c.get("steering.trans_randn").narrow0(k, k + 1).clone());
        draws.push_back(c.get("steering.eps_randn").narrow0(k, k + 1).clone());
    }
    std::vector<Tensor> picks;
    while (c.has("steering.resample_draws" + std::to_string(picks.size())))
        picks.push_back(c.get("steering.resample_draws" + std::to_string(picks.size())));
    nn::ReplayNormal rng(draws, picks);
    nn::SamplerParams p = boltz2::sampler_params(boltz2_config(), steps, S, S);
    p.fk_particles = 3;
    const auto terms = boltz2::SteeringTerms::from(c.feats, physical);
    const auto t_of = [&](int64_t step) { return 1.0 - double(step) / double(steps); };
    int64_t step = 0;
    const Tensor out = nn::sample(
        [&](const Tensor& x, float) {
            return den.narrow0(step, step + 1).reshape(x.shape()).clone();
        },
        c.feats.at("atom_pad_mask"), p, rng, [&](const nn::SamplerStep&) { ++step; },
        [&](int64_t k, Tensor& d) { boltz2::apply_guidance(terms, t_of(k), d); },
        [&](int64_t k, const Tensor& d) { return boltz2::steering_energy(terms, t_of(k), d); });
    if (w) *w = rng.weights_seen();
    const Tensor ref = c.get("steering.coords");
    const float* r = ref.f32();
    const float* g = out.f32();
    EXPECT_EQ(out.shape(), ref.shape());
    double mean = 0, var = 0, err = 0;
    // host-side (test): spread and error of the coordinates
    for (int64_t i = 0; i < ref.numel(); ++i) mean += r[i];
    mean /= double(ref.numel());
    for (int64_t i = 0; i < ref.numel(); ++i) {
        var += (r[i] - mean) * (r[i] - mean);
        err = std::max(err, std::abs(double(g[i]) - r[i]));
    }
    return err / std::sqrt(var / double(ref.numel()));
}

TEST(Boltz2Sampler, PotentialSteeringMatchesReference) {
    for (const auto& name : boltz2_cases()) {
        const Boltz2Case c = load_boltz2_case(name);
        std::vector<std::vector<float>> weights;
        EXPECT_LE(replay_steering(c, true, &weights), 1e-3) << name;
        for (size_t k = 0; k < weights.size(); ++k) {
            const Tensor ref = c.get("steering.resample_weights" + std::to_string(k));
            ASSERT_EQ(int64_t(weights[k].size()), ref.numel()) << name;
            for (int64_t i = 0; i < ref.numel(); ++i)
                EXPECT_NEAR(weights[k][size_t(i)], ref.f32()[i], 1e-4)
                    << name << " resampling " << k;
        }
        EXPECT_GE(weights.size(), 2u) << name;  // the first step and the last
        if (name == "protein_ligand" || name == "constrained") {
            EXPECT_GT(replay_steering(c, false, nullptr), 1e-3) << name;  // off the bar
        }
    }
}

// Boltz-2 centers on the mean of all atoms, padding included. The network input is not
// translation-invariant, so the denoiser must see exactly the reference's noisy coordinates:
// centering on the masked mean instead fails the bar there.
TEST(Boltz2Sampler, MaskedCenteringFailsTheBar) {
    for (const auto& name : boltz2_cases()) {
        const Boltz2Case c = load_boltz2_case(name);
        nn::SamplerParams p = tiny_sampler(c);
        p.masked_centering = true;
        const Tensor ref_noisy = c.get("diffusion.sample.noisy"), ref_den = c.get("diffusion.sample.denoised");
        nn::ReplayNormal rng(reference_draws(c, p.steps));
        int64_t step = 0, failing = 0;
        nn::sample(
            [&](const Tensor& x, float) {
                if (!within_bar(parity_stats(x, ref_noisy.narrow0(step, step + 1)))) ++failing;
                const Tensor d = ref_den.narrow0(step, step + 1).reshape(x.shape()).clone();
                ++step;
                return d;
            },
            c.feats.at("atom_pad_mask"), p, rng);
        EXPECT_GT(failing, 0) << name;
    }
}

// Samples denoised in chunks of max_parallel_samples give what one batch gives.
TEST(Boltz2Sampler, ChunkedSamplesEqualOneBatch) {
    const Boltz2Case c = load_boltz2_case("heterodimer");
    const Tensor mask = c.feats.at("atom_pad_mask");
    // A per-sample denoiser: a contraction towards each sample's own first atom.
    const auto denoise = [](const Tensor& x, float sigma) {
        Tensor y = Tensor::empty(x.shape());
        ops::scale(x, 1.0f / (1.0f + 0.01f * sigma), y);
        return y;
    };
    nn::SamplerParams p = boltz2::sampler_params(boltz2_config(), 5, 3, 3);
    nn::SeededNormal r1(7), r2(7);
    const Tensor all = nn::sample(denoise, mask, p, r1);
    p.max_parallel_samples = 2;
    const Tensor chunked = nn::sample(denoise, mask, p, r2);
    EXPECT_EQ(parity_stats(all, chunked).max_abs, 0.0);
}

}  // namespace
}  // namespace bioinfer::test
