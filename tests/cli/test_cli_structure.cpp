// CLI tests of structure prediction and comparison: `bioinfer predict` on the tiny ESMFold
// fixture must write structures and confidences matching transformers' EsmForProteinFolding;
// `bioinfer compare` must give RMSD 0 / TM 1 / lDDT 1 for a moved copy of a real structure and
// the RMSD a known perturbation implies.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <sstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "io/structure.h"
#include "runtime/structure_compare.h"

using namespace bioinfer;
using test::Result;
namespace fs = std::filesystem;

namespace {

const std::string& kFold = test::kEsmFoldTiny;
const std::string kData = std::string(BIOINFER_PUBLIC_DATA) + "/structures";

struct Predict : test::CliTest {
    std::string cases_fasta() const { return fixture_fasta(kFold); }
};

Tensor fold_ref(const std::string& key) {
    static const auto ref = io::SafetensorsFile::open(kFold + "/reference.safetensors");
    return ref->get(key).to_f32();
}

// Reference row of each written residue: linker residues are not written.
std::vector<int64_t> kept_rows(const std::string& id) {
    const Tensor linker = fold_ref(id + ".linker_mask");
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < linker.numel(); ++i)
        if (linker.f32()[i] != 0.0f) rows.push_back(i);
    return rows;
}

}  // namespace

TEST_F(Predict, StructuresAndConfidencesMatchFixtures) {
    const std::string fa = cases_fasta();
    for (const std::string fmt : {"pdb", "cif"}) {
        const std::string out = p("out_" + fmt);
        Result r = run("predict " + fa + " --weights " + kFold + " --out-dir " + out +
                       " --output-format " + fmt + " --write-pae");
        ASSERT_EQ(r.rc, 0) << r.err;
        for (const std::string id : {"mini", "unk", "dimer"}) {
            SCOPED_TRACE(id + " " + fmt);
            const auto rows = kept_rows(id);
            // Unknown residues (X) have no atoms in ESMFold's output, so no residue in the file.
            std::vector<int64_t> with_atoms;
            const Tensor aatype = fold_ref(id + ".aatype");
            for (int64_t i : rows)
                if (aatype.f32()[i] != 20.0f) with_atoms.push_back(i);
            const auto res = io::read_ca_residues(out + "/" + id + "." + fmt);
            ASSERT_EQ(res.size(), with_atoms.size());
            const Tensor atom37 = fold_ref(id + ".atom37"), plddt = fold_ref(id + ".plddt");
            double mean = 0, var = 0;
            for (int64_t i = 0; i < atom37.numel(); ++i) mean += atom37.f32()[i];
            mean /= double(atom37.numel());
            for (int64_t i = 0; i < atom37.numel(); ++i) var += std::pow(atom37.f32()[i] - mean, 2);
            const double tol = 1e-3 * std::sqrt(var / double(atom37.numel())) + 1e-3;  // + file rounding
            for (size_t k = 0; k < with_atoms.size(); ++k) {
                const int64_t i = with_atoms[k];
                for (int c = 0; c < 3; ++c)
                    EXPECT_NEAR(res[k].ca[size_t(c)], atom37.f32()[(i * 37 + 1) * 3 + c], tol);
                EXPECT_NEAR(res[k].b_factor, 100.0 * plddt.f32()[i * 37 + 1], 0.1 + 0.006);
            }
            // chains: each numbered from 1
            const bool dimer = id == "dimer";
            EXPECT_EQ(res.front().chain, "A");
            EXPECT_EQ(res.back().chain, dimer ? "B" : "A");
            EXPECT_EQ(res.back().number, dimer ? 9 : int32_t(rows.size()));  // "unk" ends with P
            const auto conf = nlohmann::json::parse(io::read_file(out + "/" + id + ".json"));
            EXPECT_NEAR(conf["ptm"].get<double>(), fold_ref(id + ".ptm").f32()[0], 1e-4);
            ASSERT_EQ(conf["plddt"].size(), rows.size());
            double sum = 0, n = 0;
            const Tensor exists = fold_ref(id + ".atom37_exists");
            for (size_t k = 0; k < rows.size(); ++k) {
                EXPECT_NEAR(conf["plddt"][k].get<double>(), 100.0 * plddt.f32()[rows[k] * 37 + 1], 0.1);
                for (int a = 0; a < 37; ++a) {
                    sum += 100.0 * plddt.f32()[rows[k] * 37 + a] * exists.f32()[rows[k] * 37 + a];
                    n += exists.f32()[rows[k] * 37 + a];
                }
            }
            EXPECT_NEAR(conf["mean_plddt"].get<double>(), sum / n, 0.1);
            EXPECT_EQ(conf["chains"].size(), dimer ? 2u : 1u);
            // PAE without the linker rows and columns
            const auto npz = io::read_file(out + "/" + id + "_pae.npy");
            const Tensor pae = fold_ref(id + ".pae");
            const int64_t L = pae.size(0), m = int64_t(rows.size());
            ASSERT_EQ(npz.size(), 128 + size_t(m * m) * 4);
            const float* got = reinterpret_cast<const float*>(npz.data() + 128);
            double worst = 0;
            for (int64_t a = 0; a < m; ++a)
                for (int64_t b = 0; b < m; ++b)
                    worst = std::max(worst, double(std::fabs(got[a * m + b] - pae.f32()[rows[size_t(a)] * L + rows[size_t(b)]])));
            EXPECT_LE(worst, 1e-3);
            EXPECT_TRUE(fs::file_size(out + "/" + id + "_plddt_pae.png") > 1000);
        }
    }
}

