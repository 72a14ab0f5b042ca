// Boltz-2 outputs against the files the boltz package's own writer made from the same numbers
// (tests/fixtures/boltz2_tiny/outputs, tools/reference/make_boltz2_output_fixtures.py): names
// and ranking, byte-equal structures and confidence JSON, npz contents, read-back through gemmi
// and the `bioinfer compare` reader, and no partial output on failure.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <gemmi/mmread.hpp>
#include <nlohmann/json.hpp>
#include <set>

#include "bioinfer/error.h"
#include "io/atomic_file.h"
#include "io/boltz_outputs.h"
#include "io/npy.h"
#include "io/structure.h"

namespace fs = std::filesystem;
using namespace bioinfer;
using nlohmann::json;

namespace {

const std::string kOutputs = std::string(BIOINFER_FIXTURES) + "/boltz2_tiny/outputs";

struct Case {
    std::string name;
    io::BoltzStructureInfo info;
    std::vector<io::BoltzSample> samples;
};

std::vector<float> floats(const json& j) {
    std::vector<float> v;
    for (const auto& x : j) {
        if (x.is_array())
            for (const auto& y : x) v.push_back(y.get<float>());
        else
            v.push_back(x.get<float>());
    }
    return v;
}

Case load_case(const std::string& dir) {
    const json j = json::parse(io::read_file(kOutputs + "/" + dir + "/input.json"));
    Case c;
    c.name = j["name"];
    io::BoltzStructureInfo& s = c.info;
    for (size_t ci = 0; ci < j["chains"].size(); ++ci) {
        const json& ch = j["chains"][ci];
        s.chain_names.push_back(ch["name"]);
        s.chain_types.push_back(bio::MoleculeType(ch["mol_type"].get<int>()));
        s.chain_entities.push_back(ch["entity_id"]);
        const int r0 = ch["res_idx"], rn = ch["res_num"];
        for (int r = r0; r < r0 + rn; ++r) {
            const json& res = j["residues"][size_t(r)];
            s.residue_chains.push_back(int32_t(ci));
            s.residue_names.push_back(res["name"]);
            s.residue_numbers.push_back(res["res_idx"].get<int>() + 1);
            const int a0 = res["atom_idx"], an = res["atom_num"];
            for (int a = a0; a < a0 + an; ++a) {
                s.atom_residues.push_back(int32_t(s.residue_names.size() - 1));
                s.atom_names.push_back(j["atoms"][size_t(a)]);
            }
        }
    }
    for (const auto& b : j["bonds"]) s.bonds.push_back({b[0].get<int32_t>(), b[1].get<int32_t>()});
    for (const auto& js : j["samples"]) {
        io::BoltzSample smp;
        smp.coords = floats(js["coords"]);
        smp.plddt = floats(js["plddt"]);
        smp.pae = floats(js["pae"]);
        smp.pde = floats(js["pde"]);
        io::BoltzConfidence& cf = smp.confidence;
        // the JSON holds each float32 as its double: converting back is exact
        cf.confidence_score = js["confidence_score"].get<float>();
        cf.ptm = js["ptm"].get<float>();
        cf.iptm = js["iptm"].get<float>();
        cf.ligand_iptm = js["ligand_iptm"].get<float>();
        cf.protein_iptm = js["protein_iptm"].get<float>();
        cf.complex_plddt = js["complex_plddt"].get<float>();
        cf.complex_iplddt = js["complex_iplddt"].get<float>();
        cf.complex_pde = js["complex_pde"].get<float>();
        cf.complex_ipde = js["complex_ipde"].get<float>();
        for (const auto& row : js["pair_chains_iptm"]) cf.pair_chains_iptm.push_back(floats(row));
        c.samples.push_back(std::move(smp));
    }
    return c;
}

std::set<std::string> listing(const fs::path& dir) {
    std::set<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file()) out.insert(fs::relative(e.path(), dir).string());
    return out;
}

