// Direct parity of the MSA-side blocks (src/nn/msa_blocks): the pair-weighted average and the
// outer product mean of Boltz-2's first MSA layer, each loaded with its own loader and run on the
// reference's own inputs (fixture part `trunk`, tools/reference/boltz2_dump_trunk.py), every case.
// Head counts and widths come from the checkpoint's tensor shapes (boltz fixes them in code, not
// in its hyper-parameters), the MSA and pair widths from the checkpoint's hyper-parameters.
//
// ESMFold2's MSA encoder uses the same blocks under its own names (and the outer product mean's
// count divided after the projection), but its fixture records only the whole encoder's output
// (inside each loop's injection), not either block's input and output: those forms are not
// covered here.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "boltz2_fixture.h"
#include "nn/msa_blocks.h"
#include "ops/ops.h"

using namespace bioinfer;

namespace {

using test::Boltz2Case;
using test::minus;
using test::msa_module_input;
using test::plus;

// The module bar (docs/parity.md): PCC >= 0.99999 and relative L2 <= 1e-5; the agreement is
// printed, one line per comparison.
void expect_module(const Tensor& got, const Tensor& ref, const std::string& what) {
    const test::Stats s = test::parity_stats(got, ref);
    std::printf("[ parity   ] %s: PCC %.9f, rel L2 %.2e, max-abs %.2e\n", what.c_str(), s.pcc,
                s.rel_l2, s.max_abs);
    test::expect_parity(got, ref, what);
}

const std::string kLayer0 = "msa_module.layers.0";

class NnMsaBlocks : public ::testing::TestWithParam<std::string> {};

// m += PWA(m, z) on the first layer's input m (trunk.pass0.msa.m0) and the module's z: the update
// against the reference's pair_weighted_averaging output.
TEST_P(NnMsaBlocks, PairWeightedAveragingMatchesReference) {
    const Boltz2Case c = test::load_boltz2_case(GetParam());
    const io::ModelDir& w = test::boltz2_weights();
    const boltz2::Config& cfg = test::boltz2_config();
    const std::string p = kLayer0 + ".pair_weighted_averaging";
    const int64_t heads = w.get_raw(p + ".proj_z.weight").size(0),
                  head_dim = w.get_raw(p + ".proj_m.weight").size(0) / heads;
    const nn::PairWeightedAveraging pwa = nn::PairWeightedAveraging::load(
        w, p, cfg.msa_s, cfg.token_z, head_dim, heads, nn::PairWeightedAveragingNames::boltz2());
    const Tensor m0 = c.get0("trunk.pass0.msa.m0");
    ASSERT_EQ(m0.size(2), cfg.msa_s);
    Tensor m = m0.clone();
    pwa.add_to(m, msa_module_input(c, 0));
    expect_module(minus(m, m0), c.get0("trunk.pass0.msa.l0.pair_weighted_averaging.out"),
                  GetParam() + " PWA");
}

// z += OPM(m) on the m the reference's OPM saw (the layer's input plus the PWA and transition
// updates, the layer's residual adds), from a zero pair so the result is the update itself; in
// several pair-row chunks (one row, a few, the default), each at the bar.
TEST_P(NnMsaBlocks, OuterProductMeanMatchesReferenceInEveryChunking) {
    const Boltz2Case c = test::load_boltz2_case(GetParam());
    const io::ModelDir& w = test::boltz2_weights();
    const boltz2::Config& cfg = test::boltz2_config();
    const std::string p = kLayer0 + ".outer_product_mean";
    const int64_t hidden = w.get_raw(p + ".proj_a.weight").size(0);
    const nn::OuterProductMean opm = nn::OuterProductMean::load(
        w, p, cfg.msa_s, cfg.token_z, hidden, nn::OuterProductMeanNames::boltz2());
    const Tensor m = plus(plus(c.get0("trunk.pass0.msa.m0"),
                               c.get0("trunk.pass0.msa.l0.pair_weighted_averaging.out")),
                          c.get0("trunk.pass0.msa.l0.msa_transition.out"));
    const Tensor ref = c.get0("trunk.pass0.msa.l0.outer_product_mean.out");
    const int64_t L = m.size(1);
    for (const int64_t chunk : {int64_t(1), int64_t(3), int64_t(0)}) {
        Tensor z = Tensor::zeros({L, L, cfg.token_z});
        opm.add_to(m, z, chunk);
        expect_module(z, ref, GetParam() + " OPM, chunk " + std::to_string(chunk));
    }
}

INSTANTIATE_TEST_SUITE_P(Cases, NnMsaBlocks, ::testing::ValuesIn(test::boltz2_cases()));

}  // namespace