TEST_F(Predict, BadInputsFailCleanly) {
    const std::string w = " --weights " + kFold;
    expect_clean_failure("predict MKV1LL" + w, "not a protein sequence");
    write("bad.fa", ">b\nMK*VL\n");
    expect_clean_failure("predict " + p("bad.fa") + w, "record 'b'");
    write("chain.fa", ">a\nMKVLL::GGA\n");
    expect_clean_failure("predict " + p("chain.fa") + w, "chain 2 is empty");
    write("empty.fa", ">a\n\n");
    expect_clean_failure("predict " + p("empty.fa") + w, "empty");
    // a target beyond the memory budget is refused before anything runs, with the size it needs
    write("long.fa", ">long\n" + std::string(3000, 'A') + "\n");
    expect_clean_failure("predict " + p("long.fa") + w + " --max-memory 1", "GiB to fold");
    expect_clean_failure("predict MKV --weights " + std::string(BIOINFER_FIXTURES) + "/esm2_tiny",
                         "neither ESMFold");
    expect_clean_failure("predict MKV" + w + " --output-format xyz", "--output-format");
    expect_clean_failure("predict MKV" + w + " --num-recycles -3", "--num-recycles");
}

namespace {

// CA-only copy of residues (transformed by f) written as PDB; chain and numbering as given.
using Move = std::function<std::array<double, 3>(size_t, const std::array<double, 3>&)>;

void write_ca(const std::vector<io::CaResidue>& res, const std::string& path, const Move& f,
              const std::string& chain_override = "", int number_offset = 0) {
    std::vector<io::AtomSite> atoms;
    for (size_t i = 0; i < res.size(); ++i) {
        const io::CaResidue& r = res[i];
        const auto q = f(i, r.ca);
        atoms.push_back({chain_override.empty() ? r.chain : chain_override, r.number + number_offset,
                         r.name, "CA", "C", float(q[0]), float(q[1]), float(q[2]), 0.0f});
    }
    io::write_structure(atoms, "copy", "pdb", path);
}

std::array<double, 3> rotate_translate(size_t, const std::array<double, 3>& p) {
    // rotation by 0.7 rad about (1, 2, 2)/3, then a shift
    const double ux = 1 / 3.0, uy = 2 / 3.0, uz = 2 / 3.0, c = std::cos(0.7), s = std::sin(0.7);
    const double R[9] = {c + ux * ux * (1 - c),      ux * uy * (1 - c) - uz * s, ux * uz * (1 - c) + uy * s,
                         uy * ux * (1 - c) + uz * s, c + uy * uy * (1 - c),      uy * uz * (1 - c) - ux * s,
                         uz * ux * (1 - c) - uy * s, uz * uy * (1 - c) + ux * s, c + uz * uz * (1 - c)};
    return {R[0] * p[0] + R[1] * p[1] + R[2] * p[2] + 12.5, R[3] * p[0] + R[4] * p[1] + R[5] * p[2] - 40.0,
            R[6] * p[0] + R[7] * p[1] + R[8] * p[2] + 3.25};
}

nlohmann::json compare_json(const test::CliTest& t, const std::string& a, const std::string& b,
                            const std::string& extra = "") {
    Result r = t.run("compare " + a + " " + b + extra, "", t.p("cmp.json"));
    EXPECT_EQ(r.rc, 0) << r.err;
    return nlohmann::json::parse(io::read_file(t.p("cmp.json")));
}

}  // namespace

