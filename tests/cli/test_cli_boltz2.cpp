// CLI tests of `bioinfer predict` with Boltz-2 (the tiny fixture checkpoint): boltz's input files
// in, boltz's output layout out, one bad target failing alone, seeds reproducing runs, and bad
// input refused before anything is written.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "boltz2_fixture.h"
#include "cli_util.h"
#include "io/atomic_file.h"
#include "io/boltz_inputs.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "io/structure.h"
#include "models/boltz2/boltz2.h"
#include "models/boltz2/boltz2_structure.h"

using namespace bioinfer;
using test::Result;
namespace fs = std::filesystem;

namespace {

const std::string kBoltz2 = std::string(BIOINFER_FIXTURES) + "/boltz2_tiny";
// Quick settings: the numbers mean nothing with random weights, the layout and plumbing do.
const std::string kFast = " --weights " + kBoltz2 + " --sampling_steps 3 --recycling_steps 0";

struct Boltz2Cli : test::CliTest {
    // The fixture's three inputs (YAML with a3m MSAs) copied into tmp/<folder>.
    std::string inputs(const std::string& folder) const {
        fs::create_directories(tmp / folder);
        for (const std::string c : {"monomer", "heterodimer", "protein_rna"})
            for (auto& e : fs::directory_iterator(kBoltz2 + "/inputs/" + c))
                fs::copy_file(e.path(), tmp / folder / e.path().filename());
        return p(folder);
    }
    std::string pred(const std::string& out, const std::string& input, const std::string& name,
                     const std::string& file) const {
        return (tmp / out / ("boltz_results_" + input) / "predictions" / name / file).string();
    }
    // Array `array` ("s", "z") of the embeddings predict wrote for input file <name>.yaml.
    Tensor embedding(const std::string& out, const std::string& name,
                     const std::string& array) const {
        const io::LoadedArray a =
            io::read_npz(pred(out, name, name, "embeddings_" + name + ".npz")).at(array);
        return Tensor::of(a.data, a.shape);
    }
    nlohmann::json results(const std::string& out, const std::string& input) const {
        return nlohmann::json::parse(
            io::read_file(p(out + "/boltz_results_" + input + "/results.json")));
    }
};

// The ligands' mean bond length (Angstrom) in a PDB file boltz's way: HETATM atoms, CONECT bonds.
double mean_ligand_bond(const std::string& pdb) {
    std::map<int, std::array<double, 3>> xyz;
    std::vector<std::pair<int, int>> bonds;
    std::istringstream lines(io::read_file(pdb));
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("HETATM", 0) == 0)
            xyz[std::stoi(line.substr(6, 5))] = {std::stod(line.substr(30, 8)),
                                                 std::stod(line.substr(38, 8)),
                                                 std::stod(line.substr(46, 8))};
        if (line.rfind("CONECT", 0) == 0) {
            const int a = std::stoi(line.substr(6, 5));
            for (size_t k = 11; k + 5 <= line.size(); k += 5) {
                const std::string f = line.substr(k, 5);
                if (f.find_first_not_of(' ') != std::string::npos)
                    bonds.emplace_back(a, std::stoi(f));
            }
        }
    }
    double sum = 0;
    int n = 0;
    for (const auto& [a, b] : bonds) {
        if (!xyz.count(a) || !xyz.count(b)) continue;
        double d2 = 0;
        for (int e = 0; e < 3; ++e) d2 += (xyz[a][e] - xyz[b][e]) * (xyz[a][e] - xyz[b][e]);
        sum += std::sqrt(d2);
        ++n;
    }
    EXPECT_GT(n, 0) << pdb;
    return n ? sum / n : 0.0;
}

// A folder of inputs: each file a target, written in boltz's layout (ranked samples, confidence
// JSON with boltz's keys, npz files) with results.json beside predictions/.
TEST_F(Boltz2Cli, FolderOfInputsInBoltzLayout) {
    const std::string in = inputs("targets");
    Result r = run("predict " + in + kFast + " --diffusion_samples 2 --out_dir " + p("out"));
    ASSERT_EQ(r.rc, 0) << r.err;
    for (const std::string c : {"monomer", "heterodimer", "protein_rna"}) {
        SCOPED_TRACE(c);
        for (int k = 0; k < 2; ++k) {
            const std::string m = "_model_" + std::to_string(k);
            EXPECT_TRUE(fs::exists(pred("out", "targets", c, c + m + ".cif")));
            for (const std::string pre : {"pae_", "pde_", "plddt_"})
                EXPECT_TRUE(fs::exists(pred("out", "targets", c, pre + c + m + ".npz")));
        }
        const auto j0 = nlohmann::json::parse(io::read_file(pred("out", "targets", c, "confidence_" + c + "_model_0.json")));
        const auto j1 = nlohmann::json::parse(io::read_file(pred("out", "targets", c, "confidence_" + c + "_model_1.json")));
        for (const std::string k : {"confidence_score", "ptm", "iptm", "ligand_iptm", "protein_iptm", "complex_plddt",
                                    "complex_iplddt", "complex_pde", "complex_ipde", "chains_ptm", "pair_chains_iptm"})
            EXPECT_TRUE(j0.contains(k)) << k;
        EXPECT_GE(j0["confidence_score"].get<double>(), j1["confidence_score"].get<double>()) << "ranked";
        // the structure reads back with its chains and pLDDT (0-100) as B-factors
        const auto res = io::read_ca_residues(pred("out", "targets", c, c + "_model_0.cif"));
        EXPECT_FALSE(res.empty());
    }
    const auto results = nlohmann::json::parse(io::read_file(p("out/boltz_results_targets/results.json")));
    EXPECT_EQ(results["targets"].size(), 3u);
}

