// RDKit's binary molecule format (MolPickler, as `Chem.Mol.ToBinary()` and Python's pickle of a
// Mol write it) read without RDKit: atoms (element, charge, chirality, hybridization, aromaticity,
// hydrogen counts, string properties such as boltz's CCD atom `name`, integer and boolean ones as
// text), bonds (atoms, type, aromaticity, conjugation, direction, stereo and its atoms), and
// conformers (id, coordinates): enough to rebuild the molecule in RDKit. Rings, stereo groups and
// molecule properties are parsed past. Pickle format versions 13.0 and later (RDKit 2021 onwards;
// the version RDKit writes now is 16.x).
#pragma once
#include <array>
#include <map>
#include <string>
#include <vector>

namespace bioinfer::io {

struct RdkitAtom {
    int atomic_num = 0;
    int formal_charge = 0;
    int chiral_tag = 0;  // RDKit's Atom::ChiralType value (0 unspecified, 1 CW, 2 CCW, ...)
    int hybridization = 4;  // RDKit's Atom::HybridizationType value (the format's default: SP3)
    int explicit_hs = 0;    // hydrogens on the atom that are not atoms of the molecule
    int radicals = 0;
    unsigned isotope = 0;
    bool aromatic = false, no_implicit = false;
    std::map<std::string, std::string> props;  // "name" -> "CA", "leaving_atom" -> "0"
};

struct RdkitBond {
    int begin = 0, end = 0;
    int type = 1;  // RDKit's Bond::BondType value (1 SINGLE, 2 DOUBLE, 3 TRIPLE, 12 AROMATIC, ...)
    bool aromatic = false, conjugated = false;
    int dir = 0;     // RDKit's Bond::BondDir value
    int stereo = 0;  // RDKit's Bond::BondStereo value (0 none, 2 Z, 3 E, ...)
    std::vector<int> stereo_atoms;
};

struct RdkitConformer {
    int id = 0;
    bool is_3d = true;
    std::vector<std::array<double, 3>> pos;  // one per atom, Angstrom (float32 or float64 stored)
};

struct RdkitMol {
    int version = 0;  // 1000 * major + 10 * minor + patch, as RDKit counts it
    std::vector<RdkitAtom> atoms;
    std::vector<RdkitBond> bonds;
    std::vector<RdkitConformer> conformers;
};

// RDKit's name for a chiral tag ("CHI_TETRAHEDRAL_CW"), "" for a value RDKit does not define.
std::string rdkit_chiral_tag_name(int tag);

// Decodes `bytes`; `where` names the source in errors ("<file>: RDKit molecule ...: expected X,
// got Y"). Query atoms/bonds and substance groups are refused: boltz's residue molecules have none.
RdkitMol decode_rdkit_mol(const std::string& bytes, const std::string& where);

}  // namespace bioinfer::io