struct BoltzOutputs : ::testing::Test {
    fs::path tmp;
    void SetUp() override {
        tmp = fs::temp_directory_path() /
              ("bioinfer_boltz_out_" + std::to_string(getpid()) + "_" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(tmp);
        fs::create_directories(tmp);
    }
    void TearDown() override {
        std::error_code ec;
        fs::permissions(tmp, fs::perms::owner_all, fs::perm_options::add, ec);
        fs::remove_all(tmp, ec);
    }
};

const char* kCases[] = {"protein_rna", "protein_lig_rna", "multimer_dna"};

}  // namespace

// Every file boltz writes, under the same name (rank by confidence_score), byte for byte; the
// npz files (compressed with a time stamp by numpy) hold the same float32 arrays.
TEST_F(BoltzOutputs, MatchBoltzWriterByteForByte) {
    for (const std::string dir : kCases) {
        const Case c = load_case(dir);
        for (const std::string fmt : {"mmcif", "pdb"}) {
            SCOPED_TRACE(dir + " " + fmt);
            const fs::path preds = tmp / dir / fmt / "predictions";
            const std::string got_dir = io::write_boltz_prediction(
                preds.string(), c.name, c.info, c.samples, {.output_format = fmt});
            EXPECT_EQ(got_dir, (preds / c.name).string());
            const fs::path ref_dir = fs::path(kOutputs) / dir / fmt / "predictions" / c.name;
            std::set<std::string> want = listing(ref_dir);
            for (int k = 0; k < 2; ++k)
                for (const char* kind : {"plddt_", "pae_", "pde_"})
                    want.insert(std::string(kind) + c.name + "_model_" + std::to_string(k) +
                                ".npz");
            EXPECT_EQ(listing(preds), [&] {
                std::set<std::string> w;
                for (const auto& f : want) w.insert(c.name + "/" + f);
                return w;
            }());
            for (const auto& f : listing(ref_dir))
                EXPECT_EQ(io::read_file((preds / c.name / f).string()),
                          io::read_file((ref_dir / f).string()))
                    << f;
            // rank 0 is the sample with the higher confidence_score (sample 1 in the fixture)
            const std::vector<int32_t> rank = io::boltz_ranks(c.samples);
            ASSERT_EQ(rank, (std::vector<int32_t>{1, 0}));
            for (size_t k = 0; k < c.samples.size(); ++k) {
                const std::string sfx = c.name + "_model_" + std::to_string(rank[k]) + ".npz";
                const size_t T = c.samples[k].plddt.size();
                auto plddt = io::read_npz((preds / c.name / ("plddt_" + sfx)).string());
                ASSERT_EQ(plddt.size(), 1u);
                EXPECT_EQ(plddt.at("plddt").shape, (Shape{int64_t(T)}));
                EXPECT_EQ(plddt.at("plddt").data, c.samples[k].plddt);
                auto pae = io::read_npz((preds / c.name / ("pae_" + sfx)).string());
                EXPECT_EQ(pae.at("pae").shape, (Shape{int64_t(T), int64_t(T)}));
                EXPECT_EQ(pae.at("pae").data, c.samples[k].pae);
                auto pde = io::read_npz((preds / c.name / ("pde_" + sfx)).string());
                EXPECT_EQ(pde.at("pde").data, c.samples[k].pde);
            }
        }
    }
}

// The confidence JSON's keys, in boltz's order, and values equal to the float32 numbers.
TEST_F(BoltzOutputs, ConfidenceJsonKeysAndValues) {
    const Case c = load_case("protein_lig_rna");
    const json j = json::parse(io::boltz_confidence_json(c.samples[0].confidence));
    std::vector<std::string> keys;
    for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
    std::sort(keys.begin(), keys.end());
    EXPECT_EQ(keys,
              (std::vector<std::string>{"chains_ptm", "complex_ipde", "complex_iplddt",
                                        "complex_pde", "complex_plddt", "confidence_score", "iptm",
                                        "ligand_iptm", "pair_chains_iptm", "protein_iptm", "ptm"}));
    EXPECT_EQ(j["ptm"].get<double>(), double(c.samples[0].confidence.ptm));
    ASSERT_EQ(j["chains_ptm"].size(), 3u);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(j["chains_ptm"][std::to_string(i)].get<double>(),
                  double(c.samples[0].confidence.pair_chains_iptm[size_t(i)][size_t(i)]));
        for (int k = 0; k < 3; ++k)
            EXPECT_EQ(j["pair_chains_iptm"][std::to_string(i)][std::to_string(k)].get<double>(),
                      double(c.samples[0].confidence.pair_chains_iptm[size_t(i)][size_t(k)]));
    }
}

