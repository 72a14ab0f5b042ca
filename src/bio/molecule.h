// The kinds of molecule a biomolecular target holds (proteins, DNA, RNA, ligands), one enum for
// every model and writer; the values are boltz's chain type ids (boltz.data.const.chain_type_ids).
#pragma once
#include <cstdint>

namespace bioinfer::bio {

enum class MoleculeType : int32_t { Protein = 0, Dna = 1, Rna = 2, Ligand = 3 };

// "protein", "dna", "rna", "ligand"
const char* molecule_type_name(MoleculeType t);

// Proteins, DNA and RNA: chains of residues (a ligand is a non-polymer, however many residues).
inline bool is_polymer(MoleculeType t) {
    return t != MoleculeType::Ligand;
}

}  // namespace bioinfer::bio
