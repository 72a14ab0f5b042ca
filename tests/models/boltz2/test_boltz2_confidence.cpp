// Boltz-2's confidence module against the reference's own forward (fixture part `confidence`,
// tools/reference/boltz2_dump_confidence.py) on every case, and a check that a missing distance
// embedding fails the bar.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "boltz2_fixture.h"
#include "models/boltz2/confidence.h"
#include "ops/ops.h"

namespace bioinfer::test {
namespace {

using namespace boltz2;

#ifdef BIOINFER_FIXTURES

const ConfidenceModule& tiny_confidence() {
    static const ConfidenceModule c = ConfidenceModule::load(boltz2_weights(), boltz2_config());
    return c;
}

// Sample k of a (samples, ...) reference tensor.
Tensor sample(const Tensor& t, int64_t k) {
    Shape s = t.shape();
    s.erase(s.begin());
    return t.narrow0(k, k + 1).reshape(s).clone();
}

// Aggregates: within 1e-4 absolute of the reference, element by element.
void expect_close(const Tensor& got, const Tensor& ref, const std::string& what) {
    ASSERT_EQ(got.numel(), ref.numel()) << what;
    const Tensor g = got.to_f32(), r = ref.to_f32();
    for (int64_t i = 0; i < g.numel(); ++i)
        EXPECT_NEAR(g.f32()[i], r.f32()[i], 1e-4) << what << " [" << i << "]";
}

class Boltz2ConfidenceCase : public ::testing::TestWithParam<std::string> {};

TEST_P(Boltz2ConfidenceCase, MatchesReference) {
    const Boltz2Case c = load_boltz2_case(GetParam());
    const ConfidenceModule& cm = tiny_confidence();
    const Tensor x = c.get("confidence.x_pred");
    const int64_t S = x.size(0), L = c.feats.num_tokens();
    ASSERT_EQ(S, 2);
    std::map<std::string, Tensor> seen;
    const Tensor dist = c.get0("trunk.pdistogram").reshape({L, L, boltz2_config().num_bins});
    const ConfidenceOutput out =
        cm.run(c.feats, c.get0("trunk.s_inputs"), c.get0("trunk.s"), c.get0("trunk.z"), x, dist,
               [&](const std::string& n, const Tensor& v) { seen[n] = v.clone(); });
    for (int64_t k = 0; k < S; ++k)
        for (const char* n : {"s_embed", "z_embed", "s_stack", "z_stack"}) {
            const std::string key = std::to_string(k) + "." + n;
            expect_parity(seen.at(key), sample(c.get(std::string("confidence.") + n), k), key);
        }
    // pae_logits and pde_logits (samples, N, N, 64) are not stored: pae and pde, their softmax
    // expectations over the bins, are checked
    expect_parity(out.plddt_logits, c.get("confidence.plddt_logits"), "plddt_logits");
    expect_parity(out.resolved_logits, c.get("confidence.resolved_logits"), "resolved_logits");
    expect_parity(out.pae, c.get("confidence.pae"), "pae");
    expect_parity(out.pde, c.get("confidence.pde"), "pde");
    expect_parity(out.plddt, c.get("confidence.plddt"), "plddt");
    for (const auto& [name, got] : std::vector<std::pair<std::string, Tensor>>{
             {"complex_plddt", out.complex_plddt}, {"complex_iplddt", out.complex_iplddt},
             {"complex_pde", out.complex_pde}, {"complex_ipde", out.complex_ipde},
             {"ptm", out.ptm}, {"iptm", out.iptm}, {"ligand_iptm", out.ligand_iptm},
             {"protein_iptm", out.protein_iptm}, {"pair_chains_iptm", out.pair_chains_iptm}})
        expect_close(got, c.get("confidence." + name), name);
}

// Re-embedding without the sampled structure's distance term must fail the bar on the stack's
// input: the distogram embedding is a real part of z.
TEST_P(Boltz2ConfidenceCase, MissingDistanceEmbeddingFailsTheBar) {
    const Boltz2Case c = load_boltz2_case(GetParam());
    ConfidenceModule cm = tiny_confidence();
    cm.dist_embed = Tensor::zeros(cm.dist_embed.shape());
    const int64_t L = c.feats.num_tokens();
    Tensor z0;
    cm.run(c.feats, c.get0("trunk.s_inputs"), c.get0("trunk.s"), c.get0("trunk.z"),
           c.get("confidence.x_pred"), c.get0("trunk.pdistogram").reshape({L, L, boltz2_config().num_bins}),
           [&](const std::string& n, const Tensor& v) { if (n == "0.z_embed") z0 = v.clone(); });
    EXPECT_TRUE(fails_bar(z0, sample(c.get("confidence.z_embed"), 0)));
}

INSTANTIATE_TEST_SUITE_P(Cases, Boltz2ConfidenceCase, ::testing::ValuesIn(boltz2_cases()));

#endif  // BIOINFER_FIXTURES

}  // namespace
}  // namespace bioinfer::test
