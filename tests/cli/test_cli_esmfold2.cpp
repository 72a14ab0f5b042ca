// CLI tests of `bioinfer predict` with ESMFold2 (the tiny random-weight fixture, whose modules are
// held to transformers' EsmFold2Model by test_esmfold2.cpp): chains and atoms written, samples
// ranked by pTM with their confidences, seeds reproducing runs, and bad input refused.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "io/atomic_file.h"
#include "msa_server.h"

using namespace bioinfer;
using test::Result;
namespace fs = std::filesystem;

namespace {

const std::string kFold2 = std::string(BIOINFER_FIXTURES) + "/esmfold2_tiny";
const std::string kQuick = " --weights " + kFold2 + " --sampling-steps 8 --num-recycles 1";

struct EsmFold2Cli : test::CliTest {};

// (chain, residue number) -> atoms in a PDB file's ATOM records
std::map<std::pair<char, int>, int> atoms_per_residue(const std::string& pdb) {
    std::map<std::pair<char, int>, int> n;
    std::istringstream lines(io::read_file(pdb));
    for (std::string line; std::getline(lines, line);)
        if (line.rfind("ATOM", 0) == 0) ++n[{line[21], std::stoi(line.substr(22, 4))}];
    return n;
}

}  // namespace

// Two targets (one chain; three chains, two of them copies): every heavy atom written under its
// chain and residue, two samples best first by pTM, each with its own structure, scores, PAE and
// PDE.
TEST_F(EsmFold2Cli, WritesEveryAtomAndRankedSamples) {
    write("in.fasta", ">mono\nMKTAYIAKQRQISFVKSHFXRQLW\n>trimer\nMKVLAAGIVG:MKVLAAGIVG:GSHMEKR\n");
    Result r = run("predict " + p("in.fasta") + kQuick +
                   " --diffusion-samples 2 --seed 3 --write-pae --out-dir " + p("out"));
    ASSERT_EQ(r.rc, 0) << r.err;
    for (const std::string f : {"mono_pae.npy", "mono_pde.npy", "mono_plddt_pae.png",
                                "mono_sample1_pae.npy", "trimer_pde.npy"})
        EXPECT_TRUE(fs::exists(p("out/" + f))) << f;
    // MKTAYIAKQRQISFVKSHFXRQLW: heavy atoms per residue (X: N, CA, C, O)
    const auto mono = atoms_per_residue(p("out/mono.pdb"));
    EXPECT_EQ(mono.size(), 24u);
    EXPECT_EQ((mono.at({'A', 1})), 8);    // MET
    EXPECT_EQ((mono.at({'A', 20})), 4);   // X
    EXPECT_EQ((mono.at({'A', 24})), 14);  // TRP
    const auto tri = atoms_per_residue(p("out/trimer.pdb"));
    EXPECT_EQ(tri.size(), 27u);
    EXPECT_TRUE(tri.count({'C', 7}));
    for (const std::string id : {"mono", "trimer"}) {
        SCOPED_TRACE(id);
        EXPECT_TRUE(fs::exists(p("out/" + id + "_sample1.pdb")));
        const auto j = nlohmann::json::parse(io::read_file(p("out/" + id + ".json")));
        ASSERT_TRUE(j.contains("ptm") && j.contains("samples") && j["samples"].size() == 1u)
            << j.dump();
        EXPECT_GE(j["ptm"].get<double>(), j["samples"][0]["ptm"].get<double>()) << "ranked by pTM";
        EXPECT_EQ(j["num_recycles"].get<int>(), 1);
        EXPECT_NE(io::read_file(p("out/" + id + ".pdb")),
                  io::read_file(p("out/" + id + "_sample1.pdb")));
    }
    const auto t = nlohmann::json::parse(io::read_file(p("out/trimer.json")));
    EXPECT_TRUE(t.contains("iptm"));
    EXPECT_EQ(t["chains"].size(), 3u);
}

// The same seed writes the same files; another seed other coordinates.
TEST_F(EsmFold2Cli, SeedReproducesARun) {
    write("in.fasta", ">t\nMKTAYIAKQRQISFVKSHF\n");
    for (const auto& [dir, seed] : {std::pair{"a", 5}, std::pair{"b", 5}, std::pair{"c", 6}})
        ASSERT_EQ(run("predict " + p("in.fasta") + kQuick + " --seed " + std::to_string(seed) +
                      " --out-dir " + p(dir))
                      .rc,
                  0);
    EXPECT_EQ(io::read_file(p("a/t.pdb")), io::read_file(p("b/t.pdb")));
    EXPECT_NE(io::read_file(p("a/t.pdb")), io::read_file(p("c/t.pdb")));
}

