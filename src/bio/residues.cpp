// The residue vocabulary: boltz's token list (boltz/data/const.py) and the lookups over it and
// over the amino acids' AlphaFold order.
#include "bio/residues.h"

namespace bioinfer::bio {

const char* const kResidueTokens[kNumResidueTokens] = {
    "<pad>", "-",   "ALA", "ARG", "ASN", "ASP", "CYS", "GLN", "GLU", "GLY", "HIS",
    "ILE",   "LEU", "LYS", "MET", "PHE", "PRO", "SER", "THR", "TRP", "TYR", "VAL",
    "UNK",   "A",   "G",   "C",   "U",   "N",   "DA",  "DG",  "DC",  "DT",  "DN"};

const char* const kAtom37Names[kNumAtom37] = {
    "N",   "CA",  "C",   "CB",  "O",   "CG",  "CG1", "CG2", "OG",  "OG1", "SG",  "CD",  "CD1",
    "CD2", "ND1", "ND2", "OD1", "OD2", "SD",  "CE",  "CE1", "CE2", "CE3", "NE",  "NE1", "NE2",
    "OE1", "OE2", "CH2", "NH1", "NH2", "OH",  "CZ",  "CZ2", "CZ3", "NZ",  "OXT"};

int residue_token(std::string_view name) {
    for (int i = 0; i < kNumResidueTokens; ++i)
        if (name == kResidueTokens[i]) return i;
    return -1;
}

int amino_acid_index(char letter) {
    for (int r = 0; r < kNumAminoAcids; ++r)
        if (kAminoAcidLetters[r] == letter) return r;
    return kNumAminoAcids;
}

const char* residue_of_letter(MoleculeType t, char letter) {
    switch (t) {
        case MoleculeType::Protein: {
            const int r = amino_acid_index(letter);
            if (r < kNumAminoAcids) return kAminoAcidNames[r];
            switch (letter) {
                case 'X':
                case 'B':
                case 'J':
                case 'O':
                case 'U':
                case 'Z':
                    return "UNK";
                case '-':
                    return "-";
                default:
                    return nullptr;
            }
        }
        case MoleculeType::Rna:
            switch (letter) {
                case 'A':
                    return "A";
                case 'G':
                    return "G";
                case 'C':
                    return "C";
                case 'U':
                    return "U";
                case 'N':
                    return "N";
                default:
                    return nullptr;
            }
        case MoleculeType::Dna:
            switch (letter) {
                case 'A':
                    return "DA";
                case 'G':
                    return "DG";
                case 'C':
                    return "DC";
                case 'T':
                    return "DT";
                case 'N':
                    return "DN";
                default:
                    return nullptr;
            }
        case MoleculeType::Ligand:
            return nullptr;
    }
    return nullptr;
}

const char* unknown_residue(MoleculeType t) {
    switch (t) {
        case MoleculeType::Protein:
            return "UNK";
        case MoleculeType::Dna:
            return "DN";
        case MoleculeType::Rna:
            return "N";
        case MoleculeType::Ligand:
            return nullptr;
    }
    return nullptr;
}

char residue_letter(std::string_view name) {
    for (int r = 0; r < kNumAminoAcids; ++r)
        if (name == kAminoAcidNames[r]) return kAminoAcidLetters[r];
    if (name.size() == 1) return name[0];                    // A C G U N
    if (name.size() == 2 && name[0] == 'D') return name[1];  // DA DC DG DT DN
    return 'X';
}

}  // namespace bioinfer::bio
