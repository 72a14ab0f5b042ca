// Boltz-2's atom-level modules against the reference (tools/reference/boltz2_dump_atoms.py): the
// input embedder's atom encoder (c, p), atom attention encoder and s_inputs; DiffusionConditioning
// (pairwise z, q, c, the per-layer biases); one diffusion-mode encoder and decoder call. Plus
// proofs that a wrong window rule or pair direction fails the bar.
#include <gtest/gtest.h>

#include <cstdio>

#include "boltz2_fixture.h"
#include "models/boltz2/atom_attention.h"
#include "models/boltz2/config.h"
#include "models/boltz2/embedder.h"
#include "nn/dit.h"
#include "nn/triangle.h"
#include "ops/ops.h"

using namespace bioinfer;
using namespace bioinfer::boltz2;
using bioinfer::test::Boltz2Case;
using bioinfer::test::boltz2_cases;
using bioinfer::test::boltz2_weights;
using bioinfer::test::expect_fails_bar;
using bioinfer::test::expect_parity;
using bioinfer::test::load_boltz2_case;

namespace {

const InputEmbedder& embedder() {
    static const InputEmbedder e = InputEmbedder::load(boltz2_weights(), test::boltz2_config());
    return e;
}

const DiffusionConditioning& conditioning() {
    static const DiffusionConditioning d = DiffusionConditioning::load(boltz2_weights(), test::boltz2_config());
    return d;
}

// The score model's atom encoder and decoder.
const AtomAttentionEncoder& score_encoder() {
    static const AtomAttentionEncoder e = AtomAttentionEncoder::load(
        boltz2_weights(), "structure_module.score_model.atom_attention_encoder", test::boltz2_config(), true,
        test::boltz2_config().atom_encoder_depth, test::boltz2_config().atom_encoder_heads);
    return e;
}

const AtomAttentionDecoder& score_decoder() {
    static const AtomAttentionDecoder d = AtomAttentionDecoder::load(
        boltz2_weights(), "structure_module.score_model.atom_attention_decoder", test::boltz2_config());
    return d;
}

// The case's atom layout, with the model's windows.
AtomLayout layout_of(const Boltz2Case& c) {
    const Config& cfg = test::boltz2_config();
    return AtomLayout::make(c.feats, cfg.window_queries, cfg.window_keys);
}

// The bar, with the numbers printed for the record.
void parity(const Tensor& got, const Tensor& ref, const std::string& what) {
    expect_parity(got, ref, what);
    const test::Stats s = test::parity_stats(got, ref);
    std::printf("[ parity   ] %s: PCC %.9f, rel L2 %.3g, max-abs %.3g\n", what.c_str(), s.pcc,
                s.rel_l2, s.max_abs);
}

class Boltz2Atoms : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(Boltz2Atoms, InputEmbedder) {
    const Boltz2Case c = load_boltz2_case(GetParam());
    InputEmbedder::Trace tr;
    const Tensor s = embedder().forward(c.feats, &tr);
    parity(tr.atoms.c, c.get("atoms.embedder.c"), c.name + " embedder atom c");
    parity(tr.atoms.q, c.get("atoms.embedder.c"), c.name + " embedder atom q (= c)");
    // p (K, window_queries, window_keys, atom_z) is not stored: it reaches a only through the attention's bias
    parity(tr.a, c.get("atoms.embedder.a"), c.name + " embedder atom attention a (from p)");
    parity(s, c.get0("trunk.s_inputs"), c.name + " s_inputs");
    EXPECT_EQ(s.shape(), (Shape{c.feats.num_tokens(), test::boltz2_config().token_s}));
}

TEST_P(Boltz2Atoms, DiffusionConditioning) {
    const Boltz2Case c = load_boltz2_case(GetParam());
    // on the reference's trunk outputs; the atom biases are checked through the encoder and
    // decoder they feed (DiffusionEncoderAndDecoder, test_boltz2_diffusion's atom transformers)
    const DiffusionConditioningOut o = conditioning().forward(
        c.get0("trunk.s"), c.get0("trunk.z"), c.get0("trunk.relpos"), c.feats);
    parity(o.z, c.get("atoms.cond.z"), c.name + " pairwise conditioning z");
    parity(o.q, c.get0("diffusion.cond.q"), c.name + " conditioning q");
    parity(o.c, c.get0("diffusion.cond.c"), c.name + " conditioning c");
    parity(o.token_trans_bias, c.get0("diffusion.cond.token_trans_bias"),
                  c.name + " token_trans_bias");
    const boltz2::Config& cfg = test::boltz2_config();
    const int64_t K = c.feats.num_atoms() / cfg.window_queries;
    EXPECT_EQ(o.atom_enc_bias.shape(), (Shape{K, cfg.window_queries, cfg.window_keys,
                                              cfg.atom_encoder_depth * cfg.atom_encoder_heads}));
}

// The per-layer head-major token biases Boltz2Model::run takes (made from the conditioning's z a
// block of rows at a time) against the reference's token_trans_bias in the same layout.
TEST_P(Boltz2Atoms, TokenBiasLayers) {
    const Boltz2Case c = load_boltz2_case(GetParam());
    const DiffusionConditioningOut o = conditioning().forward(
        c.get0("trunk.s"), c.get0("trunk.z"), c.get0("trunk.relpos"), c.feats, /*token_bias=*/false);
    EXPECT_FALSE(o.token_trans_bias.defined());
    const std::vector<Tensor> got = conditioning().token_bias_layers(o.z);
    const Config& cfg = test::boltz2_config();
    const nn::DiffusionTransformer tt = nn::DiffusionTransformer::load(
        boltz2_weights(), "structure_module.score_model.token_transformer", 2 * cfg.token_s,
        2 * cfg.token_s, cfg.token_transformer_depth, cfg.token_transformer_heads);
    const nn::DitBias ref = tt.prepare(c.get0("diffusion.cond.token_trans_bias"), c.feats.at("token_pad_mask"));
    const nn::DitBias mine = tt.prepare_layers(got, c.feats.at("token_pad_mask"));
    ASSERT_EQ(mine.layers.size(), ref.layers.size());
    EXPECT_EQ(mine.key_valid, ref.key_valid);
    for (size_t l = 0; l < ref.layers.size(); ++l)
        parity(mine.layers[l], ref.layers[l], c.name + " token bias layer " + std::to_string(l));
}

// Query and key swapped (the bias transposed) fails the bar.
TEST(Boltz2AtomsBar, TransposedTokenBiasFails) {
    const Boltz2Case c = load_boltz2_case("heterodimer");
    const DiffusionConditioningOut o = conditioning().forward(
        c.get0("trunk.s"), c.get0("trunk.z"), c.get0("trunk.relpos"), c.feats, /*token_bias=*/false);
    const PairBiasProjection& pz = conditioning().token_trans_proj_z;
    const Tensor bad = nn::pair_bias(o.z, pz.ln[0], pz.proj[0], 0, /*transposed=*/true);
    const Config& cfg = test::boltz2_config();
    const nn::DiffusionTransformer tt = nn::DiffusionTransformer::load(
        boltz2_weights(), "structure_module.score_model.token_transformer", 2 * cfg.token_s,
        2 * cfg.token_s, cfg.token_transformer_depth, cfg.token_transformer_heads);
    const nn::DitBias ref = tt.prepare(c.get0("diffusion.cond.token_trans_bias"), c.feats.at("token_pad_mask"));
    expect_fails_bar(bad, ref.layers[0], "token bias with query and key swapped");
}

TEST_P(Boltz2Atoms, DiffusionEncoderAndDecoder) {
    const Boltz2Case c = load_boltz2_case(GetParam());
    const AtomLayout lay = layout_of(c);
    const Tensor q = c.get0("diffusion.cond.q"), cc = c.get0("diffusion.cond.c");
    const DiffusionConditioningOut cond = test::reference_conditioning(c);
    const Tensor r = c.get("atoms.enc.r");  // (2, A, 3): two samples at once
    ASSERT_EQ(r.size(0), 2);
    const AtomAttentionOut e = score_encoder().forward(
        lay, q, cc, score_encoder().prepare(cond.atom_enc_bias, lay), r);
    parity(e.a, c.get("atoms.enc.a"), c.name + " diffusion encoder a");
    parity(e.q_skip, c.get("atoms.enc.q_skip"), c.name + " diffusion encoder q_skip");
    const Tensor c_skip = c.get("diffusion.call.enc.in_c");  // boltz repeats c per sample
    for (int64_t s = 0; s < 2; ++s)
        parity(e.c_skip, c_skip.narrow0(s, s + 1), c.name + " c_skip");

    // the decoder on the reference's own inputs
    const Tensor r_update = score_decoder().forward(
        lay, c.get("atoms.dec.a"), c.get("atoms.enc.q_skip"), cc,
        score_decoder().prepare(cond.atom_dec_bias, lay));
    parity(r_update, c.get("atoms.dec.r_update"), c.name + " decoder r_update");
    EXPECT_EQ(r_update.shape(), (Shape{2, c.feats.num_atoms(), 3}));
}

INSTANTIATE_TEST_SUITE_P(Cases, Boltz2Atoms, ::testing::ValuesIn(boltz2_cases()));

// The input embedder's atom attention output a of atom encoder outputs (p as its bias).
static Tensor embedder_a(const AtomLayout& lay, const AtomEncoderOut& atoms) {
    return embedder().atom_attention.forward(
        lay, atoms.q, atoms.c,
        embedder().atom_attention.prepare(embedder().atom_enc_proj_z(atoms.p), lay));
}

// The pair direction: d = keys - queries. Queries minus keys (the geometry's d negated) fails
// (p is not stored: its one consumer, the embedder's atom attention output a, is compared).
TEST(Boltz2AtomsBar, QueriesMinusKeysFails) {
    const Boltz2Case c = load_boltz2_case("monomer");
    const AtomEncoder& enc = embedder().atom_encoder;
    const AtomLayout lay = layout_of(c);
    const Tensor feats = AtomEncoder::atom_features(c.feats);
    Tensor geom = AtomEncoder::pair_geometry(c.feats, lay);
    const AtomEncoderOut good = enc.forward(feats, geom, lay, nullptr, nullptr);
    expect_parity(embedder_a(lay, good), c.get("atoms.embedder.a"), "a from the geometry");
    Tensor d = geom.reshape({geom.numel() / 5, 5}).slice(1, 0, 3);
    const Tensor neg = ops::contiguous(d);
    Tensor negd = Tensor::empty(neg.shape());
    ops::scale(neg, -1.0f, negd);
    ops::copy(negd, d);
    const AtomEncoderOut bad = enc.forward(feats, geom, lay, nullptr, nullptr);
    expect_fails_bar(embedder_a(lay, bad), c.get("atoms.embedder.a"), "a with queries minus keys");
}

// The window edge: keys past the first and last atoms are absent (zero, never valid). Windows
// whose out-of-range keys are clamped onto the edge atoms instead (in p and, through the same
// table, as attended keys) give an a off the bar.
TEST(Boltz2AtomsBar, UnmaskedWindowEdgeFails) {
    const Boltz2Case c = load_boltz2_case("monomer");
    AtomLayout lay = layout_of(c);
    Tensor keys = lay.key_atom.clone();
    int64_t clamped = 0;
    for (int64_t i = 0; i < keys.numel(); ++i)  // host-side test edit of the window table
        if (keys.i32()[i] < 0) {
            keys.i32()[i] = i % lay.window_k < lay.window_k / 2 ? 0 : int32_t(lay.atoms - 1);
            ++clamped;
        }
    ASSERT_GT(clamped, 0);
    lay.key_atom = keys;
    const AtomEncoderOut bad = embedder().atom_encoder.forward(c.feats, lay);
    expect_fails_bar(embedder_a(lay, bad), c.get("atoms.embedder.a"), "a with clamped edge keys");
    EXPECT_EQ(bad.c.shape(), c.get("atoms.embedder.c").shape());
    expect_parity(bad.c, c.get("atoms.embedder.c"), "c (no windows in it)");
}

// The mean aggregation divides by the atom count (+1e-6): a sum instead fails.
TEST(Boltz2AtomsBar, AtomSumInsteadOfMeanFails) {
    const Boltz2Case c = load_boltz2_case("heterodimer");
    AtomLayout lay = layout_of(c);
    Tensor m = lay.token_mean.clone();
    for (int64_t i = 0; i < m.numel(); ++i)  // host-side test edit: weights 1 instead of 1/count
        if (m.f32()[i] != 0.0f) m.f32()[i] = 1.0f;
    lay.token_mean = m;
    const AtomEncoderOut atoms = embedder().atom_encoder.forward(c.feats, lay);
    expect_fails_bar(embedder_a(lay, atoms), c.get("atoms.embedder.a"), "a as a sum over atoms");
}
