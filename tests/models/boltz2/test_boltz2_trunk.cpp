// Boltz-2 trunk against the reference's own forward (fixture part `trunk`,
// tools/reference/boltz2_dump_trunk.py), module by module on every case, plus checks that a wrong
// chain-bucket rule or OPM count placement fails the bar.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "boltz2_fixture.h"
#include "models/boltz2/trunk.h"
#include "nn/pairformer.h"
#include "ops/ops.h"

namespace bioinfer::test {
namespace {

using namespace boltz2;

#ifdef BIOINFER_FIXTURES

class Boltz2TrunkCase : public ::testing::TestWithParam<std::string> {};

TEST_P(Boltz2TrunkCase, PairInputsAndZInit) {
    const Boltz2Case c = load_boltz2_case(GetParam());
    const Trunk& t = boltz2_trunk();
    const Tensor s_inputs = c.get0("trunk.s_inputs");
    const Tensor rp = t.relpos(c.feats);
    expect_parity(rp, c.get0("trunk.relpos"), "relpos");
    expect_parity(t.pair_inputs.contact(c.feats), c.get0("trunk.contact_conditioning"),
                  "contact_conditioning");
    // z_init as the reference sums its pieces
    const int64_t L = s_inputs.size(0), C = boltz2_config().token_z;
    Tensor ref = Tensor::empty({L, L, C});
    ops::copy(c.get0("trunk.z_init_1").reshape({L, 1, C}).expand({L, L, C}), ref);
    ops::add_into(c.get0("trunk.z_init_2").reshape({1, L, C}).expand({L, L, C}), ref);
    for (const char* k : {"trunk.relpos", "trunk.token_bonds", "trunk.token_bonds_type",
                          "trunk.contact_conditioning"})
        ops::add_into(c.get0(k), ref);
    expect_parity(t.z_init(c.feats, s_inputs), ref, "z_init");
}

// Branches the cases leave unused: constrained pairs of every class, a cyclic chain, a homomer
// (one entity, several sym_ids), each against the reference modules on the same variant.
TEST_P(Boltz2TrunkCase, PairInputVariants) {
    const Boltz2Case c = load_boltz2_case(GetParam());
    const Trunk& t = boltz2_trunk();
    Features f = c.feats;
    f.set("contact_conditioning", c.get0("trunk.variant.contact_conditioning"));
    f.set("contact_threshold", c.get0("trunk.variant.contact_threshold"));
    expect_parity(t.pair_inputs.contact(f), c.get0("trunk.variant.contact_out"),
                  "contact conditioning, constrained pairs");
    Features fc = c.feats;
    fc.set("cyclic_period", c.get0("trunk.variant.cyclic_period"));
    expect_parity(t.relpos(fc), c.get0("trunk.variant.relpos_cyclic"), "relpos, cyclic chain");
    Features fh = c.feats;
    fh.set("entity_id", c.get0("trunk.variant.entity_id"));
    fh.set("sym_id", c.get0("trunk.variant.sym_id"));
    expect_parity(t.relpos(fh), c.get0("trunk.variant.relpos_homomer"), "relpos, homomer");
    // The variants reach new branches: their reference differs from the case's own.
    const Tensor base = c.get0("trunk.relpos");
    EXPECT_TRUE(fails_bar(base, c.get0("trunk.variant.relpos_cyclic")));
    if (GetParam() != "monomer") {
        EXPECT_TRUE(fails_bar(base, c.get0("trunk.variant.relpos_homomer")));
    }
}

TEST_P(Boltz2TrunkCase, MsaModule) {
    const Boltz2Case c = load_boltz2_case(GetParam());
    const Trunk& t = boltz2_trunk();
    const Tensor s_inputs = c.get0("trunk.s_inputs");
    const Tensor m0 = c.get0("trunk.pass0.msa.m0");
    expect_parity(t.msa.embed(c.feats, s_inputs), m0, "msa embedding");
    // The first layer's sub-modules, each from the reference's own input.
    const Tensor z = msa_module_input(c, 0);
    const MsaLayer& l0 = t.msa.layers[0];
    Tensor m = m0.clone();
    l0.pair_weighted_averaging.add_to(m, z);
    expect_parity(minus(m, m0), c.get0("trunk.pass0.msa.l0.pair_weighted_averaging.out"), "PWA");
    const Tensor m1 = plus(m0, c.get0("trunk.pass0.msa.l0.pair_weighted_averaging.out"));
    m = m1.clone();
    Tensor rows = m.reshape({m.size(0) * m.size(1), m.size(2)});
    l0.msa_transition.add_to(rows);
    expect_parity(minus(m, m1), c.get0("trunk.pass0.msa.l0.msa_transition.out"), "MSA transition");
    const Tensor m2 = plus(m1, c.get0("trunk.pass0.msa.l0.msa_transition.out"));
    Tensor zo = z.clone();
    l0.outer_product_mean.add_to(m2, zo);
    expect_parity(minus(zo, z), c.get0("trunk.pass0.msa.l0.outer_product_mean.out"), "OPM");
    // The whole module in each pass the reference ran (recycling), from the pass's z; every
    // layer of the config's msa_blocks in the first.
    const int passes = trunk_passes(c);
    ASSERT_GT(passes, 0);
    const int64_t blocks = test::boltz2_config().msa_blocks;
    ASSERT_EQ(int64_t(t.msa.layers.size()), blocks);
    for (int p = 0; p < passes; ++p) {
        const std::string pre = "trunk.pass" + std::to_string(p) + ".";
        Tensor zz = msa_module_input(c, p);
        std::map<std::string, Tensor> seen;
        t.msa.run(zz, s_inputs, c.feats,
                  [&](const std::string& n, const Tensor& v) { seen[n] = v.clone(); });
        expect_parity(zz, c.get0(pre + "msa_out"), pre + "msa_out");
        if (p == 0)
            for (int64_t k = 0; k < blocks; ++k)
                for (const char* x : {".z", ".m"}) {
                    const std::string n = "msa.layer" + std::to_string(k) + x;
                    expect_parity(seen.at(n), c.get0(pre + n), pre + n);
                }
    }
}

TEST_P(Boltz2TrunkCase, PairformerBlocks) {
    const Boltz2Case c = load_boltz2_case(GetParam());
    const Trunk& t = boltz2_trunk();
    // The first block's sub-modules in the first pass, each from the reference's own input.
    {
        const nn::PairformerLayer& b0 = t.pairformer.layers[0];
        const std::string pre = "trunk.pass0.pf.b0.";
        Tensor z = plus(msa_module_input(c, 0), c.get0("trunk.pass0.msa_out"));
        const auto step = [&](const char* name, const std::function<void(Tensor&)>& f) {
            Tensor zz = z.clone();
            f(zz);
            expect_parity(minus(zz, z), c.get0(pre + name + ".out"), name);
            z = plus(z, c.get0(pre + name + ".out"));
        };
        step("tri_mul_out", [&](Tensor& x) { b0.pair.tri_mul_out.add_to(x); });
        step("tri_mul_in", [&](Tensor& x) { b0.pair.tri_mul_in.add_to(x); });
        step("tri_att_start", [&](Tensor& x) { b0.pair.tri_att_start.add_to(x); });
        step("tri_att_end", [&](Tensor& x) { b0.pair.tri_att_end.add_to(x); });
        step("transition_z", [&](Tensor& x) {
            Tensor r = x.reshape({x.size(0) * x.size(1), x.size(2)});
            b0.pair.transition_z.add_to(r);
        });
        const Tensor s = c.get0("trunk.pass0.s");
        Tensor sn = Tensor::empty(s.shape());
        b0.pre_norm_s(s, sn);
        expect_parity(b0.attention_update(sn, z), c.get0(pre + "attention.out"), "attention");
        const Tensor s1 = plus(s, c.get0(pre + "attention.out"));
        Tensor s2 = s1.clone();
        b0.transition_s.add_to(s2);
        expect_parity(minus(s2, s1), c.get0(pre + "transition_s.out"), "transition_s");
    }
    // Every block of the first and last pass from the previous block's reference output.
    for (int p : first_and_last_pass(c)) {
        const std::string pre = "trunk.pass" + std::to_string(p) + ".";
        Tensor s_in = c.get0(pre + "s");
        Tensor z_in = plus(msa_module_input(c, p), c.get0(pre + "msa_out"));
        for (size_t k = 0; k < t.pairformer.layers.size(); ++k) {
            const std::string b = pre + "pf.block" + std::to_string(k);
            Tensor s = s_in.clone(), z = z_in.clone();
            t.pairformer.layers[k].run(s, z);
            expect_parity(s, c.get0(b + ".s"), b + ".s");
            expect_parity(z, c.get0(b + ".z"), b + ".z");
            s_in = c.get0(b + ".s");
            z_in = c.get0(b + ".z");
        }
    }
}

TEST_P(Boltz2TrunkCase, HeadsOnReferenceTrunk) {
    const Boltz2Case c = load_boltz2_case(GetParam());
    const Trunk& t = boltz2_trunk();
    const Tensor z = c.get0("trunk.z"), s = c.get0("trunk.s");
    expect_parity(t.distogram(z), c.get0("trunk.pdistogram"), "distogram");
    Tensor b = Tensor::empty({s.size(0), t.bfactor.out_features()});
    t.bfactor(s, b);
    expect_parity(b, c.get0("trunk.pbfactor"), "bfactor");
}

TEST_P(Boltz2TrunkCase, WholeTrunk) {
    const Boltz2Case c = load_boltz2_case(GetParam());
    const Trunk& t = boltz2_trunk();
    std::map<std::string, Tensor> seen;
    const int passes = trunk_passes(c);
    ASSERT_GT(passes, 0);
    const TrunkOutput out = t.run(c.feats, c.get0("trunk.s_inputs"), passes - 1,
                                  [&](const std::string& n, const Tensor& v) { seen[n] = v.clone(); });
    expect_parity(seen.at("s_init"), c.get0("trunk.s_init"), "s_init");
    for (int p = 0; p < passes; ++p) {
        const std::string pre = "pass" + std::to_string(p) + ".";
        for (const char* n : {"s", "z", "msa_out"})
            expect_parity(seen.at(pre + n), c.get0("trunk." + pre + n), pre + n);
    }
    for (int p : first_and_last_pass(c)) {  // every pairformer block's s and z
        for (size_t k = 0; k < t.pairformer.layers.size(); ++k) {
            const std::string b = "pass" + std::to_string(p) + ".pf.block" + std::to_string(k);
            for (const char* n : {".s", ".z"})
                expect_parity(seen.at(b + n), c.get0("trunk." + b + n), b + n);
        }
    }
    expect_parity(out.relpos, c.get0("trunk.relpos"), "relpos");
    expect_parity(out.s, c.get0("trunk.s"), "trunk s");
    expect_parity(out.z, c.get0("trunk.z"), "trunk z");
    expect_parity(out.pdistogram, c.get0("trunk.pdistogram"), "pdistogram");
    expect_parity(out.pbfactor, c.get0("trunk.pbfactor"), "pbfactor");
}

// ESMFold2's chain bucket rule (bucket 5 within a chain) instead of Boltz-2's (bucket 5 across
// entities) must fail the bar on every case: a single chain gets class 2, not 5.
TEST_P(Boltz2TrunkCase, WrongChainBucketFailsTheBar) {
    const Boltz2Case c = load_boltz2_case(GetParam());
    nn::ChainRelativePosition wrong = boltz2_trunk().pair_inputs.rel_pos;
    wrong.chain_bucket = nn::ChainRelativePosition::ChainBucket::SameChain;
    EXPECT_TRUE(fails_bar(wrong(relpos_tokens(c.feats)), c.get0("trunk.relpos")));
}

INSTANTIATE_TEST_SUITE_P(Cases, Boltz2TrunkCase, ::testing::ValuesIn(boltz2_cases()));

// The OPM count applied after the output linear (its bias divided too, ESMFold2's form) must fail
// the bar where the MSA has more than one row (the monomer's has 4).
TEST(Boltz2Trunk, OpmCountAfterProjectionFailsTheBar) {
    const Boltz2Case c = load_boltz2_case("monomer");
    nn::OuterProductMean opm = boltz2_trunk().msa.layers[0].outer_product_mean;
    const Tensor m = plus(plus(c.get0("trunk.pass0.msa.m0"),
                               c.get0("trunk.pass0.msa.l0.pair_weighted_averaging.out")),
                          c.get0("trunk.pass0.msa.l0.msa_transition.out"));
    const Tensor z = c.get0("trunk.pass0.z"), ref = c.get0("trunk.pass0.msa.l0.outer_product_mean.out");
    Tensor good = z.clone(), bad = z.clone();
    opm.add_to(m, good);
    opm.divide_before_projection = false;
    opm.add_to(m, bad);
    EXPECT_FALSE(fails_bar(minus(good, z), ref));
    EXPECT_TRUE(fails_bar(minus(bad, z), ref));
}

// f with only the given MSA rows of its per-row features, in that order.
Features with_msa_rows(const Features& f, const std::vector<int64_t>& rows) {
    Features out = f;
    for (const char* name : {"msa", "has_deletion", "deletion_value", "msa_paired", "msa_mask"}) {
        const Tensor t = f.at(name).to_f32();
        const int64_t L = t.size(1);
        std::vector<float> v;
        for (int64_t r : rows) v.insert(v.end(), t.f32() + r * L, t.f32() + (r + 1) * L);
        out.set(name, Tensor::of(v, {int64_t(rows.size()), L}));
    }
    return out;
}

// boltz's --subsample_msa: each pass's MSA module runs on the rows msa_subsample_rows draws for
// that pass, exactly as the module on those rows given explicitly; the draws are the seed's (the
// same seed the same trunk, another seed another); subsampling to fewer rows than the MSA has
// changes the result, keeping at least every row only reorders them (a change of rounding).
TEST(Boltz2Trunk, MsaSubsamplingRunsTheDrawnRows) {
    const Boltz2Case c = load_boltz2_case("monomer");
    const Trunk& t = boltz2_trunk();
    const Tensor s_inputs = c.get0("trunk.s_inputs");
    const int64_t S = c.feats.num_msa_rows();
    ASSERT_EQ(S, 4);
    // the draws: distinct rows of the MSA, the same for a seed and pass, fresh for each pass
    const std::vector<int64_t> rows = msa_subsample_rows(S, 2, 7, 0);
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_NE(rows[0], rows[1]);
    for (int64_t r : rows) EXPECT_TRUE(r >= 0 && r < S) << r;
    EXPECT_EQ(msa_subsample_rows(S, 2, 7, 0), rows);
    std::set<std::vector<int64_t>> draws;
    for (int pass = 0; pass < 8; ++pass) draws.insert(msa_subsample_rows(S, 2, 7, pass));
    EXPECT_GT(draws.size(), 1u);
    std::vector<int64_t> all = msa_subsample_rows(S, 1024, 7, 0);
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all, (std::vector<int64_t>{0, 1, 2, 3}));

