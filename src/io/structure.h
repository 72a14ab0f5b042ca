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

}  // namespace bioinfer::io
