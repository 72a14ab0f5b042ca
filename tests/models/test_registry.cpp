// A model added through the registry alone: the toy helix model (tests/models/toy), registered
// by its own main() over the unchanged CLI, predicts from `bioinfer predict` with the
// registry's rules (its options, its output layout); the bioinfer binary, which lacks the row,
// refuses the same checkpoint naming the models it has.
#include <cmath>
#include <sstream>

#include "cli_util.h"
#include "io/safetensors.h"

namespace bioinfer::test {
namespace {

struct RegistryCli : CliTest {
    const float radius = 2.3f, rise = 1.5f, twist = 100.0f;
    void SetUp() override {
        CliTest::SetUp();
        bin = BIOINFER_TOY_BIN;
        fs::create_directories(tmp / "toy");
        write("toy/config.json", R"({"model_type": "toy_helix", "plddt": 0.75})");
        io::write_safetensors(p("toy/model.safetensors"),
                              {{"helix.geometry", Tensor::of(std::vector<float>{radius, rise, twist}, Shape{3})}});
        write("in.fasta", ">h1\nACDEFGHIKL\n>h2\nMKV:GGS\n");
    }
};

struct CaAtom {
    char chain;
    double x, y, z, b;
};

std::vector<CaAtom> ca_atoms(const std::string& pdb) {
    std::vector<CaAtom> v;
    std::istringstream in(pdb);
    for (std::string l; std::getline(in, l);)
        if (l.rfind("ATOM", 0) == 0 && l.substr(12, 4) == " CA ")
            v.push_back({l[21], std::stod(l.substr(30, 8)), std::stod(l.substr(38, 8)),
                         std::stod(l.substr(46, 8)), std::stod(l.substr(60, 6))});
    return v;
}

TEST_F(RegistryCli, PredictsWithAModelRegisteredThroughTheRegistryAlone) {
    Result r = run("predict " + p("in.fasta") + " --weights " + p("toy") + " --out-dir " + p("out"));
    ASSERT_EQ(r.rc, 0) << r.err;
    // the helix the weights describe: consecutive Calphas 2 r sin(twist / 2) apart across, rise up
    const double t = twist * M_PI / 180;
    const double step = std::hypot(2 * radius * std::sin(t / 2), rise);
    std::vector<CaAtom> h1 = ca_atoms(io::read_file(p("out/h1.pdb")));
    ASSERT_EQ(h1.size(), 10u);
    for (size_t i = 1; i < h1.size(); ++i)
        EXPECT_NEAR(std::hypot(h1[i].x - h1[i - 1].x, h1[i].y - h1[i - 1].y, h1[i].z - h1[i - 1].z),
                    step, 2e-3);
    for (const CaAtom& a : h1) EXPECT_NEAR(a.b, 75.0, 1e-9);
    std::vector<CaAtom> h2 = ca_atoms(io::read_file(p("out/h2.pdb")));
    ASSERT_EQ(h2.size(), 6u);
    EXPECT_EQ(std::string({h2[0].chain, h2[2].chain, h2[3].chain, h2[5].chain}), "AABB");
    auto results = nlohmann::json::parse(io::read_file(p("out/results.json")));
    EXPECT_EQ(results["counts"]["ok"], 2) << results.dump();
}

TEST_F(RegistryCli, RefusesTheOptionsTheModelDoesNotDeclare) {
    Result r = run("predict " + p("in.fasta") + " --weights " + p("toy") + " --out-dir " + p("out") +
                   " --sampling-steps 5");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("[--sampling-steps] not an option of toy_helix"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(p("out/h1.pdb")));
}

TEST_F(RegistryCli, TheBinaryWithoutTheRowRefusesItsCheckpoint) {
    bin = kBin;
    Result r = run("predict " + p("in.fasta") + " --weights " + p("toy") + " --out-dir " + p("out"));
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("toy/config.json"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("ESMFold"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(p("out")));
}

}  // namespace
}  // namespace bioinfer::test
