// The StructureModel interface: ESMFold through it equals the direct call, its atoms for a
// two-chain input, input checks, and the predict writers on a model with several samples, PDE
// and chain-pair scores.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "io/model_dir.h"
#include "io/structure.h"
#include "models/esmfold/esmfold_structure.h"
#include "models/esmfold/residue_constants.h"
#include "models/structure_model.h"
#include "runtime/fold_pipeline.h"
#include "runtime/structure_compare.h"
#include "test_util.h"

using namespace bioinfer;
namespace fs = std::filesystem;
namespace rc = esmfold::rc;

namespace {

const std::string kFold = std::string(BIOINFER_FIXTURES) + "/esmfold_tiny";

fold::Input fasta_input(const fold::ModelSpec& spec, const std::string& seq) {
    io::FastaRecord r;
    r.id = "t";
    r.sequence = seq;
    return spec.from_fasta(r, "record 't'");
}

std::unique_ptr<fold::StructureModel> load_esmfold() {
    return fold::load(io::ModelDir::open(kFold));
}

}  // namespace

TEST(StructureModel, DetectsEsmFoldAndRejectsOthers) {
    EXPECT_EQ(fold::detect_architecture(io::ModelDir::open(kFold)), "esmfold");
    const std::string err = test::error_of(
        [] { fold::load_spec(io::ModelDir::open(std::string(BIOINFER_FIXTURES) + "/esm2_tiny")); });
    EXPECT_NE(err.find("neither ESMFold"), std::string::npos) << err;
    EXPECT_EQ(fold::detect_architecture(io::ModelDir::open(std::string(BIOINFER_FIXTURES) + "/boltz2_tiny")),
              "boltz2");
    const auto spec = fold::load_spec(io::ModelDir::open(kFold));
    EXPECT_EQ(spec->architecture(), "esmfold");
    EXPECT_EQ(spec->molecule_types(), std::vector<bio::MoleculeType>{bio::MoleculeType::Protein});
    EXPECT_FALSE(spec->takes_msa());
}

TEST(StructureModel, EsmFoldSpecReadsChainsAndChecksInputs) {
    const auto spec = fold::load_spec(io::ModelDir::open(kFold));
    const fold::Input in = fasta_input(*spec, "mkv:GWX");
    EXPECT_EQ(in.sequence, "MKV:GWX");
    ASSERT_EQ(in.target.chains.size(), 2u);
    EXPECT_EQ(in.target.chains[0].id, "A");
    EXPECT_EQ(in.target.chains[1].id, "B");
    EXPECT_EQ(in.target.chains[1].sequence, "GWX");
    EXPECT_EQ(in.residues, 6);
    EXPECT_EQ(in.tokens, 6 + 25);  // the glycine linker runs with the chains
    EXPECT_GT(spec->memory_bytes(in), 0);
    fold::Input longer = in;
    longer.tokens = 1024;
    EXPECT_GT(spec->memory_bytes(longer), spec->memory_bytes(in));

    auto err = test::error_of([&] { fasta_input(*spec, "MK1"); });
    EXPECT_NE(err.find("character '1' at position 3 is not an amino-acid letter"),
              std::string::npos)
        << err;
    err = test::error_of([&] { fasta_input(*spec, "MKV::GG"); });
    EXPECT_NE(err.find("chain 2 is empty"), std::string::npos) << err;
    fold::Input dna = in;
    dna.target.chains[1].type = bio::MoleculeType::Dna;
    err = test::error_of([&] { spec->prepare(dna); });
    EXPECT_NE(err.find("chain B is a dna, but esmfold takes only protein"), std::string::npos)
        << err;
    fold::Input msa = in;
    msa.target.chains[0].msa_path = "a.a3m";
    err = test::error_of([&] { spec->prepare(msa); });
    EXPECT_NE(err.find("chain A has an MSA, but esmfold takes none"), std::string::npos) << err;
}

