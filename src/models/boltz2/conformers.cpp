// Boltz-2's residue vocabulary and canonical residue molecules: lookups over the generated tables.
#include "models/boltz2/conformers.h"

#include <algorithm>

#include "bioinfer/error.h"

namespace bioinfer::boltz2 {

const Vocab& vocab() {
    static const Vocab v = make_builtin_vocab();
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

}  // namespace bioinfer::boltz2