// A character outside the amino-acid letters fails its record with one line naming it; a target
// the memory estimate does not fit is refused before the language model runs; options of Boltz-2's
// alone are refused before anything runs.
TEST_F(EsmFold2Cli, BadInputIsRefusedCleanly) {
    write("bad.fasta", ">good\nMKTAYIAK\n>bad\nMKT1YIAK\n");
    Result r = run("predict " + p("bad.fasta") + kQuick + " --out-dir " + p("out"));
    EXPECT_EQ(r.rc, 2) << r.err;  // one target done, one failed
    EXPECT_NE(r.err.find("bad"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("'1'"), std::string::npos) << r.err;
    EXPECT_TRUE(fs::exists(p("out/good.pdb")));
    EXPECT_FALSE(fs::exists(p("out/bad.pdb")));
    // a target beyond the memory budget is refused before anything runs, with the size it needs
    write("long.fasta", ">long\n" + std::string(3000, 'A') + "\n");
    r = run("predict " + p("long.fasta") + kQuick + " --max-memory 1 --out-dir " + p("out3"));
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("GiB to fold"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(p("out3/long.pdb")));
    r = run("predict " + p("bad.fasta") + kQuick + " --use-potentials --out-dir " + p("out2"));
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("[--use-potentials] not an option of esmfold2 (its own: --sampling-steps, "
                         "--diffusion-samples, --max-parallel-samples, --step-scale, --seed, "
                         "--max-msa-seqs, --msa-dir, --use-msa-server)"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(p("out2")));
}

// --msa-dir: ID.a3m feeds a one-chain record, ID_B.a3m the second chain of another; the MSA
// changes the prediction (same seed), a chain without a file folds on its own sequence, and a
// malformed a3m is refused naming the file and line, nothing of that target written.
TEST_F(EsmFold2Cli, MsaDirFeedsChainsAndBadA3mIsRefused) {
    // same_seq: mono's sequence without an MSA, so a fold of its own (not mono's, deduplicated)
    write("in.fasta", ">mono\nMKTAYIAKQR\n>dimer\nMKTAY:GSHMEK\n>same_seq\nMKTAYIAKQR\n");
    fs::create_directories(p("msas"));
    write("msas/mono.a3m", ">q\nMKTAYIAKQR\n>s1 key=1\nMKaaTAYLAKQ-\n>s2\nMRTAYIgAKER\n");
    write("msas/dimer_B.a3m", ">q\nGSHMEK\n>s1\nGSccHLEK\n");
    const std::string common = " --seed 5 --output-format pdb --out-dir ";
    ASSERT_EQ(run("predict " + p("in.fasta") + kQuick + common + p("plain")).rc, 0);
    Result r =
        run("predict " + p("in.fasta") + kQuick + " --msa-dir " + p("msas") + common + p("msa"));
    ASSERT_EQ(r.rc, 0) << r.err;
    for (const std::string id : {"mono", "dimer"})
        EXPECT_NE(io::read_file(p("plain/" + id + ".pdb")), io::read_file(p("msa/" + id + ".pdb")))
            << id;
    EXPECT_EQ(io::read_file(p("plain/same_seq.pdb")), io::read_file(p("msa/same_seq.pdb")));
    EXPECT_NE(io::read_file(p("msa/mono.pdb")), io::read_file(p("msa/same_seq.pdb")));
    write("msas/mono.a3m", ">q\nMKTAYIAKQR\n>s1\nMKTAY\n");
    r = run("predict " + p("in.fasta") + kQuick + " --msa-dir " + p("msas") + common + p("bad"));
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("mono.a3m:3"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(p("bad/mono.pdb")));
    EXPECT_NE(
        run("predict " + p("in.fasta") + kQuick + " --msa-dir " + p("nowhere") + common + p("bad2"))
            .err.find("--msa-dir"),
        std::string::npos);
}

// --use-msa-server (boltz's flag, which ESMFold2 takes too): each record's chains get the
// server's MSAs (a local stand-in for the ColabFold server), written to OUT/msa/<id>_<chain>.a3m
// with the pairing keys in the headers; the fold equals one fed the same files by --msa-dir.
TEST_F(EsmFold2Cli, MsaServerFeedsEveryChain) {
    test::ColabFoldServer server;
    write("in.fasta", ">mono\nMKTAYIAKQR\n>dimer\nMKTAY:GSHMEK\n");
    const std::string common = " --seed 5 --output-format pdb --out-dir ";
    Result r = run("predict " + p("in.fasta") + kQuick + " --use_msa_server --msa_server_url " +
                   server.url() + common + p("srv"));
    ASSERT_EQ(r.rc, 0) << r.err;
    for (const std::string f : {"mono_A.a3m", "dimer_A.a3m", "dimer_B.a3m"})
        EXPECT_TRUE(fs::exists(p("srv/msa/" + f))) << f;
    // the dimer's chains paired: their first rows carry key=0
    EXPECT_NE(io::read_file(p("srv/msa/dimer_B.a3m")).find(" key=0\nGSHMEK\n"), std::string::npos);
    EXPECT_EQ(server.count("POST /ticket/pair"), 1);
    EXPECT_EQ(server.count("POST /ticket/msa"), 2);
    fs::rename(p("srv/msa"), p("msas"));
    r = run("predict " + p("in.fasta") + kQuick + " --msa-dir " + p("msas") + common + p("dir"));
    ASSERT_EQ(r.rc, 0) << r.err;
    ASSERT_EQ(run("predict " + p("in.fasta") + kQuick + common + p("plain")).rc, 0);
    for (const std::string id : {"mono", "dimer"}) {
        EXPECT_EQ(io::read_file(p("srv/" + id + ".pdb")), io::read_file(p("dir/" + id + ".pdb"))) << id;
        EXPECT_NE(io::read_file(p("srv/" + id + ".pdb")), io::read_file(p("plain/" + id + ".pdb"))) << id;
    }
}