// A protein with a SMILES ligand and a CCD ligand (read from the model folder's mols/): the
// ligands are one residue each, written as HETATM records with their atoms' names, their bonds
// as CONECT records in PDB output; the confidence summary has a ligand ipTM.
TEST_F(Boltz2Cli, LigandsAreWrittenAsBoltzWritesThem) {
    const std::string in = kBoltz2 + "/inputs/protein_ligand/protein_ligand.yaml";
    for (const std::string fmt : {"mmcif", "pdb"}) {
        SCOPED_TRACE(fmt);
        Result r = run("predict " + in + kFast + " --output_format " + fmt + " --out-dir " + p(fmt));
        ASSERT_EQ(r.rc, 0) << r.err;
        const std::string ext = fmt == "pdb" ? ".pdb" : ".cif";
        const std::string text = io::read_file(
            pred(fmt, "protein_ligand", "protein_ligand", "protein_ligand_model_0" + ext));
        std::map<std::string, int> het;  // residue name -> HETATM records
        int conect = 0;
        std::istringstream lines(text);
        for (std::string line; std::getline(lines, line);) {
            if (line.rfind("CONECT", 0) == 0) ++conect;
            if (line.rfind("HETATM", 0) != 0) continue;
            for (const std::string res : {"LIG1", "EOH", "LIG"})
                if (line.find(" " + res + " ") != std::string::npos) ++het[res];
        }
        // C[C@H](Nc1ccccc1)/C=C/C(=O)[O-]: 14 heavy atoms, 14 bonds; ethanol: 3 atoms, 2 bonds.
        // boltz's PDB writer names every HETATM residue LIG.
        if (fmt == "pdb") {
            EXPECT_EQ(het["LIG"], 17);
            EXPECT_EQ(conect, 16);
        } else {
            EXPECT_EQ(het["LIG1"], 14);
            EXPECT_EQ(het["EOH"], 3);
        }
        const auto conf = nlohmann::json::parse(io::read_file(
            pred(fmt, "protein_ligand", "protein_ligand", "confidence_protein_ligand_model_0.json")));
        EXPECT_GT(conf["ligand_iptm"].get<double>(), 0.0);
        EXPECT_EQ(conf["chains_ptm"].size(), 3u);
    }
}

// The same seed gives the same files; another seed other coordinates.
// An MSA whose first row is not the chain's sequence folds as boltz folds it: a warning naming
// the input, the chain and the MSA, then the chain single-sequence; the structure is the one
// `msa: empty` gives.
TEST_F(Boltz2Cli, MsaNotHeadedByTheQueryWarnsAndFolds) {
    write("long.a3m", ">q\nMKTAYAA\n>s\nMKSAYAA\n");
    const std::string protein = "version: 1\nsequences:\n  - protein:\n      id: A\n"
                                "      sequence: MKTAYIAKQRQISFVKSHFSRQ\n      msa: ";
    write("t.yaml", protein + "long.a3m\n");
    fs::create_directories(p("e"));
    write("e/t.yaml", protein + "empty\n");
    const Result r = run("predict " + p("t.yaml") + kFast + " --out_dir " + p("a"));
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("warning: " + p("t.yaml") + ": chain A: the first row of its MSA (" +
                         p("long.a3m") + ":2) is not its sequence"),
              std::string::npos)
        << r.err;
    ASSERT_EQ(run("predict " + p("e/t.yaml") + kFast + " --out_dir " + p("b")).rc, 0);
    EXPECT_EQ(io::read_file(pred("a", "t", "t", "t_model_0.cif")),
              io::read_file(pred("b", "t", "t", "t_model_0.cif")));
}

