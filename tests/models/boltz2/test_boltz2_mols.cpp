// boltz's molecule cache (mols/<RES>.pkl) read natively: the restricted unpickler's RDKit entry
// point, the RDKit-format decoder, the numpy conformer choice, and the featurizer fed from it.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "boltz2_fixture.h"
#include "io/boltz_inputs.h"
#include "io/rdkit_pickle.h"
#include "io/torch_checkpoint.h"
#include "models/boltz2/conformers.h"
#include "models/boltz2/featurizer.h"
#include "models/boltz2/numpy_rng.h"
#include "test_util.h"

using namespace bioinfer;
using namespace bioinfer::test;
namespace fs = std::filesystem;

namespace {

std::string mols_fixture() {
    return std::string(BIOINFER_FIXTURES) + "/boltz2_mols";
}
std::string tiny_mols() {
    return boltz2_fixture_dir() + "/mols";
}

nlohmann::json read_json(const std::string& path) {
    std::ifstream f(path);
    return nlohmann::json::parse(f);
}

std::string scratch(const std::string& name) {
    const fs::path d = fs::temp_directory_path() / ("bioinfer_mols_" + name);
    fs::remove_all(d);
    fs::create_directories(d);
    return d.string();
}

std::string u32(uint32_t n) {
    return std::string(reinterpret_cast<const char*>(&n), 4);
}
std::string short_str(const std::string& s) {
    return "\x8c" + std::string(1, char(s.size())) + s;
}

// Protocol-4 opcodes by hand: rdkit.Chem.rdchem.Mol(bytes), left on the stack (no STOP).
std::string mol_call(const std::string& bytes) {
    return short_str("rdkit.Chem.rdchem") + short_str("Mol") + "\x93" + "B" +
           u32(uint32_t(bytes.size())) + bytes + "\x85R";
}
std::string pickle_of(const std::string& body) {
    return std::string("\x80\x04", 2) + body + ".";
}

void expect_same_mol(const boltz2::ResidueMol& got, const boltz2::ResidueMol& ref) {
    ASSERT_EQ(got.atoms.size(), ref.atoms.size()) << ref.name;
    for (size_t i = 0; i < ref.atoms.size(); ++i) {
        EXPECT_EQ(got.atoms[i].name, ref.atoms[i].name) << ref.name << " atom " << i;
        EXPECT_EQ(got.atoms[i].element, ref.atoms[i].element) << ref.name << " atom " << i;
        EXPECT_EQ(got.atoms[i].symbol, ref.atoms[i].symbol) << ref.name << " atom " << i;
        EXPECT_EQ(got.atoms[i].charge, ref.atoms[i].charge) << ref.name << " atom " << i;
        EXPECT_EQ(got.atoms[i].chirality, ref.atoms[i].chirality) << ref.name << " atom " << i;
    }
    EXPECT_EQ(got.conformer_ids, ref.conformer_ids) << ref.name;
    ASSERT_EQ(got.conformers.size(), ref.conformers.size()) << ref.name;
    for (size_t c = 0; c < ref.conformers.size(); ++c)
        for (size_t i = 0; i < ref.atoms.size(); ++i)
            for (int d = 0; d < 3; ++d)  // the same float32 coordinates widened: exact
                EXPECT_EQ(got.conformers[c][i][size_t(d)], ref.conformers[c][i][size_t(d)])
                    << ref.name << " conformer " << c << " atom " << i;
}

// A molecule as the fixture script described it with RDKit (heavy atoms, conformers).
void expect_matches_json(const boltz2::ResidueMol& got, const nlohmann::json& ref,
                         const std::string& what) {
    const auto& v = boltz2::vocab();
    ASSERT_EQ(got.atoms.size(), ref["atoms"].size()) << what;
    for (size_t i = 0; i < got.atoms.size(); ++i) {
        const auto& a = ref["atoms"][i];
        EXPECT_EQ(got.atoms[i].name, a["name"].get<std::string>()) << what << " atom " << i;
        EXPECT_EQ(got.atoms[i].element, a["element"].get<int>()) << what << " atom " << i;
        EXPECT_EQ(got.atoms[i].charge, a["charge"].get<int>()) << what << " atom " << i;
        const std::string chir = a["chirality"];
        auto it = std::find(v.chirality_types.begin(), v.chirality_types.end(), chir);
        const std::string want = it != v.chirality_types.end() ? chir : "CHI_OTHER";
        EXPECT_EQ(v.chirality_types[size_t(got.atoms[i].chirality)], want) << what << " atom " << i;
    }
    ASSERT_EQ(got.conformers.size(), ref["conformers"].size()) << what;
    for (size_t c = 0; c < got.conformers.size(); ++c) {
        const auto& rc = ref["conformers"][c];
        EXPECT_EQ(got.conformer_ids[c], rc["id"].get<int>()) << what;
        for (size_t i = 0; i < got.atoms.size(); ++i)
            for (size_t d = 0; d < 3; ++d)
                EXPECT_EQ(got.conformers[c][i][d], rc["xyz"][i][d].get<double>())
                    << what << " conformer " << c << " atom " << i;
    }
}

}  // namespace