// Python's repr, as json.dumps writes floats.
TEST(BoltzOutputsFormat, PythonFloatRepr) {
    EXPECT_EQ(io::python_float_repr(double(0.1f)), "0.10000000149011612");
    EXPECT_EQ(io::python_float_repr(1.0), "1.0");
    EXPECT_EQ(io::python_float_repr(-2.5), "-2.5");
    EXPECT_EQ(io::python_float_repr(0.0), "0.0");
    EXPECT_EQ(io::python_float_repr(1e-4), "0.0001");
    EXPECT_EQ(io::python_float_repr(1e-5), "1e-05");
    EXPECT_EQ(io::python_float_repr(1.5e-7), "1.5e-07");
    EXPECT_EQ(io::python_float_repr(123456789.0), "123456789.0");
    EXPECT_EQ(io::python_float_repr(1e16), "1e+16");
    EXPECT_EQ(io::python_float_repr(1.25e100), "1.25e+100");
    EXPECT_EQ(io::python_float_repr(9999999999999998.0), "9999999999999998.0");
}

// boltz's element rule: the digit-free name through its ambiguous-name table, else the first
// letter (expected values from boltz.data.write.pdb's rule run on the same names).
TEST(BoltzOutputsFormat, ElementFromAtomName) {
    EXPECT_EQ(io::boltz_element("CA", "ALA"), "C");
    EXPECT_EQ(io::boltz_element("CA", "CA"), "CA");
    EXPECT_EQ(io::boltz_element("CL5", "LIG1"), "CL");
    EXPECT_EQ(io::boltz_element("O5'", "A"), "O");
    EXPECT_EQ(io::boltz_element("SE", "MSE"), "SE");
    EXPECT_EQ(io::boltz_element("CL1", "TLC"), "C");  // per-residue exceptions of the table
    EXPECT_EQ(io::boltz_element("ZN", "ZN"), "ZN");
    EXPECT_EQ(io::boltz_element("BR2", "LIG1"), "BR");
    EXPECT_EQ(io::boltz_element("FE", "HEM"), "FE");
}

TEST(BoltzOutputsFormat, ConfidenceScoreFallsBackToPtmWhenAllIptmAreZero) {
    EXPECT_EQ(io::boltz_confidence_scores({0.5f, 0.25f}, {0.f, 0.f}, {1.f, 0.5f}),
              (std::vector<float>{(4 * 0.5f + 1.f) / 5, (4 * 0.25f + 0.5f) / 5}));
    EXPECT_EQ(io::boltz_confidence_scores({0.5f}, {0.75f}, {1.f}),
              (std::vector<float>{(4 * 0.5f + 0.75f) / 5}));
}

