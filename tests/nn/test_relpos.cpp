// Direct tests of the relative-position encodings (src/nn/relpos), each loaded with its own loader:
// the chain-aware encoding against the reference's own output for Boltz-2 (every case, plus the
// reference's cyclic-chain and homomer variants) and ESMFold2 (both cases); ESMFold's
// RelativePosition, whose output alone no fixture holds, against upstream's class rule on the
// fixture's residue numbers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "boltz2_fixture.h"
#include "io/model_dir.h"
#include "nn/relpos.h"
#include "test_util.h"

using namespace bioinfer;

namespace {

using test::expect_fails_bar;

// The module bar (docs/parity.md): PCC >= 0.99999 and relative L2 <= 1e-5; the agreement is
// printed, one line per comparison.
void expect_module(const Tensor& got, const Tensor& ref, const std::string& what) {
    const test::Stats s = test::parity_stats(got, ref);
    std::printf("[ parity   ] %s: PCC %.9f, rel L2 %.2e, max-abs %.2e\n", what.c_str(), s.pcc,
                s.rel_l2, s.max_abs);
    test::expect_parity(got, ref, what);
}

// ESMFold's trunk adds this encoding to the recycled pair before its first block, and the first
// state the fixture records is that block's output: no reference tensor holds the encoding alone.
// Its classes are held to transformers' EsmFoldRelativePosition instead, diff = r_j - r_i clamped
// to [-bins, bins], plus bins + 1 (class 0 is the padding index, never a real pair's), on the
// fixture's own residue numbers: the dimer's second chain, offset by 512, reaches the clip.
TEST(NnRelpos, EsmFoldClassesFollowUpstreamRule) {
    const test::ParityFixture f = test::load_parity_fixture("esmfold_tiny");
    const io::ModelDir m = io::ModelDir::open(f.dir);
    const nlohmann::json& trunk = m.config().at("esmfold_config").at("trunk");
    const int64_t bins = trunk.at("position_bins"), c_z = trunk.at("pairwise_state_dim");
    const nn::RelativePosition rp =
        nn::RelativePosition::load(m, "trunk.pairwise_positional_embedding", bins, c_z);
    int64_t clipped = 0, inside = 0;
    for (const auto& c : f.cases) {
        const Tensor ri = f.get(c.id + ".residue_index");
        const std::vector<int64_t> r(ri.f32(), ri.f32() + ri.numel());
        const int64_t L = int64_t(r.size());
        const Tensor cls = rp.classes(r);
        ASSERT_EQ(shape_str(cls.shape()), shape_str(Shape{L, L})) << c.id;
        for (int64_t i = 0; i < L; ++i)
            for (int64_t j = 0; j < L; ++j) {
                const int64_t d = r[size_t(j)] - r[size_t(i)];
                const int32_t want = int32_t(std::clamp<int64_t>(d, -bins, bins) + bins + 1);
                ASSERT_EQ(cls.i32()[i * L + j], want) << c.id << " (" << i << ", " << j << ")";
                (std::abs(d) > bins ? clipped : inside) += 1;
            }
    }
    // the fixture reaches both sides of the clip
    EXPECT_GT(clipped, 0);
    EXPECT_GT(inside, 0);
}

// ---- Boltz-2 ----

nn::ChainRelativePosition boltz2_relpos() {
    const boltz2::Config& cfg = test::boltz2_config();
    return nn::ChainRelativePosition::load(
        test::boltz2_weights(), "rel_pos.linear_layer", cfg.token_z,
        cfg.fix_sym_check ? nn::ChainRelativePosition::ChainBucket::DifferentEntity
                          : nn::ChainRelativePosition::ChainBucket::SameChain,
        cfg.cyclic_pos_enc);
}

nn::ChainRelativePosition::Tokens tokens_of(const boltz2::Features& f) {
    nn::ChainRelativePosition::Tokens t;
    t.asym_id = f.at("asym_id");
    t.residue_index = f.at("residue_index");
    t.entity_id = f.at("entity_id");
    t.token_index = f.at("token_index");
    t.sym_id = f.at("sym_id");
    if (f.has("cyclic_period")) t.cyclic_period = f.at("cyclic_period");
    return t;
}

class NnRelposBoltz2 : public ::testing::TestWithParam<std::string> {};

TEST_P(NnRelposBoltz2, MatchesReference) {
    const test::Boltz2Case c = test::load_boltz2_case(GetParam());
    expect_module(boltz2_relpos()(tokens_of(c.feats)), c.get0("trunk.relpos"),
                  GetParam() + " relpos");
}

// The reference's relpos on variants of the case's features: the first chain cyclic with its
// length as period, and every chain one entity with sym_id = asym_id (a homomer).
TEST_P(NnRelposBoltz2, CyclicAndHomomerVariantsMatchReference) {
    const test::Boltz2Case c = test::load_boltz2_case(GetParam());
    const nn::ChainRelativePosition rp = boltz2_relpos();
    nn::ChainRelativePosition::Tokens cyc = tokens_of(c.feats);
    cyc.cyclic_period = c.get0("trunk.variant.cyclic_period");
    expect_module(rp(cyc), c.get0("trunk.variant.relpos_cyclic"),
                  GetParam() + " relpos, cyclic chain");
    nn::ChainRelativePosition::Tokens homo = tokens_of(c.feats);
    homo.entity_id = c.get0("trunk.variant.entity_id");
    homo.sym_id = c.get0("trunk.variant.sym_id");
    expect_module(rp(homo), c.get0("trunk.variant.relpos_homomer"),
                  GetParam() + " relpos, homomer");
}

INSTANTIATE_TEST_SUITE_P(Cases, NnRelposBoltz2, ::testing::ValuesIn(test::boltz2_cases()));

// ---- ESMFold2 ----

// The chain bucket fires within a chain (ESMFold2's rule), bins from config.json, on the
// reference's token features; Boltz-2's rule (across entities) on the same features must miss.
TEST(NnRelpos, EsmFold2MatchesReference) {
    const test::ParityFixture f = test::load_parity_fixture("esmfold2_tiny");
    const io::ModelDir m = io::ModelDir::open(f.dir);
    const nlohmann::json& cfg = m.config();
    const nn::ChainRelativePosition rp = nn::ChainRelativePosition::load(
        m, "input_embedder.rel_pos.embed", cfg.at("pairwise_hidden_size").get<int64_t>(),
        nn::ChainRelativePosition::ChainBucket::SameChain, /*cyclic=*/false,
        cfg.at("num_relative_residx_bins").get<int64_t>(),
        cfg.at("num_relative_chain_bins").get<int64_t>());
    ASSERT_FALSE(f.cases.empty());
    for (const auto& c : f.cases) {
        const auto g = [&](const std::string& k) { return f.get(c.id + ".feat." + k); };
        nn::ChainRelativePosition::Tokens t;
        t.asym_id = g("asym_id");
        t.residue_index = g("residue_index");
        t.entity_id = g("entity_id");
        t.token_index = g("token_index");
        t.sym_id = g("sym_id");
        const Tensor ref = f.get(c.id + ".embed.relpos");
        expect_module(rp(t), ref, c.id + " relpos");
        nn::ChainRelativePosition wrong = rp;
        wrong.chain_bucket = nn::ChainRelativePosition::ChainBucket::DifferentEntity;
        expect_fails_bar(wrong(t), ref, c.id + " relpos with Boltz-2's chain bucket");
    }
}

}  // namespace