// Every atom, pLDDT, PAE value and pTM the interface returns is the direct fold's, bit for bit,
// linker left out.
TEST(StructureModel, EsmFoldThroughInterfaceEqualsDirectCall) {
    const auto model = load_esmfold();
    const auto& esm = dynamic_cast<const esmfold::EsmFoldStructureModel&>(*model);
    const std::string seq = "MKTAYIAKQRQISFVK:GSXWLRRA";
    const fold::Input in = fasta_input(model->spec(), seq);
    std::vector<std::string> stages;
    fold::Options opts;
    opts.num_recycles = 1;
    opts.progress = [&](const std::string& s, int step, int steps) {
        stages.push_back(s + std::to_string(step) + "/" + std::to_string(steps));
    };
    const bio::Prediction p = model->predict(in, opts);
    EXPECT_EQ(stages, (std::vector<std::string>{"language model0/0", "trunk pass0/2",
                                                "trunk pass1/2", "structure module and heads0/0"}));
    EXPECT_EQ(p.num_recycles, 1);

    const esmfold::EncodedTarget enc = esmfold::encode_sequence(seq, "direct");
    esmfold::FoldOptions fo;
    fo.num_recycles = 1;
    const esmfold::FoldOutput out = esm.model().fold(enc.target, fo);
    ASSERT_EQ(p.samples.size(), 1u);
    const bio::Sample& s = p.samples[0];
    EXPECT_EQ(s.scores.at("ptm"), double(out.ptm));
    const int64_t L = int64_t(enc.target.aatype.size());
    std::vector<int64_t> keep;
    size_t atom = 0;
    for (int64_t i = 0; i < L; ++i) {
        if (enc.is_linker[size_t(i)]) continue;
        const size_t t = keep.size();
        keep.push_back(i);
        ASSERT_LT(t, p.tokens.size());
        EXPECT_EQ(s.token_plddt.f32()[t], out.plddt.f32()[i * 37 + 1]);
        for (int a = 0; a < 37; ++a) {
            if (out.atom37_exists.f32()[i * 37 + a] == 0.0f) continue;
            ASSERT_LT(atom, p.atoms.size());
            EXPECT_EQ(p.atoms[atom].token, int64_t(t));
            EXPECT_EQ(p.atoms[atom].name, rc::kAtomTypes[a]);
            for (int k = 0; k < 3; ++k)
                EXPECT_EQ(s.coords.f32()[atom * 3 + k], out.atom37.f32()[(i * 37 + a) * 3 + k]);
            EXPECT_EQ(s.plddt.f32()[atom], out.plddt.f32()[i * 37 + a]);
            ++atom;
        }
    }
    EXPECT_EQ(atom, p.atoms.size());
    const int64_t n = int64_t(keep.size());
    ASSERT_EQ(s.pae.numel(), n * n);
    for (int64_t a = 0; a < n; ++a)
        for (int64_t b = 0; b < n; ++b)
            ASSERT_EQ(s.pae.f32()[a * n + b], out.pae.f32()[keep[size_t(a)] * L + keep[size_t(b)]]);
}