TEST(Boltz2Mols, CacheReadsExactlyTheBuiltinTable) {
    // The built-in table was generated from these files with RDKit in Python.
    const auto lib = boltz2::ConformerLibrary::from_boltz_mols(tiny_mols());
    const auto& ref = boltz2::ConformerLibrary::builtin();
    ASSERT_EQ(lib.all().size(), ref.all().size());
    for (const auto& [res, mol] : ref.all()) expect_same_mol(lib.at(res), mol);
}

TEST(Boltz2Mols, HydrogensConformerIdsAndWideIndicesAsRdkitReadsThem) {
    const nlohmann::json multi = read_json(mols_fixture() + "/multi.json");
    ASSERT_FALSE(multi.empty());
    for (const auto& [res, ref] : multi.items())
        expect_matches_json(boltz2::read_boltz_mol(mols_fixture() + "/multi/" + res + ".pkl", res),
                            ref, res);
    // > 255 atoms: RDKit writes 4-byte atom indices.
    const auto big = boltz2::read_boltz_mol(mols_fixture() + "/big.pkl", "BIG");
    EXPECT_GT(big.atoms.size(), 255u);
    expect_matches_json(big, read_json(mols_fixture() + "/big.json"), "big");
}

TEST(Boltz2Mols, NumpyChoiceMatchesNumpy) {
    const nlohmann::json cases = read_json(mols_fixture() + "/numpy_choice.json");
    ASSERT_GE(cases.size(), 5u);
    for (const auto& c : cases) {
        const uint64_t seed = std::stoull(c["seed"].get<std::string>());
        boltz2::NumpyGenerator raw(seed);
        for (const auto& r : c["raw_uint64"])
            EXPECT_EQ(raw.next_uint64(), std::stoull(r.get<std::string>())) << "seed " << seed;
        boltz2::NumpyGenerator g(seed);
        for (size_t i = 0; i < c["lengths"].size(); ++i)
            EXPECT_EQ(g.choice_index(c["lengths"][i].get<int64_t>()), c["draws"][i].get<int64_t>())
                << "seed " << seed << " draw " << i;
    }
}

TEST(Boltz2Mols, FeaturizeFromCacheEqualsBuiltin) {
    const auto lib = boltz2::ConformerLibrary::from_boltz_mols(tiny_mols());
    for (const auto& name : boltz2_cases()) {
        const auto target =
            io::read_boltz_input(boltz2_fixture_dir() + "/inputs/" + name + "/" + name + ".yaml");
        boltz2::FeaturizeOptions a, b;
        a.seed = b.seed = 5;
        a.mols_dir = b.mols_dir = tiny_mols();  // ligands' CCD molecules
        b.conformers = &lib;
        const auto fa = boltz2::featurize(target, a), fb = boltz2::featurize(target, b);
        ASSERT_EQ(fa.feats.t.size(), fb.feats.t.size()) << name;
        for (const auto& [k, t] : fa.feats.t) {
            const Tensor x = t.to_f32(), y = fb.feats.at(k).to_f32();
            ASSERT_EQ(x.shape(), y.shape()) << name << " " << k;
            EXPECT_EQ(0, std::memcmp(x.f32(), y.f32(), size_t(x.numel()) * 4)) << name << " " << k;
        }
    }
}