using Compare = test::CliTest;

TEST_F(Compare, MovedCopyIsIdentical) {
    for (const std::string f : {"ubiquitin.pdb", "hemoglobin.cif", "prot.cif"}) {
        SCOPED_TRACE(f);
        const auto res = io::read_ca_residues(kData + "/" + f);
        write_ca(res, p("moved.pdb"), rotate_translate);
        const auto j = compare_json(*this, p("moved.pdb"), kData + "/" + f);
        EXPECT_EQ(j["matched_by"], "number");
        EXPECT_EQ(j["aligned"].get<int64_t>(), int64_t(res.size()));
        EXPECT_LT(j["ca_rmsd"].get<double>(), 1e-3);  // coordinates written to 1e-3 A
        EXPECT_NEAR(j["tm_score"].get<double>(), 1.0, 1e-6);
        EXPECT_NEAR(j["ca_lddt"].get<double>(), 1.0, 1e-12);
    }
}

TEST_F(Compare, KnownPerturbationGivesKnownRmsd) {
    // Scaling about the centroid by (1 + s): the optimal superposition is the identity, so the
    // RMSD is s times the radius of gyration; every distance changes by s * d < 0.5 A within the
    // 15 A lDDT radius when s = 0.02, so lDDT stays 1.
    const auto res = io::read_ca_residues(kData + "/ubiquitin.pdb");
    std::array<double, 3> c{0, 0, 0};
    for (auto& r : res)
        for (int k = 0; k < 3; ++k) c[size_t(k)] += r.ca[size_t(k)] / double(res.size());
    double rg2 = 0;
    for (auto& r : res)
        for (int k = 0; k < 3; ++k) rg2 += std::pow(r.ca[size_t(k)] - c[size_t(k)], 2) / double(res.size());
    const double s = 0.02;
    write_ca(res, p("scaled.pdb"), [&](size_t i, const std::array<double, 3>& q) {
        std::array<double, 3> o;
        for (int k = 0; k < 3; ++k) o[size_t(k)] = c[size_t(k)] + (1 + s) * (q[size_t(k)] - c[size_t(k)]);
        return rotate_translate(i, o);
    });
    const auto j = compare_json(*this, p("scaled.pdb"), kData + "/ubiquitin.pdb");
    EXPECT_NEAR(j["ca_rmsd"].get<double>(), s * std::sqrt(rg2), 2e-3);
    EXPECT_NEAR(j["ca_lddt"].get<double>(), 1.0, 1e-12);
    EXPECT_LT(j["tm_score"].get<double>(), 1.0);
    EXPECT_GT(j["tm_score"].get<double>(), 0.9);

    // One residue moved 6 A along x: only the pairs with that residue lose lDDT, by the
    // thresholds their distance change crosses (computed here from the coordinates written).
    write_ca(res, p("moved1.pdb"), [&](size_t i, const std::array<double, 3>& q) {
        std::array<double, 3> o = q;
        if (i == 30) o[0] += 6.0;
        return o;
    });
    const auto moved = io::read_ca_residues(p("moved1.pdb"));
    const auto dist = [](const std::array<double, 3>& a, const std::array<double, 3>& b) {
        return std::sqrt(std::pow(a[0] - b[0], 2) + std::pow(a[1] - b[1], 2) + std::pow(a[2] - b[2], 2));
    };
    double kept = 0;
    long pairs = 0;
    for (size_t a = 0; a < res.size(); ++a)
        for (size_t b = 0; b < res.size(); ++b) {
            const double dt = dist(res[a].ca, res[b].ca);
            if (a == b || dt >= 15.0) continue;
            ++pairs;
            const double e = std::fabs(dist(moved[a].ca, moved[b].ca) - dt);
            kept += 0.25 * ((e < 0.5) + (e < 1.0) + (e < 2.0) + (e < 4.0));
        }
    const auto j1 = compare_json(*this, p("moved1.pdb"), kData + "/ubiquitin.pdb");
    EXPECT_NEAR(j1["ca_lddt"].get<double>(), kept / double(pairs), 1e-12);
    EXPECT_LT(j1["ca_lddt"].get<double>(), 0.99);
}

