// The residue vocabulary every model shares, tabulated once as gemmi's resinfo.hpp tabulates
// residues: three-letter (CCD) names, one-letter codes per polymer type, the ids of boltz's
// residue tokens (boltz.data.const.tokens, which Boltz-2 reads as res_type and ESMFold2 as its
// residue classes), and the 20 amino acids in AlphaFold's order (ESMFold's residue index).
#pragma once
#include <string_view>

#include "bio/molecule.h"

namespace bioinfer::bio {

// boltz.data.const.tokens in id order: <pad>, the gap '-', the 20 amino acids (by three-letter
// name), UNK, RNA's A G C U N, DNA's DA DG DC DT DN.
inline constexpr int kNumResidueTokens = 33;
extern const char* const kResidueTokens[kNumResidueTokens];
// The id of a residue token; -1 when `name` is none (a ligand's or a modified residue's CCD code).
int residue_token(std::string_view name);

// The 20 amino acids in AlphaFold's order, then the unknown one (X, UNK): one-letter codes and
// three-letter names.
inline constexpr int kNumAminoAcids = 20;
inline constexpr char kAminoAcidLetters[kNumAminoAcids + 1] = "ARNDCQEGHILKMFPSTWYV";
inline constexpr const char* kAminoAcidNames[kNumAminoAcids + 1] = {
    "ALA", "ARG", "ASN", "ASP", "CYS", "GLN", "GLU", "GLY", "HIS", "ILE", "LEU",
    "LYS", "MET", "PHE", "PRO", "SER", "THR", "TRP", "TYR", "VAL", "UNK"};
// The AlphaFold index of a one-letter code (upper case); kNumAminoAcids (X) for any other.
int amino_acid_index(char letter);

// The residue token a one-letter code names in a polymer of type `t` (boltz's
// prot_letter_to_token, rna_letter_to_token, dna_letter_to_token): proteins read the 20 amino
// acids, B J O U X Z as UNK and '-' as the gap; RNA A C G U N; DNA A C G T N as DA .. DN.
// nullptr for any other character, and for ligands.
const char* residue_of_letter(MoleculeType t, char letter);
// The unknown residue of a polymer type (boltz's unk_token): UNK, DN, N; nullptr for ligands.
const char* unknown_residue(MoleculeType t);
// The one-letter code of a residue name: an amino acid's letter; a one-character name itself
// (RNA's A C G U N); the second character of a two-character name starting with D (DNA's DA ..
// DN); 'X' otherwise (UNK, ligands, modified residues).
char residue_letter(std::string_view name);

// The atom37 layout of amino-acid atoms (AlphaFold's atom_types: N, CA, C, CB, O, CG, ..., OXT),
// which ESMFold writes and the MPNN models read structures in.
inline constexpr int kNumAtom37 = 37;
extern const char* const kAtom37Names[kNumAtom37];

}  // namespace bioinfer::bio
