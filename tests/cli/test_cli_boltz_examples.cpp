// boltz's own examples (tests/fixtures/boltz_examples/examples, from boltz's repository with
// their MSAs) run through `bioinfer predict` exactly as boltz's users write them: from the folder
// holding examples/ (their MSA paths are relative to it), with boltz's flags, the MSA server
// (a local stand-in for the ColabFold server) searching the proteins that name no MSA, and the
// model taken from a boltz cache folder (--cache) holding the tiny fixture's checkpoints and
// molecules. Every example is written in boltz's layout; the two whose MSA does not start with
// their sequence warn and fold single-sequence; the mmCIF files hold every chain and ligand atom.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "io/atomic_file.h"
#include "msa_server.h"

using namespace bioinfer;
using test::Result;
namespace fs = std::filesystem;

namespace {

const std::string kExamples = std::string(BIOINFER_FIXTURES) + "/boltz_examples";
const std::string kBoltz2 = std::string(BIOINFER_FIXTURES) + "/boltz2_tiny";

// Per chain id of an mmCIF file: (polymer residues' CA atoms, HETATM atoms).
std::map<std::string, std::pair<int, int>> cif_chains(const std::string& path) {
    std::map<std::string, std::pair<int, int>> chains;
    std::istringstream in(io::read_file(path));
    std::vector<std::string> fields;
    bool in_loop = false, in_atoms = false;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("loop_", 0) == 0) {
            in_loop = true;
            in_atoms = false;
            fields.clear();
            continue;
        }
        if (in_loop && line.rfind("_atom_site.", 0) == 0) {
            in_atoms = true;
            fields.push_back(line.substr(11, line.find_first_of(" \t") - 11));
            continue;
        }
        if (!in_atoms || (line.rfind("ATOM", 0) != 0 && line.rfind("HETATM", 0) != 0)) continue;
        std::istringstream row(line);
        std::map<std::string, std::string> v;
        for (const std::string& f : fields) row >> v[f];
        auto& c = chains[v["auth_asym_id"]];
        if (v["group_PDB"] == "HETATM") ++c.second;
        else if (v["label_atom_id"] == "CA") ++c.first;
    }
    return chains;
}

struct BoltzExamples : test::CliTest {
    test::ColabFoldServer server;
    // boltz's cache layout (~/.boltz): the checkpoints, and mols/ with the tiny fixture's
    // molecules and the CCD molecules the examples name (SAH, EKY)
    std::string boltz_cache() const {
        const fs::path c = tmp / "boltz_cache";
        fs::create_directories(c / "mols");
        for (const char* f : {"boltz2_conf.ckpt", "boltz2_aff.ckpt"})
            fs::create_symlink(kBoltz2 + "/" + f, c / f);
        for (const std::string dir : {kBoltz2 + "/mols", kExamples + "/mols"})
            for (auto& e : fs::directory_iterator(dir)) fs::create_symlink(e.path(), c / "mols" / e.path().filename());
        return c.string();
    }
    // the examples as boltz's repository holds them: <root>/examples/...
    std::string boltz_repo() const {
        fs::create_directories(tmp / "boltz");
        fs::copy(kExamples + "/examples", tmp / "boltz" / "examples", fs::copy_options::recursive);
        return p("boltz");
    }
};