// Two chains: residues numbered from 1 in each, the atom37 atoms each residue type has with their
// names and elements, X (UNK) without atoms but with a pLDDT, no linker.
TEST(StructureModel, EsmFoldAtomsOfTwoChains) {
    const auto model = load_esmfold();
    fold::Options opts;
    opts.num_recycles = 0;
    const bio::Prediction p = model->predict(fasta_input(model->spec(), "MKC:GXW"), opts);
    ASSERT_EQ(p.chains.size(), 2u);
    EXPECT_EQ(p.chains[0].id, "A");
    EXPECT_EQ(p.chains[0].first_token, 0);
    EXPECT_EQ(p.chains[0].tokens, 3);
    EXPECT_EQ(p.chains[1].id, "B");
    EXPECT_EQ(p.chains[1].first_token, 3);
    EXPECT_EQ(p.chains[1].tokens, 3);
    const std::vector<std::string> names = {"MET", "LYS", "CYS", "GLY", "UNK", "TRP"};
    const std::vector<int32_t> numbers = {1, 2, 3, 1, 2, 3}, chains = {0, 0, 0, 1, 1, 1};
    const std::string letters = "MKCGXW";
    ASSERT_EQ(p.tokens.size(), 6u);
    int64_t next_atom = 0;
    for (size_t t = 0; t < 6; ++t) {
        const bio::Token& tok = p.tokens[t];
        SCOPED_TRACE(t);
        EXPECT_EQ(tok.name, names[t]);
        EXPECT_EQ(tok.residue, numbers[t]);
        EXPECT_EQ(tok.chain, chains[t]);
        EXPECT_EQ(tok.letter, letters[t]);
        EXPECT_EQ(tok.first_atom, next_atom);
        const int r = bio::amino_acid_index(letters[t]);
        std::vector<std::string> want;
        for (int a = 0; a < 37; ++a)
            if (rc::kAtom37Mask[r][a] != 0.0f) want.push_back(rc::kAtomTypes[a]);
        ASSERT_EQ(tok.atoms, int64_t(want.size()));
        for (int64_t k = 0; k < tok.atoms; ++k) {
            const bio::Atom& at = p.atoms[size_t(tok.first_atom + k)];
            EXPECT_EQ(at.token, int64_t(t));
            EXPECT_EQ(at.name, want[size_t(k)]);
            EXPECT_EQ(at.element, std::string(1, want[size_t(k)][0]));
        }
        if (tok.atoms) {
            ASSERT_GE(tok.rep_atom, 0);
            EXPECT_EQ(p.atoms[size_t(tok.rep_atom)].name, "CA");
        } else {
            EXPECT_EQ(tok.rep_atom, -1);
        }
        next_atom += tok.atoms;
    }
    EXPECT_EQ(p.tokens[4].atoms, 0);  // X
    EXPECT_EQ(p.atoms.size(), size_t(next_atom));
    EXPECT_EQ(p.tokens[2].atoms, 6);  // N CA C CB O SG
    EXPECT_EQ(p.atoms[size_t(p.tokens[2].first_atom + 5)].element, "S");
    const bio::Sample& s = p.samples[0];
    EXPECT_EQ(s.coords.size(0), next_atom);
    EXPECT_EQ(s.token_plddt.numel(), 6);
    EXPECT_EQ(s.pae.size(0), 6);
    EXPECT_EQ(s.pae.size(1), 6);
}

namespace {

Tensor filled(const Shape& shape, float v) {
    Tensor t = Tensor::empty(shape);
    std::fill(t.f32(), t.f32() + t.numel(), v);
    return t;
}

// A stand-in for a diffusion model: one protein chain, residues with N and CA, two samples with
// PAE, PDE, ipTM and a chain-pair matrix.
class TwoSampleSpec : public fold::ModelSpec {
public:
    std::string architecture() const override { return "two-sample"; }
    std::vector<bio::MoleculeType> molecule_types() const override {
        return {bio::MoleculeType::Protein};
    }
    bool takes_msa() const override { return true; }
    int default_num_recycles() const override { return 3; }
    fold::Input from_fasta(const io::FastaRecord& rec, const std::string& where) const override {
        fold::Input in;
        in.id = rec.id;
        in.where = where;
        in.sequence = rec.sequence;
        bio::Chain c;
        c.id = "A";
        c.sequence = rec.sequence;
        in.target.chains.push_back(c);
        prepare(in);
        return in;
    }
    void prepare(fold::Input& in) const override {
        check_chains(in);
        in.tokens = in.residues = int64_t(in.target.chains[0].sequence.size());
    }
    int64_t memory_bytes(const fold::Input&) const override { return 1; }
};

class TwoSampleModel : public fold::StructureModel {
public:
    const fold::ModelSpec& spec() const override { return spec_; }
    bio::Prediction predict(const fold::Input& in, const fold::Options& opts) const override {
        bio::Prediction p;
        const int64_t n = in.tokens;
        p.chains.push_back({"A", bio::MoleculeType::Protein, 0, n});
        for (int64_t i = 0; i < n; ++i) {
            p.tokens.push_back({0, int32_t(i + 1), "ALA", 'A', 2 * i, 2, 2 * i + 1});
            p.atoms.push_back({i, "N", "N"});
            p.atoms.push_back({i, "CA", "C"});
        }
        for (int k = 0; k < 2; ++k) {
            bio::Sample s;
            s.coords = Tensor::empty({2 * n, 3});
            for (int64_t a = 0; a < 2 * n; ++a) {  // a helix, shifted per sample
                float* x = s.coords.f32() + a * 3;
                x[0] = 2.3f * std::cos(1.7f * float(a)) + float(k);
                x[1] = 2.3f * std::sin(1.7f * float(a));
                x[2] = 0.75f * float(a);
            }
            s.plddt = filled({2 * n}, 0.5f + 0.1f * float(k));
            s.token_plddt = filled({n}, 0.5f + 0.1f * float(k));
            s.pae = filled({n, n}, 1.0f + float(k));
            s.pde = filled({n, n}, 2.0f + float(k));
            s.scores = {{"ptm", 0.8 - 0.1 * k}, {"iptm", 0.7 - 0.1 * k}};
            s.chain_pair_scores["pair_chains_iptm"] = filled({1, 1}, 0.25f);
            p.samples.push_back(std::move(s));
        }
        p.num_recycles = opts.num_recycles < 0 ? 3 : opts.num_recycles;
        p.stage_seconds = {{"trunk", 0.5}, {"diffusion", 0.25}};
        return p;
    }

private:
    TwoSampleSpec spec_;
};

}  // namespace