TEST_F(Boltz2Cli, SeedReproducesARun) {
    const std::string in = kBoltz2 + "/inputs/heterodimer/heterodimer.yaml";
    ASSERT_EQ(run("predict " + in + kFast + " --seed 7 --out-dir " + p("a")).rc, 0);
    ASSERT_EQ(run("predict " + in + kFast + " --seed 7 --out-dir " + p("b")).rc, 0);
    ASSERT_EQ(run("predict " + in + kFast + " --seed 8 --out-dir " + p("c")).rc, 0);
    const auto file = [&](const std::string& o) {
        return io::read_file(pred(o, "heterodimer", "heterodimer", "heterodimer_model_0.cif"));
    };
    EXPECT_EQ(file("a"), file("b"));
    EXPECT_NE(file("a"), file("c"));
    // bioinfer compare reads what it wrote
    Result r = run("compare " + pred("a", "heterodimer", "heterodimer", "heterodimer_model_0.cif") + " " +
                   pred("b", "heterodimer", "heterodimer", "heterodimer_model_0.cif"), "", p("cmp.json"));
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto cmp = nlohmann::json::parse(io::read_file(p("cmp.json")));
    EXPECT_NEAR(cmp["ca_rmsd"].get<double>(), 0.0, 1e-6) << cmp.dump();
    EXPECT_NEAR(cmp["tm_score"].get<double>(), 1.0, 1e-6) << cmp.dump();
}

// --use_potentials: the physical potentials steer the sampler with the featurizer's constraints.
// With random weights the ligands come out torn apart; steered by the PoseBusters bounds,
// connections and planarity they come out several times tighter (mean bond length: about
// 20 A unsteered, 8 A steered at 50 steps). The same seed repeats the steered run exactly
// (resampling draws included).
TEST_F(Boltz2Cli, UsePotentialsSteersTheLigands) {
    const std::string in = kBoltz2 + "/inputs/protein_ligand/protein_ligand.yaml";
    const std::string steps =
        " --weights " + kBoltz2 + " --sampling_steps 50 --recycling_steps 0 --output_format pdb";
    ASSERT_EQ(run("predict " + in + steps + " --out_dir " + p("off")).rc, 0);
    Result r = run("predict " + in + steps + " --use_potentials --out_dir " + p("on"));
    ASSERT_EQ(r.rc, 0) << r.err;
    ASSERT_EQ(run("predict " + in + steps + " --use-potentials --out_dir " + p("again")).rc, 0);
    const auto file = [&](const std::string& o) {
        return pred(o, "protein_ligand", "protein_ligand", "protein_ligand_model_0.pdb");
    };
    const double off = mean_ligand_bond(file("off")), on = mean_ligand_bond(file("on"));
    std::printf("mean ligand bond: %.2f A unsteered, %.2f A steered\n", off, on);
    EXPECT_LT(on, 0.6 * off);
    EXPECT_EQ(io::read_file(file("on")), io::read_file(file("again")));
}

// The trunk's final s (N, token_s) and z (N, N, token_z) on the features predict makes for an
// input file with seed 0 (its own per-residue conformer motions), recycling_steps 1.
std::pair<Tensor, Tensor> trunk_on_predict_features(const std::string& yaml) {
    const io::ModelDir dir = io::ModelDir::open(kBoltz2);
    const auto model = boltz2::Boltz2Model::load(dir);
    const boltz2::CacheConformers conformers = boltz2::load_cache_conformers(kBoltz2);
    boltz2::FeaturizeOptions fo;
    fo.seed = 0;
    fo.conformers = &conformers.library;
    fo.mols_dir = boltz2::mols_dir_of(dir);
    boltz2::RunOptions ro;
    ro.recycling_steps = 1;
    ro.sampling_steps = 2;
    ro.confidence = false;
    boltz2::RunOutput r = model->run(boltz2::featurize(io::read_boltz_input(yaml), fo).feats, ro);
    return {r.trunk.s, r.trunk.z};
}