// gemmi reads the mmCIF and PDB back: coordinates, B-factors = 100 x pLDDT, chain ids, residue
// names and numbers, atom names and elements; the `bioinfer compare` reader takes the protein.
TEST_F(BoltzOutputs, ReadBackThroughGemmiAndCompareReader) {
    const Case c = load_case("protein_lig_rna");
    for (const std::string fmt : {"mmcif", "pdb"}) {
        SCOPED_TRACE(fmt);
        const fs::path preds = tmp / fmt;
        io::write_boltz_prediction(preds.string(), c.name, c.info, c.samples,
                                   {.output_format = fmt});
        // sample 0 has rank 1
        const std::string path =
            (preds / c.name / (c.name + "_model_1" + (fmt == "pdb" ? ".pdb" : ".cif"))).string();
        const gemmi::Structure st = gemmi::read_structure_file(path);
        ASSERT_EQ(st.models.size(), 1u);
        const auto& smp = c.samples[0];
        size_t a = 0;
        std::vector<std::string> chains;
        // token of each atom: polymer residues one each, ligand atoms one each
        size_t token = 0;
        for (const gemmi::Chain& ch : st.models[0].chains) {
            chains.push_back(ch.name);
            for (const gemmi::Residue& r : ch.residues) {
                const size_t ri = size_t(c.info.atom_residues[a]);
                const bool lig = c.info.chain_types[size_t(c.info.residue_chains[ri])] ==
                                 bio::MoleculeType::Ligand;
                EXPECT_EQ(r.name, lig && fmt == "pdb" ? "LIG" : c.info.residue_names[ri]);
                EXPECT_EQ(*r.seqid.num, c.info.residue_numbers[ri]);
                for (const gemmi::Atom& at : r.atoms) {
                    ASSERT_LT(a, c.info.num_atoms());
                    EXPECT_EQ(at.name, c.info.atom_names[a]);
                    EXPECT_EQ(at.element.uname(),
                              io::boltz_element(c.info.atom_names[a], c.info.residue_names[ri]));
                    const double tol = fmt == "pdb" ? 6e-4 : 6e-6;
                    EXPECT_NEAR(at.pos.x, smp.coords[3 * a], tol);
                    EXPECT_NEAR(at.pos.y, smp.coords[3 * a + 1], tol);
                    EXPECT_NEAR(at.pos.z, smp.coords[3 * a + 2], tol);
                    // boltz writes pLDDT (0-1) x 100, rounded to 2 (PDB) or 3 (mmCIF) decimals
                    EXPECT_NEAR(at.b_iso, 100 * smp.plddt[token], fmt == "pdb" ? 5e-3 : 5e-4);
                    ++a;
                    if (lig) ++token;
                }
                if (!lig) ++token;
            }
        }
        EXPECT_EQ(a, c.info.num_atoms());
        EXPECT_EQ(token, c.info.num_plddt_tokens());
        EXPECT_EQ(chains, c.info.chain_names);
        // the compare reader: the protein residues with their CA and pLDDT
        const std::vector<io::CaResidue> ca = io::read_ca_residues(path);
        ASSERT_EQ(ca.size(), 4u);
        EXPECT_EQ(ca[0].chain, "A");
        EXPECT_EQ(ca[0].name, "MET");
        EXPECT_EQ(ca[1].letter, 'K');
        EXPECT_NEAR(ca[3].b_factor, 100 * smp.plddt[3], 5e-3);
    }
}

