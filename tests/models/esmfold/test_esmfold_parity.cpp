// ESMFold parity: the tiny random-weight EsmForProteinFolding fixture
// (tools/reference/make_esmfold_fixtures.py), module by module: stem features, every trunk block's
// s and z in the first and last recycling pass, the recycled distogram bins, the structure
// module's frames, angles, states and atoms per block, and the heads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "io/model_dir.h"
#include "io/safetensors.h"
#include "models/esmfold/esmfold.h"
#include "ops/ops.h"
#include "test_util.h"

using namespace bioinfer;

namespace {

using Case = test::ParityCase;
using Fixture = test::ParityFixture;

Fixture load_fixture() { return test::load_parity_fixture("esmfold_tiny"); }

// The worst agreement seen over the run, printed at the end (docs/parity.md quotes it).
struct Worst {
    double pcc = 1, rel_l2 = 0, coord_frac = 0, plddt = 0;
    std::string pcc_at, rel_at, coord_at;
} g_worst;

// The trunk and head bar (docs/parity.md): PCC >= 0.99999 and relative L2 <= 1e-5.
void expect_close(const Tensor& got, const Tensor& ref, const std::string& what) {
    ASSERT_EQ(got.numel(), ref.numel()) << what;
    auto s = test::stats(got.f32(), ref.f32(), got.numel());
    if (s.pcc < g_worst.pcc) g_worst.pcc = s.pcc, g_worst.pcc_at = what;
    if (s.rel_l2 > g_worst.rel_l2) g_worst.rel_l2 = s.rel_l2, g_worst.rel_at = what;
    EXPECT_GE(s.pcc, 0.99999) << what << " (max-abs " << s.max_abs << ")";
    EXPECT_LE(s.rel_l2, 1e-5) << what;
}

// Coordinates: every value within 1e-3 of the reference's spread (standard deviation).
void expect_coords(const Tensor& got, const Tensor& ref, const std::string& what) {
    ASSERT_EQ(got.numel(), ref.numel()) << what;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) mean += ref.f32()[i];
    mean /= double(ref.numel());
    for (int64_t i = 0; i < ref.numel(); ++i) var += std::pow(ref.f32()[i] - mean, 2);
    const double spread = std::sqrt(var / double(ref.numel()));
    auto s = test::stats(got.f32(), ref.f32(), got.numel());
    if (s.max_abs / spread > g_worst.coord_frac) g_worst.coord_frac = s.max_abs / spread, g_worst.coord_at = what;
    EXPECT_LE(s.max_abs, 1e-3 * spread) << what << ": spread " << spread;
}

struct FoldRun {
    esmfold::EncodedTarget enc;
    esmfold::FoldOutput out;
    std::map<std::string, Tensor> taps;
};

FoldRun fold(const esmfold::EsmFoldModel& model, const Case& c) {
    FoldRun r;
    r.enc = esmfold::encode_sequence(c.sequence, c.id);
    esmfold::FoldOptions opts;
    opts.tap = [&](const std::string& n, const Tensor& t) { r.taps[n] = t.clone(); };
    r.out = model.fold(r.enc.target, opts);
    return r;
}

}  // namespace

TEST(EsmFoldParity, EncodingMatchesFairEsm) {
    Fixture f = load_fixture();
    for (auto& c : f.cases) {
        const auto e = esmfold::encode_sequence(c.sequence, c.id);
        const Tensor aa = f.get(c.id + ".aatype"), ri = f.get(c.id + ".residue_index"),
                     lk = f.get(c.id + ".linker_mask"), ch = f.get(c.id + ".chain_index");
        ASSERT_EQ(int64_t(e.target.aatype.size()), aa.numel()) << c.id;
        for (int64_t i = 0; i < aa.numel(); ++i) {
            EXPECT_EQ(e.target.aatype[size_t(i)], int32_t(aa.f32()[i])) << c.id << " " << i;
            EXPECT_EQ(e.target.residue_index[size_t(i)], int64_t(ri.f32()[i])) << c.id << " " << i;
            EXPECT_EQ(e.is_linker[size_t(i)], lk.f32()[i] == 0.0f) << c.id << " " << i;
            EXPECT_EQ(e.chain[size_t(i)], int32_t(ch.f32()[i])) << c.id << " " << i;
        }
    }
}