// With several conformers per residue the featurizer takes, residue by residue, the one numpy's
// default_rng(42).choice(conformer ids) picks (boltz's draw); another seed picks others.
TEST(Boltz2Mols, FeaturizerPicksBoltzsConformer) {
    const nlohmann::json multi = read_json(mols_fixture() + "/multi.json");
    const nlohmann::json pick = read_json(mols_fixture() + "/multi_choice.json");
    const std::string name = pick["case"];
    std::vector<std::string> names;
    for (const auto& [res, m] : multi.items()) names.push_back(res);
    const auto lib = boltz2::ConformerLibrary::from_boltz_mols(mols_fixture() + "/multi", names);
    const auto target =
        io::read_boltz_input(boltz2_fixture_dir() + "/inputs/" + name + "/" + name + ".yaml");

    // Which conformer each token's ref_pos is, told by its intra-residue distances.
    const auto picked = [&](uint64_t seed) {
        boltz2::FeaturizeOptions opt;
        opt.conformers = &lib;
        opt.conformer_seed = seed;
        opt.augmentation = [](int64_t) {
            boltz2::RigidTransform t;
            for (int i = 0; i < 3; ++i) t.rot[i][i] = 1.0f;
            return t;
        };
        const auto f = boltz2::featurize(target, opt);
        const Tensor pos = f.feats.at("ref_pos").to_f32();  // (A, 3)
        std::vector<int> ids;
        for (const auto& tok : f.meta.tokens) {
            const auto& mol = lib.at(tok.res_name);
            int found = -1;
            double best = 1e9;
            for (size_t c = 0; c < mol.conformers.size(); ++c) {
                double worst = 0;  // max |d_feature - d_conformer| over atom pairs
                for (int64_t i = 0; i < tok.atom_count; ++i)
                    for (int64_t j = 0; j < i; ++j) {
                        const auto& ni = f.meta.atoms[size_t(tok.atom_begin + i)].name;
                        const auto& nj = f.meta.atoms[size_t(tok.atom_begin + j)].name;
                        const auto& pi = mol.conformers[c][size_t(mol.atom_index(ni))];
                        const auto& pj = mol.conformers[c][size_t(mol.atom_index(nj))];
                        double dm = 0, df = 0;
                        for (int d = 0; d < 3; ++d) {
                            dm += (pi[size_t(d)] - pj[size_t(d)]) * (pi[size_t(d)] - pj[size_t(d)]);
                            const double e = pos.f32()[(tok.atom_begin + i) * 3 + d] -
                                             pos.f32()[(tok.atom_begin + j) * 3 + d];
                            df += e * e;
                        }
                        worst = std::max(worst, std::fabs(std::sqrt(dm) - std::sqrt(df)));
                    }
                if (worst < best) best = worst, found = mol.conformer_ids[c];
            }
            EXPECT_LT(best, 1e-4) << tok.res_name << ": ref_pos is none of its conformers";
            ids.push_back(found);
        }
        return ids;
    };
    std::vector<int> want;
    for (const auto& x : pick["conformer_ids"]) want.push_back(x.get<int>());
    EXPECT_EQ(picked(42), want);
    EXPECT_NE(picked(43), want) << "the pick does not depend on the seed";
}

