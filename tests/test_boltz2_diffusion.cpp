// Boltz-2's diffusion transformers, score model and sampler against the reference's dumps
// (tools/reference/boltz2_dump_diffusion.py): per module on every case, plus tests that a wrong
// gate half or mask fails the bar.
#include <gtest/gtest.h>

#include <string>

#include "boltz2_fixture.h"
#include "models/boltz2/config.h"
#include "models/boltz2/dit.h"

namespace bioinfer::test {
namespace {

using boltz2::AtomTransformer;
using boltz2::DiffusionTransformer;

const std::string kScore = "structure_module.score_model";

const boltz2::Config& tiny_config() {
    static const boltz2::Config c = boltz2::Config::load(boltz2_weights());
    return c;
}

// The reference's tensor without its leading batch dim of 1, or as stored when it has none.
Tensor ref0(const Boltz2Case& c, const std::string& k) { return c.get0(k); }

Stats parity_stats(const Tensor& got, const Tensor& ref) {
    const Tensor g = got.to_f32(), r = ref.to_f32();
    return stats(g.f32(), r.f32(), g.numel());
}

bool within_bar(const Stats& s) { return s.pcc >= 0.99999 && s.rel_l2 <= 1e-5; }

DiffusionTransformer token_transformer() {
    const auto& cfg = tiny_config();
    return DiffusionTransformer::load(boltz2_weights(), kScore + ".token_transformer",
                                      2 * cfg.token_s, 2 * cfg.token_s,
                                      cfg.token_transformer_depth, cfg.token_transformer_heads);
}

AtomTransformer atom_transformer(bool decoder) {
    const auto& cfg = tiny_config();
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
        const Tensor a = c.get("diffusion.call.tok.in_a"), s = c.get("diffusion.call.tok.in_s");
        const boltz2::DitBias bias =
            tt.prepare(ref0(c, "diffusion.cond.token_trans_bias"), c.feats.at("token_pad_mask"));
        const Tensor out = tt.forward(a, s, bias, [&](int l, const Tensor& x) {
            expect_parity(x, c.get("diffusion.call.tok.layer" + std::to_string(l)),
                          name + " token layer " + std::to_string(l));
        });
        expect_parity(out, c.get("diffusion.call.tok.out"), name + " token transformer");
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
            const Tensor cc = c.get("diffusion.call." + tag + ".in_c");
            const std::string bname = decoder ? "atom_dec_bias" : "atom_enc_bias";
            const boltz2::DitBias bias =
                at.prepare(ref0(c, "diffusion.cond." + bname), c.feats.at("atom_pad_mask"));
            const Tensor out = at.forward(q, cc, bias, [&](int l, const Tensor& x) {
                expect_parity(x, c.get("diffusion.call." + tag + ".layer" + std::to_string(l)),
                              name + " " + tag + " layer " + std::to_string(l));
            });
            expect_parity(out, c.get("diffusion.call." + tag + ".out"), name + " " + tag);
            // The conditioning c is the same for every sample: given once, it gives the same.
            const Tensor c_one = c.get("diffusion.cond.c");
            if (!decoder) expect_parity(at.forward(q, c_one, bias), out, name + " shared c");
        }
    }
}

// The SwiGLU gate is the second half of swish_gate: taking the first half instead fails the bar.
TEST(Boltz2Dit, WrongTransitionGateHalfFailsTheBar) {
    DiffusionTransformer tt = token_transformer();
    const Boltz2Case c = load_boltz2_case("monomer");
    const Tensor a = c.get("diffusion.call.tok.in_a"), s = c.get("diffusion.call.tok.in_s");
    const Tensor bias = ref0(c, "diffusion.cond.token_trans_bias");
    for (auto& l : tt.layers) std::swap(l.transition.up, l.transition.gate);
    const Stats st = parity_stats(tt.forward(a, s, bias, c.feats.at("token_pad_mask")),
                                  c.get("diffusion.call.tok.out"));
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
                                      ref0(c, "diffusion.cond.atom_enc_bias"), all);
        const Stats st = parity_stats(out, c.get("diffusion.call.enc.out"));
        EXPECT_FALSE(within_bar(st)) << name << ": PCC " << st.pcc << " rel L2 " << st.rel_l2;
    }
}

}  // namespace
}  // namespace bioinfer::test