// --write_embeddings: predictions/<name>/embeddings_<name>.npz as boltz's writer makes it, with
// s (1, N, token_s) and z (1, N, N, token_z) float32, the shapes of the reference's final trunk
// outputs (trunk.s, trunk.z), listed in results.json; without the flag there is none. The values
// are the trunk's final representations after every recycling pass. predict draws its own
// per-residue conformer motions (the parity fixtures inject boltz's, which torch's global
// generator drew), so the values are held to the trunk run here on predict's own features (the
// trunk itself is held to the reference by test_boltz2_trunk and test_boltz2_e2e), and the
// first pass's (--recycling_steps 0) are off that bar.
TEST_F(Boltz2Cli, WriteEmbeddingsWritesTheTrunksFinalSAndZ) {
    for (const std::string c : {"monomer", "heterodimer"}) {
        SCOPED_TRACE(c);
        const std::string in = kBoltz2 + "/inputs/" + c + "/" + c + ".yaml";
        const std::string quick = " --weights " + kBoltz2 + " --sampling_steps 2";
        Result r = run("predict " + in + quick +
                       " --recycling_steps 1 --write_embeddings --out_dir " + p(c));
        ASSERT_EQ(r.rc, 0) << r.err;
        const std::string file = pred(c, c, c, "embeddings_" + c + ".npz");
        const auto npz = io::read_npz(file);  // float32 arrays only: the dtype is checked
        ASSERT_EQ(npz.size(), 2u);
        const auto ref = io::SafetensorsFile::open(kBoltz2 + "/" + c + ".safetensors");
        const auto [s, z] = trunk_on_predict_features(in);
        for (const auto& [name, want] : {std::pair<std::string, Tensor>{"s", s}, {"z", z}}) {
            SCOPED_TRACE(name);
            ASSERT_TRUE(npz.count(name));
            const io::LoadedArray& a = npz.at(name);
            EXPECT_EQ(a.shape, ref->get("trunk." + name).shape());
            const Tensor got = Tensor::of(a.data, a.shape);
            test::expect_parity(got, want, c + " " + name);
        }
        const nlohmann::json res = results(c, c);
        EXPECT_EQ(res["targets"][0]["files"]["embeddings"],
                  "predictions/" + c + "/embeddings_" + c + ".npz");
        EXPECT_EQ(res["job"]["write_embeddings"], true);
        // one pass fewer: other representations
        r = run("predict " + in + quick + " --recycling_steps 0 --write-embeddings --out_dir " +
                p(c + "_0"));
        ASSERT_EQ(r.rc, 0) << r.err;
        test::expect_fails_bar(embedding(c + "_0", c, "z"), z, c + " z after one pass");
    }
    // not asked for: not written
    const std::string in = kBoltz2 + "/inputs/monomer/monomer.yaml";
    ASSERT_EQ(run("predict " + in + kFast + " --out_dir " + p("none")).rc, 0);
    EXPECT_TRUE(fs::exists(pred("none", "monomer", "monomer", "monomer_model_0.cif")));
    EXPECT_FALSE(fs::exists(pred("none", "monomer", "monomer", "embeddings_monomer.npz")));
    // models without them refuse the option
    expect_clean_failure("predict MKV --weights " + test::kEsmFoldTiny + " --write_embeddings",
                         "[--write-embeddings] not an option of esmfold");
}

// --method: boltz's method conditioning (its featurizer's method_feature, held to boltz's in
// test_boltz2_inputs) changes the trunk; names in any case are one method; an unknown one is
// refused before anything is written, listing boltz's.
TEST_F(Boltz2Cli, MethodConditionsThePrediction) {
    const std::string in = kBoltz2 + "/inputs/monomer/monomer.yaml";
    const auto z = [&](const std::string& out) { return embedding(out, "monomer", "z"); };
    const std::string emb = kFast + " --write_embeddings --out_dir ";
    ASSERT_EQ(run("predict " + in + emb + p("xray")).rc, 0);
    Result r = run("predict " + in + " --method AFDB" + emb + p("afdb"));
    ASSERT_EQ(r.rc, 0) << r.err;
    ASSERT_EQ(run("predict " + in + " --method afdb" + emb + p("afdb2")).rc, 0);
    ASSERT_EQ(run("predict " + in + " --method 'X-ray Diffraction'" + emb + p("xray2")).rc, 0);
    test::expect_fails_bar(z("afdb"), z("xray"), "AFDB against x-ray diffraction");
    EXPECT_EQ(test::max_diff(z("afdb"), z("afdb2")), 0.0);
    EXPECT_EQ(test::max_diff(z("xray"), z("xray2")), 0.0);
    EXPECT_EQ(results("afdb", "monomer")["job"]["method"], "AFDB");
    expect_clean_failure("predict " + in + kFast + " --method cryo-em",
                         "[--method] unknown method 'cryo-em' (boltz's: afdb, boltz-1, ");
    Result bad = run("predict " + in + kFast + " --method cryo-em --out_dir " + p("bad"));
    EXPECT_NE(bad.err.find("x-ray diffraction"), std::string::npos) << bad.err;
    expect_clean_failure("predict MKV --weights " + test::kEsmFoldTiny + " --method md",
                         "[--method] not an option of esmfold");
}

// --subsample_msa / --num_subsampled_msa: each trunk pass runs the MSA module on rows drawn with
// the seed (test_boltz2_trunk holds the module to the rows drawn): 2 of the monomer's 4 rows
// change the trunk, the same seed repeats it, and keeping at least every row (boltz's 1024)
// only reorders the rows (the same trunk up to rounding).
TEST_F(Boltz2Cli, SubsampleMsaKeepsTheDrawnRows) {
    const std::string in = kBoltz2 + "/inputs/monomer/monomer.yaml";
    const auto z = [&](const std::string& out) { return embedding(out, "monomer", "z"); };
    const std::string emb = " --weights " + kBoltz2 +
                            " --sampling_steps 2 --recycling_steps 1 --write_embeddings --seed 3" +
                            " --out_dir ";
    ASSERT_EQ(run("predict " + in + emb + p("all")).rc, 0);
    Result r = run("predict " + in + " --subsample_msa --num_subsampled_msa 2" + emb + p("two"));
    ASSERT_EQ(r.rc, 0) << r.err;
    ASSERT_EQ(run("predict " + in + " --subsample-msa --num-subsampled-msa 2" + emb + p("again")).rc,
              0);
    ASSERT_EQ(run("predict " + in + " --subsample_msa" + emb + p("every")).rc, 0);
    test::expect_fails_bar(z("two"), z("all"), "2 of 4 MSA rows");
    EXPECT_EQ(test::max_diff(z("two"), z("again")), 0.0);
    test::expect_parity(z("every"), z("all"), "every row kept");
    EXPECT_EQ(results("two", "monomer")["job"]["subsample_msa"], true);
    EXPECT_EQ(results("two", "monomer")["job"]["num_subsampled_msa"], 2);
    expect_clean_failure("predict " + in + kFast + " --subsample_msa --num_subsampled_msa 0",
                         "[--num-subsampled-msa] expected 1 to");
    expect_clean_failure("predict MKV --weights " + test::kEsmFoldTiny + " --subsample_msa",
                         "[--subsample-msa]");
}