TEST(Boltz2Mols, HostilePicklesAreRefused) {
    const std::string dir = scratch("hostile");
    const std::string ala = io::read_rdkit_mol_pickle(tiny_mols() + "/ALA.pkl");
    // os.system("echo hi")
    const std::string sys_path = dir + "/SYS.pkl";
    write_bytes(sys_path, pickle_of(short_str("os") + short_str("system") + "\x93" +
                                    short_str("echo hi") + "\x85R"));
    std::string e = error_of([&] { io::read_rdkit_mol_pickle(sys_path); });
    EXPECT_NE(e.find("refusing to load"), std::string::npos) << e;
    EXPECT_NE(e.find("os.system"), std::string::npos) << e;
    // A real molecule plus a call to builtins.eval beside it.
    const std::string extra_path = dir + "/ALA.pkl";
    write_bytes(extra_path, pickle_of(mol_call(ala) + short_str("builtins") + short_str("eval") +
                                      "\x93" + short_str("1") + "\x85R" + "\x86"));
    e = error_of([&] { boltz2::read_boltz_mol(extra_path, "ALA"); });
    EXPECT_NE(e.find("refusing to load"), std::string::npos) << e;
    EXPECT_NE(e.find("builtins.eval"), std::string::npos) << e;
    // A molecule whose state (BUILD) would run a global.
    write_bytes(extra_path, pickle_of(mol_call(ala) + short_str("os") + short_str("system") +
                                      "\x93" + short_str("x") + "\x85R" + "b"));
    e = error_of([&] { boltz2::read_boltz_mol(extra_path, "ALA"); });
    EXPECT_NE(e.find("os.system"), std::string::npos) << e;
    // Mol called with a second argument, and a pickle that is bytes alone.
    write_bytes(extra_path, pickle_of(short_str("rdkit.Chem.rdchem") + short_str("Mol") + "\x93" +
                                      "C\x01x" + "C\x01y" + "\x86R"));
    e = error_of([&] { io::read_rdkit_mol_pickle(extra_path); });
    EXPECT_NE(e.find("expected its binary pickle bytes alone"), std::string::npos) << e;
    write_bytes(extra_path, pickle_of("C\x01x"));
    e = error_of([&] { io::read_rdkit_mol_pickle(extra_path); });
    EXPECT_NE(e.find("holds no RDKit molecule"), std::string::npos) << e;
    // The well-formed version of the same file reads.
    write_bytes(extra_path, pickle_of(mol_call(ala)));
    expect_same_mol(boltz2::read_boltz_mol(extra_path, "ALA"),
                    boltz2::ConformerLibrary::builtin().at("ALA"));
}

TEST(Boltz2Mols, CorruptMoleculeBytesNameTheFile) {
    const std::string dir = scratch("corrupt");
    const std::string ala = io::read_rdkit_mol_pickle(tiny_mols() + "/ALA.pkl");
    const std::string path = dir + "/ALA.pkl";
    // Truncated, a wrong header, and a tag byte overwritten (the bond section's).
    std::string bad_tag = ala;
    const size_t bond = ala.find(std::string("\x0b\x00\x01", 3));  // BEGINBOND, first bond 0-1
    ASSERT_NE(bond, std::string::npos);
    bad_tag[bond] = '\x7f';
    std::string bad_head = ala;
    bad_head[0] = 'X';
    for (const std::string& bytes : {ala.substr(0, ala.size() / 2), bad_head, bad_tag}) {
        write_bytes(path, pickle_of(mol_call(bytes)));
        const std::string e = error_of([&] { boltz2::read_boltz_mol(path, "ALA"); });
        EXPECT_NE(e.find(path), std::string::npos) << e;
        EXPECT_NE(e.find("RDKit molecule"), std::string::npos) << e;
    }
}

TEST(Boltz2Mols, MissingResidueFileIsNamed) {
    const std::string dir = scratch("missing");
    fs::copy_file(tiny_mols() + "/ALA.pkl", dir + "/ALA.pkl");
    EXPECT_NO_THROW(boltz2::ConformerLibrary::from_boltz_mols(dir, {"ALA"}));
    const std::string e = error_of([&] {
        boltz2::ConformerLibrary::from_boltz_mols(dir, {"ALA", "ARG"});
    });
    EXPECT_NE(e.find("ARG.pkl"), std::string::npos) << e;
    EXPECT_NE(e.find("residue ARG"), std::string::npos) << e;
}

TEST(Boltz2Mols, CacheFolderOrBuiltinTable) {
    const std::string empty = scratch("nocache");
    auto none = boltz2::load_cache_conformers(empty);
    EXPECT_FALSE(none.from_cache);
    EXPECT_EQ(none.source, "built-in table");
    EXPECT_EQ(none.library.all().size(), boltz2::ConformerLibrary::builtin().all().size());

    const std::string cache = scratch("cache");
    fs::copy(tiny_mols(), cache + "/mols");
    auto got = boltz2::load_cache_conformers(cache);
    EXPECT_TRUE(got.from_cache);
    EXPECT_EQ(got.source, cache + "/mols");
    for (const auto& [res, mol] : boltz2::ConformerLibrary::builtin().all())
        expect_same_mol(got.library.at(res), mol);
    // A cache whose mols folder lacks a canonical residue is an error, as in boltz.
    fs::remove(cache + "/mols/TRP.pkl");
    const std::string e = error_of([&] { boltz2::load_cache_conformers(cache); });
    EXPECT_NE(e.find("TRP.pkl"), std::string::npos) << e;
}