TEST_F(Compare, SequenceMatchingWhenNumberingDiffers) {
    const auto res = io::read_ca_residues(kData + "/ubiquitin.pdb");
    // renamed chain, numbering shifted by 100, first 5 residues missing
    const std::vector<io::CaResidue> part(res.begin() + 5, res.end());
    write_ca(part, p("renumbered.pdb"), rotate_translate, "Z", 100);
    const auto j = compare_json(*this, p("renumbered.pdb"), kData + "/ubiquitin.pdb");
    EXPECT_EQ(j["matched_by"], "sequence");
    EXPECT_EQ(j["aligned"].get<int64_t>(), int64_t(part.size()));
    EXPECT_EQ(j["identical"].get<int64_t>(), int64_t(part.size()));
    EXPECT_LT(j["ca_rmsd"].get<double>(), 1e-3);
    // TM-score normalised by the truth's 76 residues: 71 perfect pairs
    EXPECT_NEAR(j["tm_score"].get<double>(), double(part.size()) / double(res.size()), 1e-6);
    EXPECT_LT(j["ca_lddt"].get<double>(), 1.0);
    // forced numbering finds no pairs and says so
    Result r = run("compare " + p("renumbered.pdb") + " " + kData + "/ubiquitin.pdb --match number");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("pair up"), std::string::npos) << r.err;
    r = run("compare " + p("nothing.pdb") + " " + kData + "/ubiquitin.pdb");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("nothing.pdb"), std::string::npos) << r.err;
}

TEST_F(Predict, BenchFoldPrintsStageTimes) {
    write("t.fa", ">t1\nMKTAYIAKQRQISFVKSHF\n>t2\nGSHMKLAGKD:WYCPAAG\n");
    Result r = run("bench fold " + p("t.fa") + " --weights " + kFold + " --repeat 2", "", p("out.jsonl"));
    ASSERT_EQ(r.rc, 0) << r.err;
    std::istringstream lines(io::read_file(p("out.jsonl")));
    std::string line;
    int n = 0;
    for (; std::getline(lines, line); ++n) {
        const auto j = nlohmann::json::parse(line);
        EXPECT_EQ(j["impl"], "bioinfer");
        EXPECT_EQ(j["length"].get<int64_t>(), n == 0 ? 19 : 10 + 25 + 7);
        double stages = 0;
        for (auto& [k, v] : j["stages_s"].items()) stages += v.get<double>();
        EXPECT_GT(j["seconds"].get<double>(), 0.0);
        EXPECT_LE(stages, j["seconds"].get<double>() * 1.01);
        for (const char* op : {"tri_mul_out", "tri_mul_in", "tri_att_start", "tri_att_end", "mlp_pair"})
            EXPECT_GT(j["trunk_ops_s"][op].get<double>(), 0.0) << op;
        EXPECT_GT(j["peak_rss_mb"].get<double>(), 1.0);
    }
    EXPECT_EQ(n, 2);
}

// --model esmfold finds facebook/esmfold_v1 in the local Hugging Face cache.
TEST_F(Predict, ModelNameResolvesFromHuggingFaceCache) {
    hub_snapshot("hub", "facebook/esmfold_v1", "0123abc", kFold);
    Result r = run("predict MKTAYIAKQR --model esmfold --out-dir " + p("out") + " --output-format cif",
                   "HF_HUB_CACHE=" + p("hub"));
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(fs::exists(p("out/seq.cif")));
    EXPECT_EQ(nlohmann::json::parse(io::read_file(p("out/seq.json")))["model"], "esmfold");
    r = run("predict MKV --model esmfold --out-dir " + p("o2"), "HF_HUB_OFFLINE=1 HF_HUB_CACHE=" + p("nohub"));
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("offline and 'facebook/esmfold_v1' is not in the cache"), std::string::npos) << r.err;
}