// boltz's switches that change nothing here are accepted (values checked): the same files.
TEST_F(Boltz2Cli, BoltzsNoOpOptionsAreAccepted) {
    const std::string in = kBoltz2 + "/inputs/monomer/monomer.yaml";
    ASSERT_EQ(run("predict " + in + kFast + " --out_dir " + p("a")).rc, 0);
    Result r = run("predict " + in + kFast +
                   " --num_workers 0 --preprocessing-threads 4 --no_kernels --out_dir " + p("b"));
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(io::read_file(pred("a", "monomer", "monomer", "monomer_model_0.cif")),
              io::read_file(pred("b", "monomer", "monomer", "monomer_model_0.cif")));
    expect_clean_failure("predict " + in + kFast + " --num_workers -1",
                         "[--num-workers] expected 0 to");
    expect_clean_failure("predict " + in + kFast + " --preprocessing-threads 0",
                         "[--preprocessing-threads] expected 1 to");
    expect_clean_failure("predict " + in + kFast + " --num_workers two",
                         "[--num-workers] expected an integer");
}

// The progress label counts a target's polymer residues as residues and its ligands' atoms
// (one token each) as atoms.
TEST_F(Boltz2Cli, ProgressCountsResiduesAndLigandAtoms) {
    const std::string in = kBoltz2 + "/inputs/protein_ligand/protein_ligand.yaml";
    Result r = run("predict " + in + kFast + " --log " + p("log.jsonl") + " --out_dir " + p("out"));
    ASSERT_EQ(r.rc, 0) << r.err;
    std::set<std::string> targets;
    std::istringstream lines(io::read_file(p("log.jsonl")));
    for (std::string line; std::getline(lines, line);) {
        const auto e = nlohmann::json::parse(line);
        if (e["event"] == "stage" && e["stage"] == "featurize") targets.insert(e["target"]);
    }
    // 14 residues; a 14-atom SMILES ligand and ethanol (3 atoms)
    EXPECT_EQ(targets, std::set<std::string>{"protein_ligand (14 aa, 17 ligand atoms)"});
}

// boltz's own cache (a folder with boltz2_conf.ckpt and mols/) serves as the model, given as
// --cache or found at $BOLTZ_CACHE, without any download.
TEST_F(Boltz2Cli, BoltzCacheIsTheModel) {
    const std::string in = kBoltz2 + "/inputs/monomer/monomer.yaml";
    const std::string quick = " --sampling_steps 3 --recycling_steps 0";
    Result r = run("predict " + in + " --model boltz2 --cache " + kBoltz2 + quick + " --out-dir " + p("a"));
    ASSERT_EQ(r.rc, 0) << r.err;
    r = run("predict " + in + " --model boltz2" + quick + " --out-dir " + p("b"), "BOLTZ_CACHE=" + kBoltz2);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(io::read_file(pred("a", "monomer", "monomer", "monomer_model_0.cif")),
              io::read_file(pred("b", "monomer", "monomer", "monomer_model_0.cif")));
}

