// Structure files through gemmi: writing a predicted model as PDB or mmCIF, and reading the
// amino-acid residues (with their Calpha) of any PDB / mmCIF file for comparisons.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace bioinfer::bio {
struct Prediction;
}

namespace bioinfer::io {

// One atom of a model to write.
struct AtomSite {
    std::string chain;    // chain id ("A", "B", ...)
    int32_t residue = 0;  // residue number
    std::string resname;  // three-letter name
    std::string atom;     // atom name ("CA")
    std::string element;  // "C", "N", "O", "S"
    float x = 0, y = 0, z = 0;
    float b_factor = 0;
    char icode = ' ';      // insertion code
    bool hetero = false;   // a HETATM (ligand) record
};

// Writes atoms (in order; residues and chains contiguous) as one model, format "pdb" or "cif",
// atomically. `name` is the entry name written into the file.
void write_structure(const std::vector<AtomSite>& atoms, const std::string& name,
                     const std::string& format, const std::string& path);

// The atoms of sample `sample` of a prediction, as above, with pLDDT (0-100) as B-factors.
std::vector<AtomSite> atom_sites(const bio::Prediction& p, size_t sample);
void write_structure(const bio::Prediction& p, size_t sample, const std::string& name,
                     const std::string& format, const std::string& path);

struct CaResidue {
    std::string chain;
    int32_t number = 0;
    char icode = ' ';
    std::string name;  // three-letter
    char letter = 'X';  // one-letter code (X when not one of the 20)
    std::array<double, 3> ca{};
    float b_factor = 0;  // of the CA atom (pLDDT in predicted models)
};

// Amino-acid residues with a Calpha atom from the first model of a PDB or mmCIF file (format
// from the contents), in file order; the first conformer where atoms have alternatives.
std::vector<CaResidue> read_ca_residues(const std::string& path);

// A structure as the MPNN models read it (LigandMPNN's parse_PDB, after ProDy): atoms of the
// first model with occupancy > 0 (or any, with zero_occupancy) and altloc ' ' or 'A'; protein
// residues are residues with a CA atom and an amino-acid name (the 20 and ProDy's nonstandard
// ones: MSE, SEP, HID, ...), in file order; every other atom but water's is a context atom.
struct DesignResidue {
    std::string chain;
    int32_t number = 0;
    char icode = ' ';
    std::string name;  // three-letter
    char letter = 'X';  // one-letter code of the 20; X for the nonstandard ones
    std::array<float, 37 * 3> xyz{};  // the atom37 slots (N, CA, C, CB, O, CG, ...; OXT unread)
    std::array<uint8_t, 37> present{};
};
struct ContextAtom {
    std::string chain;
    int32_t residue = 0;
    char icode = ' ';
    std::string resname, atom;
    std::string element;  // as written ("CL"); empty when the file gives none
    int32_t element_number = 0;  // parse_PDB's element table (H 1, C 6, ...); 0 when unknown
    std::array<float, 3> xyz{};
    float b_factor = 0;
};
struct DesignStructure {
    std::vector<DesignResidue> residues;
    std::vector<int32_t> chain_index;  // per residue: its chain's order of first appearance
    std::vector<ContextAtom> other;    // non-protein, non-water atoms, hydrogens included
};
// Reads `path` (PDB or mmCIF); `chains` non-empty: only atoms of those chains. Errors name the
// file: unreadable, no protein residue, a chain in `chains` the file lacks.
DesignStructure read_design_structure(const std::string& path,
                                      const std::vector<std::string>& chains = {},
                                      bool zero_occupancy = false);

}  // namespace bioinfer::io