TEST(EsmFoldParity, EveryModuleMatchesUpstream) {
    Fixture f = load_fixture();
    auto model = esmfold::EsmFoldModel::load(io::ModelDir::open(f.dir));
    const int passes = int(model->config().trunk.max_recycles);
    const int64_t blocks = model->config().trunk.blocks;
    for (auto& c : f.cases) {
        SCOPED_TRACE(c.id);
        FoldRun r = fold(*model, c);
        const std::string p = c.id + ".";
        expect_close(r.taps.at("esm_s_combined"), f.get(p + "esm_s_combined"), "stem features");
        // Per-block trunk states, first and last pass (stored for one case).
        for (auto [pass, name] : {std::pair<int, const char*>{0, "first"}, {passes - 1, "last"}})
            for (int64_t b = 0; b < blocks; ++b) {
                const std::string k = p + "trunk." + name + ".block" + std::to_string(b);
                if (!f.has(k + ".s")) continue;
                const std::string t = "trunk.pass" + std::to_string(pass) + ".block" + std::to_string(b);
                expect_close(r.taps.at(t + ".s"), f.get(k + ".s"), k + ".s");
                expect_close(r.taps.at(t + ".z"), f.get(k + ".z"), k + ".z");
            }
        // The recycled distogram is discrete: every bin equal.
        for (int pass = 0; pass < passes; ++pass) {
            const std::string k = "recycle_bins." + std::to_string(pass);
            const Tensor got = r.taps.at(k), ref = f.get(p + k);
            int64_t diff = 0;
            for (int64_t i = 0; i < ref.numel(); ++i) diff += got.f32()[i] != ref.f32()[i];
            EXPECT_EQ(diff, 0) << k;
        }
        expect_close(r.out.s_s, f.get(p + "s_s"), "s_s");
        expect_close(r.out.s_z, f.get(p + "s_z"), "s_z");
        expect_close(r.out.structure.states, f.get(p + "states"), "structure states");
        expect_close(r.out.structure.angles, f.get(p + "angles"), "angles");
        expect_coords(r.out.structure.frames, f.get(p + "frames"), "frames");
        expect_coords(r.out.structure.positions, f.get(p + "positions"), "atom14 positions");
        expect_coords(r.out.atom37, f.get(p + "atom37"), "atom37 positions");
        for (int64_t i = 0; i < r.out.atom37_exists.numel(); ++i)
            ASSERT_EQ(r.out.atom37_exists.f32()[i], f.get(p + "atom37_exists").f32()[i]);
        test::compare(r.out.plddt, f.get(p + "plddt"), 1e-3, 0, "plddt");
        g_worst.plddt = std::max(g_worst.plddt, test::stats(r.out.plddt.f32(), f.get(p + "plddt").f32(),
                                                            r.out.plddt.numel()).max_abs);
        EXPECT_NEAR(r.out.ptm, f.get(p + "ptm").f32()[0], 1e-4) << "ptm";
        expect_close(r.out.pae, f.get(p + "pae"), "pae");
        expect_close(r.out.lm_logits, f.get(p + "lm_logits"), "lm_logits");
        if (f.has(p + "distogram_logits"))
            expect_close(r.out.distogram_logits, f.get(p + "distogram_logits"), "distogram");
    }
    std::printf("esmfold parity, worst over targets: PCC %.7f (%s), relative L2 %.2e (%s), "
                "coordinates max-abs %.2e of the spread (%s), pLDDT max-abs %.2e\n",
                g_worst.pcc, g_worst.pcc_at.c_str(), g_worst.rel_l2, g_worst.rel_at.c_str(),
                g_worst.coord_frac, g_worst.coord_at.c_str(), g_worst.plddt);
}