// A screening job: one target per SMILES line (the receptor file with the ligand added as a
// chain), identical ligands predicted once, a bad SMILES failing alone with its line, and
// screening.csv with every ligand's scores in file order.
TEST_F(Boltz2Cli, ScreeningRunsOneTargetPerLigand) {
    write("receptor.yaml", "version: 1\nsequences:\n  - protein:\n      id: A\n"
                           "      sequence: MKTAYIAKQRQISFVKSHF\n      msa: empty\n");
    write("ligands.smi", "# name after the SMILES\nCC(=O)Oc1ccccc1C(=O)O aspirin\nCCO\n\n"
                         "CC(C broken\nCC(=O)Oc1ccccc1C(=O)O aspirin_again\n");
    Result r = run("predict " + p("receptor.yaml") + " --ligands " + p("ligands.smi") + kFast +
                   " --out-dir " + p("scr"));
    EXPECT_EQ(r.rc, 2) << r.err;  // one ligand failed
    EXPECT_NE(r.err.find("ligands.smi:5: ligand broken: chain L] invalid SMILES 'CC(C'"),
              std::string::npos) << r.err;
    const std::string dir = p("scr/boltz_results_receptor");
    for (const std::string n : {"aspirin", "lig3", "aspirin_again"})
        EXPECT_TRUE(fs::exists(dir + "/predictions/" + n + "/" + n + "_model_0.cif")) << n;
    std::istringstream csv(io::read_file(dir + "/screening.csv"));
    std::vector<std::vector<std::string>> rows;
    for (std::string line; std::getline(csv, line);) {
        std::vector<std::string> f;
        std::string x;
        std::istringstream ls(line);
        while (std::getline(ls, x, ',')) f.push_back(x);
        rows.push_back(f);
    }
    ASSERT_EQ(rows.size(), 5u);
    EXPECT_EQ(rows[0][0], "name");
    EXPECT_EQ(rows[0][6], "ligand_iptm");
    EXPECT_EQ(rows[1][0], "aspirin");
    EXPECT_EQ(rows[2][0], "lig3");
    EXPECT_EQ(rows[2][1], "CCO");
    EXPECT_EQ(rows[3][2], "failed");
    EXPECT_EQ(rows[4][2], "ok");
    // the same ligand twice is one prediction: the same scores
    for (size_t k = 3; k < 12; ++k) EXPECT_EQ(rows[4][k], rows[1][k]) << rows[0][k];
    EXPECT_GT(std::stod(rows[1][3]), 0.0);  // confidence_score
    EXPECT_GT(std::stod(rows[1][6]), 0.0);  // ligand ipTM: the ligand is its own chain
    // the ligand chain must be free, and the option is Boltz-2's
    expect_clean_failure("predict " + p("receptor.yaml") + " --ligands " + p("ligands.smi") +
                             " --ligand-chain A" + kFast,
                         "chain id 'A' is already used");
    write("dup.smi", "CCO x\nCCN x\n");
    expect_clean_failure("predict " + p("receptor.yaml") + " --ligands " + p("dup.smi") + kFast,
                         "dup.smi:2] ligand name 'x' is used twice");
}

// `properties: - affinity`: the affinity stage writes affinity_<name>.json as boltz's writer
// does (keys in its order, 4-space indent, no trailing newline), listed in results.json; a rerun
// finds it and skips the target. The --affinity_mw_correction run changes only the ensemble value.
TEST_F(Boltz2Cli, AffinityIsWrittenAsBoltzWritesIt) {
    const std::string in = kBoltz2 + "/inputs/affinity/affinity.yaml";
    const std::string fast = kFast + " --sampling_steps_affinity 2 --diffusion_samples_affinity 2";
    Result r = run("predict " + in + fast + " --out_dir " + p("aff"));
    ASSERT_EQ(r.rc, 0) << r.err;
    const std::string file = pred("aff", "affinity", "affinity", "affinity_affinity.json");
    const std::string text = io::read_file(file);
    ASSERT_FALSE(text.empty());
    EXPECT_EQ(text.substr(0, 29), "{\n    \"affinity_pred_value\": ");
    EXPECT_EQ(text.back(), '}') << "no trailing newline";
    const auto j = nlohmann::json::parse(text);
    std::vector<std::string> keys;
    for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
    // nlohmann's json sorts keys: compare the set, then the file's order by position
    EXPECT_EQ(keys.size(), 6u);
    size_t at = 0;
    for (const std::string k :
         {"affinity_pred_value", "affinity_probability_binary", "affinity_pred_value1",
          "affinity_probability_binary1", "affinity_pred_value2", "affinity_probability_binary2"}) {
        const size_t pos = text.find("\"" + k + "\":");
        ASSERT_NE(pos, std::string::npos) << k;
        EXPECT_GT(pos, at) << k << " out of boltz's order";
        at = pos;
        ASSERT_TRUE(j[k].is_number()) << k;
    }
    for (const std::string k : {"affinity_probability_binary", "affinity_probability_binary1"}) {
        EXPECT_GT(j[k].get<double>(), 0.0);
        EXPECT_LT(j[k].get<double>(), 1.0);
    }
    EXPECT_NEAR(
        j["affinity_pred_value"].get<double>(),
        (j["affinity_pred_value1"].get<double>() + j["affinity_pred_value2"].get<double>()) / 2,
        1e-6);
    const auto results =
        nlohmann::json::parse(io::read_file(p("aff/boltz_results_affinity/results.json")));
    EXPECT_EQ(results["targets"][0]["files"]["affinity"],
              "predictions/affinity/affinity_affinity.json");
    r = run("predict " + in + fast + " --out_dir " + p("aff"));
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto again =
        nlohmann::json::parse(io::read_file(p("aff/boltz_results_affinity/results.json")));
    EXPECT_EQ(again["targets"][0]["status"], "skipped");

    r = run("predict " + in + fast + " --affinity_mw_correction --out_dir " + p("mw"));
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto m = nlohmann::json::parse(
        io::read_file(pred("mw", "affinity", "affinity", "affinity_affinity.json")));
    EXPECT_EQ(m["affinity_pred_value1"], j["affinity_pred_value1"]);
    // aspirin's heavy atoms weigh 172.095 (boltz's affinity_mw)
    const double v = j["affinity_pred_value"].get<double>();
    EXPECT_NEAR(m["affinity_pred_value"].get<double>(),
                1.03525938 * v - 0.59992683 * std::pow(172.095, 0.3) + 2.83288489, 1e-5);
}

