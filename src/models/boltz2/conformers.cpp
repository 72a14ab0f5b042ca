// Boltz-2's residue vocabulary and canonical residue molecules: lookups over the generated tables,
// and the same molecules read from boltz's cache (mols/<RES>.pkl).
#include "models/boltz2/conformers.h"

#include <algorithm>
#include <filesystem>
#include <gemmi/elem.hpp>

#include "bio/residues.h"
#include "bioinfer/error.h"
#include "io/rdkit_pickle.h"
#include "io/torch_checkpoint.h"

namespace bioinfer::boltz2 {

const Vocab& vocab() {
    static const Vocab v = [] {
        Vocab v = make_builtin_vocab();
        v.tokens.assign(bio::kResidueTokens, bio::kResidueTokens + bio::kNumResidueTokens);
        for (int c = 1; c < 128; ++c) {
            const char l = char(c);
            if (const char* r = bio::residue_of_letter(bio::MoleculeType::Protein, l))
                v.protein_letters[l] = r;
            if (const char* r = bio::residue_of_letter(bio::MoleculeType::Rna, l))
                v.rna_letters[l] = r;
            if (const char* r = bio::residue_of_letter(bio::MoleculeType::Dna, l))
                v.dna_letters[l] = r;
        }
        v.unk_token = {{"PROTEIN", bio::unknown_residue(bio::MoleculeType::Protein)},
                       {"DNA", bio::unknown_residue(bio::MoleculeType::Dna)},
                       {"RNA", bio::unknown_residue(bio::MoleculeType::Rna)}};
        return v;
    }();
    return v;
}

int Vocab::token_id(const std::string& token) const {
    auto it = std::find(tokens.begin(), tokens.end(), token);
    BI_CHECK(it != tokens.end(), "boltz2 vocab", "unknown residue token '", token, "'");
    return int(it - tokens.begin());
}

int Vocab::chain_type_id(const std::string& type) const {
    auto it = std::find(chain_types.begin(), chain_types.end(), type);
    BI_CHECK(it != chain_types.end(), "boltz2 vocab", "unknown chain type '", type, "'");
    return int(it - chain_types.begin());
}

int ResidueMol::atom_index(const std::string& atom_name) const {
    for (size_t i = 0; i < atoms.size(); ++i)
        if (atoms[i].name == atom_name) return int(i);
    return -1;
}

void ConformerLibrary::add(ResidueMol mol) {
    BI_CHECK(!mol.conformers.empty(), "boltz2 conformers", "molecule ", mol.name,
             " has no conformer");
    BI_CHECK(mol.conformer_ids.size() == mol.conformers.size(), "boltz2 conformers", "molecule ",
             mol.name, ": expected one id per conformer, got ", mol.conformer_ids.size(),
             " ids for ", mol.conformers.size(), " conformers");
    for (const auto& c : mol.conformers)
        BI_CHECK(c.size() == mol.atoms.size(), "boltz2 conformers", "molecule ", mol.name,
                 ": expected ", mol.atoms.size(), " coordinates per conformer, got ", c.size());
    std::string name = mol.name;
    mols_[name] = std::move(mol);
}

const ResidueMol& ConformerLibrary::at(const std::string& res) const {
    auto it = mols_.find(res);
    BI_CHECK(it != mols_.end(), "boltz2 conformers", "no canonical molecule for residue '", res,
             "'");
    return it->second;
}

const ConformerLibrary& ConformerLibrary::builtin() {
    static const ConformerLibrary lib = make_builtin_conformers();
    return lib;
}

int boltz_bond_type(int rdkit_bond_type) {
    switch (rdkit_bond_type) {
        case 1: return 1;   // SINGLE
        case 2: return 2;   // DOUBLE
        case 3: return 3;   // TRIPLE
        case 12: return 4;  // AROMATIC
        default: return 0;  // OTHER (dative, zero, ...)
    }
}

int boltz_chirality(int rdkit_chiral_tag) {
    const Vocab& v = vocab();
    const auto id = [&](const std::string& name) {
        auto it = std::find(v.chirality_types.begin(), v.chirality_types.end(), name);
        return it == v.chirality_types.end() ? -1 : int(it - v.chirality_types.begin());
    };
    const int c = id(io::rdkit_chiral_tag_name(rdkit_chiral_tag));
    if (c >= 0) return c;
    const int unk = id("CHI_OTHER");  // boltz's const.unk_chirality_type
    BI_CHECK(unk >= 0, "boltz2 conformers", "vocabulary lacks CHI_OTHER");
    return unk;
}

ResidueMol read_boltz_mol(const std::string& path, const std::string& res) {
    BI_CHECK(std::filesystem::is_regular_file(path), "boltz2 conformers",
             "boltz's molecule cache has no file for residue ", res, ": ", path, " is missing");
    const io::RdkitMol rd = io::decode_rdkit_mol(io::read_rdkit_mol_pickle(path), path);
    ResidueMol m;
    m.name = res;
    std::vector<int> kept(rd.atoms.size(), -1);  // RDKit index -> heavy-atom index
    std::vector<size_t> heavy;  // indices into the RDKit molecule's atoms
    for (size_t i = 0; i < rd.atoms.size(); ++i) {
        const io::RdkitAtom& a = rd.atoms[i];
        if (a.atomic_num == 1) continue;
        auto name = a.props.find("name");
        BI_CHECK(name != a.props.end(), path, "atom ", i, " of residue ", res,
                 " has no 'name' property (boltz's molecules carry CCD atom names; was it pickled ",
                 "without properties?)");
        MolAtom ma;
        ma.name = name->second;
        ma.element = a.atomic_num;
        ma.symbol = gemmi::Element(a.atomic_num).name();
        ma.charge = a.formal_charge;
        ma.chirality = boltz_chirality(a.chiral_tag);
        auto leaving = a.props.find("leaving_atom");
        ma.leaving = leaving != a.props.end() && leaving->second != "0" &&
                     leaving->second != "False" && !leaving->second.empty();
        kept[i] = int(m.atoms.size());
        m.atoms.push_back(std::move(ma));
        heavy.push_back(i);
    }
    for (const io::RdkitBond& b : rd.bonds) {
        const int x = kept[size_t(b.begin)], y = kept[size_t(b.end)];
        if (x < 0 || y < 0) continue;  // a bond to a hydrogen
        m.bonds.push_back({std::min(x, y), std::max(x, y), boltz_bond_type(b.type)});
    }
    BI_CHECK(!rd.conformers.empty(), path, "residue ", res, " has no conformer");
    for (const auto& c : rd.conformers) {
        m.conformer_ids.push_back(c.id);
        std::vector<std::array<double, 3>> xyz;
        xyz.reserve(heavy.size());
        for (size_t i : heavy) xyz.push_back(c.pos[i]);
        m.conformers.push_back(std::move(xyz));
    }
    return m;
}

ConformerLibrary ConformerLibrary::from_boltz_mols(const std::string& mols_dir,
                                                   const std::vector<std::string>& names) {
    BI_CHECK(std::filesystem::is_directory(mols_dir), "boltz2 conformers",
             "boltz's molecule folder ", mols_dir, " does not exist");
    ConformerLibrary lib;
    for (const auto& res : names)
        lib.add(read_boltz_mol((std::filesystem::path(mols_dir) / (res + ".pkl")).string(), res));
    return lib;
}

ConformerLibrary ConformerLibrary::from_boltz_mols(const std::string& mols_dir) {
    std::vector<std::string> names;
    for (const auto& [res, mol] : builtin().all()) names.push_back(res);
    return from_boltz_mols(mols_dir, names);
}

CacheConformers load_cache_conformers(const std::string& cache_dir) {
    CacheConformers out;
    const std::filesystem::path mols = std::filesystem::path(cache_dir) / "mols";
    if (!cache_dir.empty() && std::filesystem::is_directory(mols)) {
        out.library = ConformerLibrary::from_boltz_mols(mols.string());
        out.source = mols.string();
        out.from_cache = true;
    } else {
        out.library = ConformerLibrary::builtin();
        out.source = "built-in table";
    }
    return out;
}

}  // namespace bioinfer::boltz2