TEST_F(BoltzExamples, RunAsBoltzUsersWriteThem) {
    const std::string cache = boltz_cache(), repo = boltz_repo();
    // quick sampler settings: the numbers mean nothing with random weights, the inputs do
    const std::string flags = " --cache " + cache + " --use_msa_server --msa_server_url " + server.url() +
                              " --recycling_steps 0 --sampling_steps 2 --sampling_steps_affinity 2"
                              " --diffusion_samples_affinity 1 --num_workers 2 --preprocessing-threads 2";
    struct Example {
        std::string file;
        std::vector<std::string> chains;            // every chain id
        std::map<std::string, int> ligand_atoms;    // heavy atoms per ligand chain (-1: some)
        std::vector<int> server_entities;           // protein entities the server's MSAs are for
        bool mismatched_msa = false;
        bool affinity = false;
    };
    const std::vector<Example> examples = {
        {"prot.yaml", {"A"}, {}, {0}},
        {"prot.fasta", {"A"}, {}, {}, true},
        {"prot_custom_msa.yaml", {"A"}, {}, {}, true},
        {"prot_no_msa.yaml", {"A"}, {}, {}},
        {"cyclic_prot.yaml", {"A"}, {}, {0}},
        {"multimer.yaml", {"A", "B"}, {}, {0, 1}},
        // SAH: C14 H20 N6 O5 S, 26 heavy atoms; tyrosine's SMILES 13
        {"ligand.yaml", {"A", "B", "C", "D", "E", "F"}, {{"C", 26}, {"D", 26}, {"E", 13}, {"F", 13}}, {}},
        {"ligand.fasta", {"A", "B", "C", "D", "E", "F"}, {{"C", 26}, {"D", 26}, {"E", 13}, {"F", 13}}, {}},
        {"affinity.yaml", {"A", "B"}, {{"B", 13}}, {0}, false, true},
        {"pocket.yaml", {"A1", "B1"}, {{"B1", -1}}, {0}},
    };
    for (const Example& ex : examples) {
        SCOPED_TRACE(ex.file);
        // an output folder per example: prot.yaml and prot.fasta would share one
        const Result r = run("predict examples/" + ex.file + flags + " --out_dir " + p("out/" + ex.file),
                             "", "/dev/null", repo);
        ASSERT_EQ(r.rc, 0) << r.err;
        const std::string stem = fs::path(ex.file).stem().string();
        const fs::path root = tmp / "out" / ex.file / ("boltz_results_" + stem);
        const fs::path pred = root / "predictions" / stem;
        for (const std::string f : {stem + "_model_0.cif", "confidence_" + stem + "_model_0.json",
                                    "plddt_" + stem + "_model_0.npz", "pae_" + stem + "_model_0.npz",
                                    "pde_" + stem + "_model_0.npz"})
            EXPECT_TRUE(fs::exists(pred / f)) << f;
        EXPECT_EQ(fs::exists(pred / ("affinity_" + stem + ".json")), ex.affinity);
        // the server's MSAs, where boltz writes them
        for (int e : ex.server_entities) {
            const fs::path csv = root / "msa" / (stem + "_" + std::to_string(e) + ".csv");
            ASSERT_TRUE(fs::exists(csv)) << csv;
            EXPECT_EQ(io::read_file(csv.string()).rfind("key,sequence\n", 0), 0u);
        }
        if (ex.server_entities.empty()) EXPECT_FALSE(fs::exists(root / "msa"));
        const bool warned = r.err.find("folds single-sequence, as boltz does") != std::string::npos;
        EXPECT_EQ(warned, ex.mismatched_msa) << r.err;
        // every chain, every ligand atom
        const auto chains = cif_chains((pred / (stem + "_model_0.cif")).string());
        std::set<std::string> got, want(ex.chains.begin(), ex.chains.end());
        for (auto& [id, n] : chains) got.insert(id);
        EXPECT_EQ(got, want);
        for (const std::string& id : ex.chains) {
            auto it = ex.ligand_atoms.find(id);
            if (it == ex.ligand_atoms.end()) {
                EXPECT_GT(chains.at(id).first, 0) << id;
                EXPECT_EQ(chains.at(id).second, 0) << id;
            } else if (it->second >= 0) {
                EXPECT_EQ(chains.at(id).second, it->second) << id;
            } else {
                EXPECT_GT(chains.at(id).second, 0) << id;
            }
        }
    }
    // one job per example that needs MSAs (the multimer's two proteins in one unpaired job and
    // one paired job); the affinity example's protein is new to the server too
    EXPECT_EQ(server.count("POST /ticket/msa"), 5);
    EXPECT_EQ(server.count("POST /ticket/pair"), 1);
    // a rerun asks nothing: the answers are cached by sequence
    const size_t asked = server.requests().size();
    const Result again = run("predict examples/multimer.yaml" + flags + " --out_dir " + p("again"), "",
                             "/dev/null", repo);
    EXPECT_EQ(again.rc, 0) << again.err;
    EXPECT_EQ(server.requests().size(), asked);
}

// Without --use_msa_server, an input that names no MSA says how to get one, as boltz does
// ("Missing MSA's in input and --use_msa_server flag not set"); offline, the server is not asked.
TEST_F(BoltzExamples, MissingMsaNamesTheServerFlag) {
    const std::string cache = boltz_cache(), repo = boltz_repo();
    Result r = run("predict examples/prot.yaml --cache " + cache + " --out_dir " + p("out"), "", "/dev/null", repo);
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("--use_msa_server"), std::string::npos) << r.err;
    r = run("predict examples/prot.yaml --cache " + cache + " --out_dir " + p("out") +
                " --use_msa_server --msa_server_url " + server.url() + " --offline",
            "", "/dev/null", repo);
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("offline"), std::string::npos) << r.err;
    EXPECT_TRUE(server.requests().empty());
    // a server that fails the job: one line, nothing written under msa/
    server.answer_submissions("ERROR", 1);
    r = run("predict examples/prot.yaml --cache " + cache + " --out_dir " + p("out") +
                " --use_msa_server --msa_server_url " + server.url(),
            "", "/dev/null", repo);
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("answered ERROR"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(tmp / "out" / "boltz_results_prot" / "msa" / "prot_0.csv"));
}

}  // namespace

namespace {

// boltz's shortest command line, `boltz predict input.yaml` with the model in $BOLTZ_CACHE: no
// --model, no --out_dir (./, as boltz), and mols.tar unpacked where mols/ is missing. A model
// with bioinfer's own layout still needs --out-dir.
TEST_F(BoltzExamples, BoltzCacheAloneSelectsBoltz2AndOutputsGoUnderTheWorkingFolder) {
    const std::string cache = boltz_cache(), repo = boltz_repo();
    Result r = run("predict examples/prot_no_msa.yaml --recycling_steps 0 --sampling_steps 2",
                   "BOLTZ_CACHE=" + cache, "/dev/null", repo);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(fs::exists(tmp / "boltz" / "boltz_results_prot_no_msa" / "predictions" / "prot_no_msa" /
                           "prot_no_msa_model_0.cif"));
    // a cache holding mols.tar only (boltz's download, not yet unpacked)
    const fs::path tarred = tmp / "tarred";
    fs::create_directories(tarred);
    fs::create_symlink(kBoltz2 + "/boltz2_conf.ckpt", tarred / "boltz2_conf.ckpt");
    ASSERT_EQ(std::system(("tar -C '" + cache + "' -chf '" + (tarred / "mols.tar").string() + "' mols").c_str()), 0);
    r = run("predict examples/prot_no_msa.yaml --cache " + tarred.string() +
                " --recycling_steps 0 --sampling_steps 2 --out_dir " + p("t"),
            "", "/dev/null", repo);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(fs::is_regular_file(tarred / "mols" / "ALA.pkl"));
    write("x.fa", ">x\nMKTAYIAK\n");
    r = run("predict " + p("x.fa") + " --weights " + std::string(BIOINFER_FIXTURES) + "/esmfold_tiny");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("--out-dir is required"), std::string::npos) << r.err;
}

}  // namespace
