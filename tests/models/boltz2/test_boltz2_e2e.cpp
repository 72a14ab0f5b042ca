// Boltz-2 end to end against the reference's own predict forward (the fixtures' `e2e` part): the
// composed model on the reference's features with the sampler replaying the reference's random
// draws (recycling 1, 6 steps, 2 samples in one batch) gives the same coordinates and confidences.
#include <gtest/gtest.h>

#include <cmath>

#include "boltz2_fixture.h"
#include "models/boltz2/boltz2.h"

namespace bioinfer::test {
namespace {

class Boltz2EndToEnd : public ::testing::TestWithParam<std::string> {};

// Standard deviation of all coordinate values: the spread the coordinate bar is relative to.
double spread(const Tensor& x) {
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < x.numel(); ++i) s += x.f32()[i], s2 += double(x.f32()[i]) * x.f32()[i];
    const double m = s / double(x.numel());
    return std::sqrt(std::max(0.0, s2 / double(x.numel()) - m * m));
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
    EXPECT_EQ(a.numel(), b.numel());
    double d = 0;
    for (int64_t i = 0; i < std::min(a.numel(), b.numel()); ++i)
        d = std::max(d, double(std::fabs(a.f32()[i] - b.f32()[i])));
    return d;
}

boltz2::RunOutput replayed_run(const Boltz2Case& c, nn::ReplayNormal& rng) {
    const auto model = boltz2::Boltz2Model::load(boltz2_weights());
    boltz2::RunOptions o;
    o.recycling_steps = 1;
    o.sampling_steps = 6;
    o.diffusion_samples = 2;
    o.max_parallel_samples = 2;
    o.rng = &rng;
    return model->run(c.feats, o);
}

TEST_P(Boltz2EndToEnd, ReplayedRunMatchesTheReference) {
    const Boltz2Case c = load_boltz2_case(GetParam());
    nn::ReplayNormal rng(reference_draws(c, 6));
    const boltz2::RunOutput out = replayed_run(c, rng);
    EXPECT_EQ(rng.used(), 1u + 3u * 6u) << "every recorded draw is taken, in order";
    // the trunk's final representations the run returns (what --write_embeddings writes)
    expect_parity(out.trunk.s, c.get0("trunk.s"), "trunk s");
    expect_parity(out.trunk.z, c.get0("trunk.z"), "trunk z");

    const Tensor ref = c.get("e2e.sample_atom_coords");  // (2, A, 3)
    ASSERT_EQ(out.coords.shape(), ref.shape());
    const double bar = 1e-3 * spread(ref);
    const double d = max_abs_diff(out.coords, ref);
    EXPECT_LE(d, bar) << GetParam() << ": coordinates differ by " << d << " (spread " << spread(ref) << ")";

    ASSERT_TRUE(out.has_confidence);
    const auto& k = out.confidence;
    const std::pair<const char*, const Tensor*> conf[] = {
        {"plddt", &k.plddt},         {"pae", &k.pae},
        {"pde", &k.pde},             {"complex_plddt", &k.complex_plddt},
        {"complex_iplddt", &k.complex_iplddt}, {"complex_pde", &k.complex_pde},
        {"complex_ipde", &k.complex_ipde},     {"ptm", &k.ptm},
        {"iptm", &k.iptm},           {"ligand_iptm", &k.ligand_iptm},
        {"protein_iptm", &k.protein_iptm},     {"pair_chains_iptm", &k.pair_chains_iptm}};
    for (const auto& [name, t] : conf) {
        const Tensor r = c.get(std::string("e2e.") + name);
        // PAE and PDE are in Angstrom (0..32): the 1e-4 bar is relative to that range there
        const double tol = (std::string(name) == "pae" || std::string(name) == "pde") ? 32e-4 : 1e-4;
        EXPECT_LE(max_abs_diff(*t, r), tol) << GetParam() << ": " << name;
    }
    ASSERT_EQ(out.confidence_score.size(), 2u);
}

// The replay is what makes the comparison meaningful: other draws (a wrong scale on the initial
// noise) move the coordinates far outside the bar.
TEST_P(Boltz2EndToEnd, OtherDrawsFailTheBar) {
    const Boltz2Case c = load_boltz2_case(GetParam());
    std::vector<Tensor> draws = reference_draws(c, 6);
    ops::scale(draws[0], 1.5f, draws[0]);
    nn::ReplayNormal rng(draws);
    const boltz2::RunOutput out = replayed_run(c, rng);
    const Tensor ref = c.get("e2e.sample_atom_coords");
    EXPECT_GT(max_abs_diff(out.coords, ref), 1e-3 * spread(ref));
}

INSTANTIATE_TEST_SUITE_P(Cases, Boltz2EndToEnd, ::testing::ValuesIn(boltz2_cases()));

}  // namespace
}  // namespace bioinfer::test