// A failed write leaves nothing: not the folder, not a staging folder, not a temporary file;
// an earlier output of the same name stays as it was.
TEST_F(BoltzOutputs, NoPartialOutputOnFailure) {
    Case c = load_case("protein_rna");
    const fs::path preds = tmp / "predictions";
    // wrong PAE size in the second sample: refused before anything is written
    Case bad = c;
    bad.samples[1].pae.pop_back();
    EXPECT_THROW(io::write_boltz_prediction(preds.string(), c.name, bad.info, bad.samples), Error);
    EXPECT_TRUE(!fs::exists(preds) || fs::is_empty(preds));
    // an unwritable predictions folder
    fs::create_directories(preds);
    if (::geteuid() != 0) {
        fs::permissions(preds, fs::perms::owner_read | fs::perms::owner_exec);
        EXPECT_THROW(io::write_boltz_prediction(preds.string(), c.name, c.info, c.samples), Error);
        fs::permissions(preds, fs::perms::owner_all);
        EXPECT_TRUE(fs::is_empty(preds));
    }
    // a write failing after the staging folder exists (files over a size limit fail with
    // EFBIG): the staging folder goes, the earlier output stays
    const std::string first = io::write_boltz_prediction(preds.string(), c.name, c.info, c.samples);
    const std::set<std::string> before = listing(first);
    const std::string before_cif = io::read_file(first + "/" + c.name + "_model_0.cif");
    Case other = c;
    other.samples[0].coords[0] += 1.0f;
    {
        struct rlimit old_limit {};
        ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
        const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
        struct rlimit small = old_limit;
        small.rlim_cur = 4096;  // the npz and JSON files fit, the structures do not
        ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
        EXPECT_THROW(io::write_boltz_prediction(preds.string(), c.name, other.info, other.samples),
                     Error);
        ::setrlimit(RLIMIT_FSIZE, &old_limit);
        std::signal(SIGXFSZ, old_handler);
    }
    EXPECT_EQ(listing(first), before);
    EXPECT_EQ(io::read_file(first + "/" + c.name + "_model_0.cif"), before_cif);
    std::set<std::string> top;
    for (const auto& e : fs::directory_iterator(preds)) top.insert(e.path().filename().string());
    EXPECT_EQ(top, (std::set<std::string>{c.name}));
    // and a good rewrite replaces it
    io::write_boltz_prediction(preds.string(), c.name, other.info, other.samples);
    EXPECT_NE(io::read_file(first + "/" + c.name + "_model_1.cif"), before_cif);
}

TEST(BoltzOutputsFormat, ResultsDirIsNamedAfterTheInputStem) {
    EXPECT_EQ(io::boltz_results_dir("out", "inputs/complex.yaml"), "out/boltz_results_complex");
    EXPECT_EQ(io::boltz_results_dir("/x/y", "/a/b.fasta"), "/x/y/boltz_results_b");
}

// The comparison has teeth: pLDDT handed over already in 0-100, or a ligand's atoms given one
// token for the residue, change the files; the ranking follows confidence_score, not position.
TEST_F(BoltzOutputs, WrongScaleOrTokensDifferAndRankIgnoresOrder) {
    const Case c = load_case("protein_lig_rna");
    const fs::path ref = fs::path(kOutputs) / "protein_lig_rna";
    const std::string ref_pdb =
        io::read_file((ref / "pdb/predictions" / c.name / (c.name + "_model_1.pdb")).string());
    const std::string ref_cif =
        io::read_file((ref / "mmcif/predictions" / c.name / (c.name + "_model_1.cif")).string());
    const io::BoltzSample& s0 = c.samples[0];  // rank 1
    ASSERT_EQ(io::boltz_pdb(c.info, s0.coords, s0.plddt), ref_pdb);
    ASSERT_EQ(io::boltz_mmcif(c.info, s0.coords, s0.plddt), ref_cif);
    std::vector<float> scaled = s0.plddt;
    for (float& v : scaled) v *= 100;
    EXPECT_NE(io::boltz_pdb(c.info, s0.coords, scaled), ref_pdb);
    EXPECT_NE(io::boltz_mmcif(c.info, s0.coords, scaled), ref_cif);
    // the ligand chain (5 atoms) as one token: its atoms would all take one pLDDT
    io::BoltzStructureInfo as_polymer = c.info;
    as_polymer.chain_types[1] = bio::MoleculeType::Protein;
    std::vector<float> fewer(s0.plddt.begin(), s0.plddt.end() - 4);
    EXPECT_NE(io::boltz_pdb(as_polymer, s0.coords, fewer), ref_pdb);
    // a pLDDT of the wrong length is refused
    EXPECT_THROW(io::boltz_pdb(c.info, s0.coords, fewer), Error);
    // samples handed over in the other order: the same files
    const std::vector<io::BoltzSample> reversed{c.samples[1], c.samples[0]};
    const std::string dir = io::write_boltz_prediction((tmp / "p").string(), c.name, c.info,
                                                       reversed, {.output_format = "pdb"});
    EXPECT_EQ(io::read_file(dir + "/" + c.name + "_model_1.pdb"), ref_pdb);
}
