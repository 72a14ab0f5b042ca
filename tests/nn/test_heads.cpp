// Direct parity of the structure heads (src/nn/heads), each loaded with its own loader and run on
// the reference's own input: ESMFold's distogram, pTM/PAE and pLDDT heads on the trunk pair and the
// structure module's last states (esmfold_tiny), and the summed-pair distogram of Boltz-2 (on the
// trunk's z) and ESMFold2 (on the decoded trunk pair).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "boltz2_fixture.h"
#include "io/model_dir.h"
#include "nn/heads.h"
#include "test_util.h"

using namespace bioinfer;

namespace {

using test::expect_fails_bar;

// The module bar (docs/parity.md: ESMFold's heads, every Boltz-2 and ESMFold2 module): PCC >=
// 0.99999 and relative L2 <= 1e-5; the agreement is printed, one line per comparison.
void expect_module(const Tensor& got, const Tensor& ref, const std::string& what) {
    const test::Stats s = test::parity_stats(got, ref);
    std::printf("[ parity   ] %s: PCC %.9f, rel L2 %.2e, max-abs %.2e\n", what.c_str(), s.pcc,
                s.rel_l2, s.max_abs);
    test::expect_parity(got, ref, what);
}

struct EsmFold {
    test::ParityFixture f = test::load_parity_fixture("esmfold_tiny");
    io::ModelDir m = io::ModelDir::open(f.dir);
    const nlohmann::json& cfg() const { return m.config().at("esmfold_config"); }
    int64_t c_z() const { return cfg().at("trunk").at("pairwise_state_dim"); }
};

// ESMFold's distogram head, (W z_ij + W z_ji) / 2 + b, on the reference's final pair state s_z.
// Boltz-2's form on the same input must miss: the sum_pairs switch is seen.
TEST(NnHeads, EsmFoldDistogramOnReferencePair) {
    const EsmFold e;
    int checked = 0;
    for (const auto& c : e.f.cases) {
        const std::string k = c.id + ".distogram_logits";
        if (!e.f.has(k)) continue;  // stored for one target
        const Tensor ref = e.f.get(k);
        const nn::DistogramHead h =
            nn::DistogramHead::load(e.m, "distogram_head", e.c_z(), ref.size(2));
        const Tensor z = e.f.get(c.id + ".s_z");
        expect_module(h(z), ref, c.id + " distogram");
        nn::DistogramHead summed = h;
        summed.sum_pairs = true;
        expect_fails_bar(summed(z), ref, c.id + " distogram as W (z + z^T) + b");
        ++checked;
    }
    EXPECT_GT(checked, 0) << "no distogram logits in the fixture";
}

// ESMFold's pTM head on s_z: the expected aligned error (PAE) at the module bar and pTM within
// 1e-4 (the ESMFold bar), on every target (the 14-residue one exercises TM-score's d0 floor of
// 19 residues).
TEST(NnHeads, EsmFoldAlignedErrorOnReferencePair) {
    const EsmFold e;
    const nn::AlignedErrorHead h = nn::AlignedErrorHead::load(e.m, "ptm_head", e.c_z());
    for (const auto& c : e.f.cases) {
        const nn::AlignedError ae = h(e.f.get(c.id + ".s_z"));
        expect_module(ae.pae, e.f.get(c.id + ".pae"), c.id + " pae");
        EXPECT_NEAR(ae.ptm, e.f.get(c.id + ".ptm").f32()[0], 1e-4) << c.id << " ptm";
    }
}

// ESMFold's lDDT head on the structure module's last block's states: pLDDT (0-1) per atom slot,
// within the ESMFold bar (max-abs 1e-3) and, being one module on the reference's input, the
// module bar too.
TEST(NnHeads, EsmFoldPlddtOnReferenceStates) {
    const EsmFold e;
    const nlohmann::json& sm = e.cfg().at("trunk").at("structure_module");
    const int64_t c_s = sm.at("sequence_dim"), blocks = sm.at("num_blocks"),
                  hidden = e.cfg().at("lddt_head_hid_dim");
    const int64_t atoms = e.f.get(e.f.cases[0].id + ".plddt").size(1);
    // bins per atom slot: the last layer's outputs over the slots
    const int64_t bins = e.m.get_raw("lddt_head.3.weight").size(0) / atoms;
    const nn::PlddtHead h = nn::PlddtHead::load(e.m, "lddt_head", c_s, hidden, atoms, bins);
    for (const auto& c : e.f.cases) {
        const Tensor states = e.f.get(c.id + ".states");  // (blocks, L, c_s)
        ASSERT_EQ(states.size(0), blocks) << c.id;
        const int64_t L = states.size(1);
        const Tensor last = states.narrow0(blocks - 1, blocks).reshape({L, c_s}).clone();
        const Tensor got = h(last), ref = e.f.get(c.id + ".plddt");
        test::compare(got, ref, 1e-3, 0, c.id + " plddt");
        expect_module(got, ref, c.id + " plddt");
    }
}

class NnHeadsBoltz2 : public ::testing::TestWithParam<std::string> {};

// Boltz-2's distogram, W (z_ij + z_ji) + b, on the reference trunk's z; ESMFold's halved form must
// miss.
TEST_P(NnHeadsBoltz2, DistogramOnReferenceTrunk) {
    const test::Boltz2Case c = test::load_boltz2_case(GetParam());
    const boltz2::Config& cfg = test::boltz2_config();
    const nn::DistogramHead h =
        nn::DistogramHead::load(test::boltz2_weights(), "distogram_module.distogram", cfg.token_z,
                                cfg.num_bins, /*sum_pairs=*/true);
    const Tensor z = c.get0("trunk.z"), ref = c.get0("trunk.pdistogram");
    expect_module(h(z), ref, GetParam() + " distogram");
    nn::DistogramHead halved = h;
    halved.sum_pairs = false;
    expect_fails_bar(halved(z), ref, GetParam() + " distogram as (W z + W z^T) / 2 + b");
}

INSTANTIATE_TEST_SUITE_P(Cases, NnHeadsBoltz2, ::testing::ValuesIn(test::boltz2_cases()));

// ESMFold2's distogram (the same summed form) on the reference's decoded trunk pair, both cases.
TEST(NnHeads, EsmFold2DistogramOnReferencePair) {
    const test::ParityFixture f = test::load_parity_fixture("esmfold2_tiny");
    const io::ModelDir m = io::ModelDir::open(f.dir);
    const int64_t c_z = m.config().at("pairwise_hidden_size"),
                  bins = m.config().at("structure_head").at("num_distogram_bins");
    const nn::DistogramHead h =
        nn::DistogramHead::load(m, "distogram_head", c_z, bins, /*sum_pairs=*/true);
    ASSERT_FALSE(f.cases.empty());
    for (const auto& c : f.cases)
        expect_module(h(f.get(c.id + ".trunk.pair")), f.get(c.id + ".trunk.distogram"),
                      c.id + " distogram");
}

}  // namespace