    const auto run = [&](const MsaSubsample& sub, std::map<std::string, Tensor>& seen) {
        return t.run(c.feats, s_inputs, /*recycling_steps=*/1,
                     [&](const std::string& n, const Tensor& v) { seen[n] = v.clone(); }, {}, sub);
    };
    std::map<std::string, Tensor> seen, plain, again, other, every;
    const TrunkOutput out = run({2, 7}, seen);
    for (int p = 0; p < 2; ++p) {
        SCOPED_TRACE(p);
        const std::string pre = "pass" + std::to_string(p) + ".";
        Tensor z = seen.at(pre + "z").clone();  // no templates: the MSA module's input
        t.msa.run(z, s_inputs, with_msa_rows(c.feats, msa_subsample_rows(S, 2, 7, p)));
        EXPECT_EQ(max_diff(z, seen.at(pre + "msa_out")), 0.0);
    }
    run({}, plain);
    expect_fails_bar(seen.at("pass0.msa_out"), plain.at("pass0.msa_out"), "2 of 4 MSA rows");
    EXPECT_EQ(max_diff(run({2, 7}, again).z, out.z), 0.0);
    // seed 8 draws other rows for the first pass: another trunk
    std::vector<int64_t> a = msa_subsample_rows(S, 2, 7, 0), b = msa_subsample_rows(S, 2, 8, 0);
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    ASSERT_NE(a, b);
    EXPECT_GT(max_diff(run({2, 8}, other).z, out.z), 1e-3);
    // every row kept (boltz's 1024 on a 4-row MSA): the rows reordered, the same result
    run({1024, 7}, every);
    for (const char* n : {"pass0.msa_out", "pass1.msa_out"})
        expect_parity(every.at(n), plain.at(n), n);
}

#endif  // BIOINFER_FIXTURES

}  // namespace
}  // namespace bioinfer::test