// Screening with --affinity: every ligand is the binder, screening.csv carries its affinity.
TEST_F(Boltz2Cli, ScreeningPredictsAffinity) {
    write("receptor.yaml",
          "version: 1\nsequences:\n  - protein:\n      id: A\n"
          "      sequence: MKTAYIAKQRQISFVKSHF\n      msa: empty\n");
    write("ligands.smi", "CC(=O)Oc1ccccc1C(=O)O aspirin\nCCO ethanol\n");
    Result r = run(
        "predict " + p("receptor.yaml") + " --ligands " + p("ligands.smi") + " --affinity" + kFast +
        " --sampling_steps_affinity 2 --diffusion_samples_affinity 2 --out-dir " + p("scr"));
    ASSERT_EQ(r.rc, 0) << r.err;
    const std::string dir = p("scr/boltz_results_receptor");
    for (const std::string n : {"aspirin", "ethanol"})
        EXPECT_TRUE(fs::exists(dir + "/predictions/" + n + "/affinity_" + n + ".json")) << n;
    std::istringstream csv(io::read_file(dir + "/screening.csv"));
    std::string header, row;
    std::getline(csv, header);
    std::getline(csv, row);
    EXPECT_NE(header.find(",affinity_pred_value,affinity_probability_binary,error"),
              std::string::npos)
        << header;
    const auto aff =
        nlohmann::json::parse(io::read_file(dir + "/predictions/aspirin/affinity_aspirin.json"));
    char buf[32];
    std::snprintf(buf, sizeof buf, ",%.6g,", aff["affinity_pred_value"].get<double>());
    EXPECT_NE(row.find(buf), std::string::npos) << row;
    // without --affinity the columns are empty
    r = run("predict " + p("receptor.yaml") + " --ligands " + p("ligands.smi") + kFast +
            " --out-dir " + p("plain"));
    ASSERT_EQ(r.rc, 0) << r.err;
    std::istringstream plain(io::read_file(p("plain/boltz_results_receptor/screening.csv")));
    std::getline(plain, header);
    std::getline(plain, row);
    EXPECT_NE(row.find(",,,"), std::string::npos) << row;  // both affinity columns and the error
}

// Affinity inputs boltz refuses, refused the same way; a missing affinity model before any work.
TEST_F(Boltz2Cli, BadAffinityInputIsRefusedCleanly) {
    const std::string head =
        "version: 1\nsequences:\n  - protein:\n      id: A\n      sequence: MKV\n"
        "      msa: empty\n  - ligand:\n      id: L\n      smiles: 'CCO'\n";
    write("prot.yaml", head + "properties:\n  - affinity:\n      binder: A\n");
    expect_clean_failure("predict " + p("prot.yaml") + kFast, "affinity: chain A is not a ligand");
    write("none.yaml", head + "properties:\n  - affinity:\n      binder: Q\n");
    expect_clean_failure("predict " + p("none.yaml") + kFast, "the binder 'Q' is not a chain");
    write("copies.yaml",
          "version: 1\nsequences:\n  - protein:\n      id: A\n      sequence: MKV\n"
          "      msa: empty\n  - ligand:\n      id: [L, M]\n      smiles: 'CCO'\n"
          "properties:\n  - affinity:\n      binder: L\n");
    expect_clean_failure("predict " + p("copies.yaml") + kFast, "has copies");
    write("two.yaml",
          head +
              "  - ligand:\n      id: K\n      smiles: 'CCN'\n"
              "properties:\n  - affinity:\n      binder: L\n  - affinity:\n      binder: K\n");
    expect_clean_failure("predict " + p("two.yaml") + kFast, "only one affinity binder");
    write("unknown.yaml", head + "properties:\n  - solubility:\n      binder: L\n");
    expect_clean_failure("predict " + p("unknown.yaml") + kFast, "unknown property 'solubility'");
    write("big.yaml",
          "version: 1\nsequences:\n  - protein:\n      id: A\n      sequence: MKV\n"
          "      msa: empty\n  - ligand:\n      id: L\n      smiles: '" +
              std::string(130, 'C') + "'\nproperties:\n  - affinity:\n      binder: L\n");
    expect_clean_failure("predict " + p("big.yaml") + kFast, "has 130 heavy atoms");
    // a binder the ChEMBL standardizer boltz runs excludes (a metal complex)
    write("metal.yaml", "version: 1\nsequences:\n  - protein:\n      id: A\n      sequence: MKV\n"
                        "      msa: empty\n  - ligand:\n      id: L\n      smiles: 'Cl[Pt](Cl)(N)N'\n"
                        "properties:\n  - affinity:\n      binder: L\n");
    expect_clean_failure("predict " + p("metal.yaml") + kFast,
                         "metal.yaml:7:5: chain L] SMILES 'Cl[Pt](Cl)(N)N' is excluded");
    // a model folder without boltz2_aff.ckpt: refused before weights load or anything is written
    fs::create_directories(tmp / "noaff");
    fs::copy_file(kBoltz2 + "/boltz2_conf.ckpt", tmp / "noaff" / "boltz2_conf.ckpt");
    write("ok.yaml", head + "properties:\n  - affinity:\n      binder: L\n");
    Result r = run("predict " + p("ok.yaml") + " --weights " + p("noaff") +
                   " --sampling_steps 3 --recycling_steps 0 --out-dir " + p("noaff_out"));
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("no affinity model"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(p("noaff_out/boltz_results_ok/predictions")));
    expect_clean_failure("predict " + p("ok.yaml") + kFast + " --affinity", "--affinity");
}