TEST(StructureModel, PredictWritesEverySampleAndScore) {
    const std::string dir =
        (fs::temp_directory_path() / ("bioinfer_sm_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir);
    fs::create_directories(dir);
    io::write_file_atomic(dir + "/in.fa", ">x\nACDEFGHIKL\n");
    TwoSampleModel model;
    const auto recs = runtime::collect_fold_records(dir + "/in.fa", model.spec());
    ASSERT_EQ(recs.size(), 1u);
    ASSERT_EQ(recs[0].error, "");
    runtime::PredictOptions opts;
    opts.out_dir = dir + "/out";
    opts.quiet = true;
    opts.write_pae = true;
    opts.model_label = "two-sample";
    const auto stats = runtime::run_predict(model, recs, opts);
    ASSERT_EQ(stats.results.size(), 1u);
    ASSERT_EQ(stats.results[0].status, "ok") << stats.results[0].error;
    for (const char* f :
         {"x.pdb", "x_pae.npy", "x_pde.npy", "x_plddt_pae.png", "x.json", "x_sample1.pdb",
          "x_sample1_pae.npy", "x_sample1_pde.npy", "x_sample1_plddt_pae.png"})
        EXPECT_TRUE(fs::exists(opts.out_dir + "/" + f)) << f;
    const nlohmann::json j = nlohmann::json::parse(io::read_file(opts.out_dir + "/x.json"));
    EXPECT_DOUBLE_EQ(j["ptm"].get<double>(), 0.8);
    EXPECT_DOUBLE_EQ(j["iptm"].get<double>(), 0.7);
    EXPECT_EQ(j["pair_chains_iptm"], nlohmann::json::parse("[[0.25]]"));
    EXPECT_EQ(j["num_recycles"], 3);
    EXPECT_EQ(j["length"], 10);
    EXPECT_EQ(j["files"]["pde"], "x_pde.npy");
    EXPECT_NEAR(j["mean_plddt"].get<double>(), 50.0, 1e-4);
    EXPECT_TRUE(j["runtime_s"].contains("diffusion"));
    ASSERT_EQ(j["samples"].size(), 1u);
    EXPECT_DOUBLE_EQ(j["samples"][0]["iptm"].get<double>(), 0.6);
    EXPECT_NEAR(j["samples"][0]["mean_plddt"].get<double>(), 60.0, 1e-4);
    EXPECT_EQ(j["samples"][0]["files"]["structure"], "x_sample1.pdb");

    // compare reads the prediction in memory as it reads the file written from it
    fold::Options fo;
    const bio::Prediction p = model.predict(recs[0].input, fo);
    const auto mem = runtime::ca_residues(p, 1);
    const auto file = io::read_ca_residues(opts.out_dir + "/x_sample1.pdb");
    ASSERT_EQ(mem.size(), file.size());
    for (size_t i = 0; i < mem.size(); ++i) {
        EXPECT_EQ(mem[i].chain, file[i].chain);
        EXPECT_EQ(mem[i].number, file[i].number);
        EXPECT_EQ(mem[i].letter, file[i].letter);
        EXPECT_NEAR(mem[i].b_factor, file[i].b_factor, 1e-2);
        for (int c = 0; c < 3; ++c) EXPECT_NEAR(mem[i].ca[size_t(c)], file[i].ca[size_t(c)], 1e-3);
    }
    EXPECT_NEAR(runtime::compare_structures(mem, file).rmsd, 0.0, 1e-3);
    fs::remove_all(dir);
}