// One bad file in a folder fails alone (exit 2) with its own message; the others are written.
TEST_F(Boltz2Cli, BadTargetFailsAlone) {
    const std::string in = inputs("mixed");
    write("mixed/broken.yaml", "version: 1\nsequences:\n  - protein:\n      id: A\n      sequence: MK1V\n      msa: empty\n");
    write("mixed/badsmiles.yaml", "version: 1\nsequences:\n  - protein:\n      id: A\n      sequence: MKV\n"
                                  "      msa: empty\n  - ligand:\n      id: L\n      smiles: 'CC(C'\n");
    Result r = run("predict " + in + kFast + " --out-dir " + p("out"));
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_NE(r.err.find("broken.yaml"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("badsmiles.yaml:7:5: chain L] invalid SMILES 'CC(C': SMILES Parse Error"),
              std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(pred("out", "mixed", "badsmiles", "")));
    EXPECT_TRUE(fs::exists(pred("out", "mixed", "monomer", "monomer_model_0.cif")));
    EXPECT_FALSE(fs::exists(pred("out", "mixed", "broken", "")));
}

// Bad input, alone: one line naming the file (and line and column for YAML), nothing written.
TEST_F(Boltz2Cli, BadInputIsRefusedCleanly) {
    write("syntax.yaml", "version: 1\nsequences:\n  - protein: {id: A, sequence: MKV\n");
    expect_clean_failure("predict " + p("syntax.yaml") + kFast, "syntax.yaml:");
    write("nomsa.yaml", "version: 1\nsequences:\n  - protein:\n      id: A\n      sequence: MKV\n");
    expect_clean_failure("predict " + p("nomsa.yaml") + kFast, "msa");
    write("dup.yaml", "version: 1\nsequences:\n  - protein:\n      id: A\n      sequence: MKV\n      msa: empty\n"
                      "  - rna:\n      id: A\n      sequence: ACG\n");
    expect_clean_failure("predict " + p("dup.yaml") + kFast, "dup.yaml");
    // an unreadable MSA (a first row that is not the query only warns, as boltz:
    // MsaNotHeadedByTheQueryWarnsAndFolds)
    write("badmsa.yaml", "version: 1\nsequences:\n  - protein:\n      id: A\n      sequence: MKV\n      msa: other.csv\n");
    write("other.csv", "key,seq\n1,MKV\n");
    expect_clean_failure("predict " + p("badmsa.yaml") + kFast, "other.csv");
    write("ok.yaml", "version: 1\nsequences:\n  - protein:\n      id: A\n      sequence: MKV\n      msa: empty\n");
    expect_clean_failure("predict " + p("ok.yaml") + kFast + " --sampling_steps 0", "--sampling-steps");
    expect_clean_failure("predict " + p("missing.yaml") + kFast, "missing.yaml");
    write("noccd.yaml", "version: 1\nsequences:\n  - protein:\n      id: A\n      sequence: MKV\n"
                        "      msa: empty\n  - ligand:\n      id: L\n      ccd: XYZ\n");
    expect_clean_failure("predict " + p("noccd.yaml") + kFast, "CCD component XYZ not found");
    write("notemplate.yaml", "version: 1\nsequences:\n  - protein:\n      id: A\n      sequence: MKV\n"
                             "      msa: empty\ntemplates:\n  - cif: gone.cif\n");
    expect_clean_failure("predict " + p("notemplate.yaml") + kFast, "template gone: gone.cif does not exist");
    write("badchain.yaml", "version: 1\nsequences:\n  - protein:\n      id: A\n      sequence: MKV\n"
                           "      msa: empty\ntemplates:\n  - cif: " +
                               kBoltz2 + "/inputs/template/7roa.cif\n    template_id: Z\n");
    expect_clean_failure("predict " + p("badchain.yaml") + kFast, "chain Z is not a protein chain");
    // Boltz-2's options do not apply to ESMFold
    expect_clean_failure("predict MKV --weights " + test::kEsmFoldTiny + " --seed 3", "--seed");
}

}  // namespace
