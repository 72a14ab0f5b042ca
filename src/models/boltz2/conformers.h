// Boltz-2's residue vocabulary (boltz.data.const) and the canonical residue molecules its
// featurizer reads (boltz's mols/<RES>.pkl), reduced to heavy atoms with names, elements, charges,
// chirality and conformer coordinates. The built-in tables are generated (conformers_data.cpp).
#pragma once
#include <array>
#include <map>
#include <string>
#include <vector>

namespace bioinfer::boltz2 {

// boltz.data.const, as the input parser and featurizer use it.
struct Vocab {
    std::vector<std::string>
        tokens;  // 33 residue tokens: <pad>, -, ALA..VAL, UNK, A G C U N, DA..DN
    std::map<char, std::string> protein_letters, rna_letters, dna_letters;  // one letter -> token
    std::map<std::string, std::string> unk_token;                 // PROTEIN/DNA/RNA -> UNK/DN/N
    std::map<std::string, std::vector<std::string>> ref_atoms;    // token -> its atoms, in order
    std::map<std::string, std::string> center_atom, disto_atom;   // token -> atom name
    std::vector<std::string> protein_backbone, nucleic_backbone;  // atom_backbone_feat classes
    std::vector<std::string> chain_types;                         // PROTEIN DNA RNA NONPOLYMER
    std::vector<std::string> chirality_types;
    std::map<std::string, int> method_types;          // lower-case method name -> id
    std::map<std::string, int> contact_conditioning;  // UNSPECIFIED, UNSELECTED, ... -> class
    int num_elements = 128;
    int max_msa_seqs = 16384;    // the featurizer's cap on MSA rows (paired + unpaired)
    int max_paired_seqs = 8192;  // the cap on taxonomy-paired rows

    int token_id(const std::string& token) const;  // throws on an unknown token
    int chain_type_id(const std::string& type) const;
};
const Vocab& vocab();

struct MolAtom {
    std::string name;    // CCD atom name ("CA", "C1'")
    int element = 0;     // atomic number
    std::string symbol;  // element symbol as RDKit writes it ("C", "Se")
    int charge = 0;      // formal charge
    int chirality = 0;   // index into Vocab::chirality_types
};

// One canonical residue: heavy atoms in the molecule's order, and each conformer's coordinates
// (Angstrom) in that order. boltz picks a conformer per residue with numpy's
// Generator.choice(conformer_ids); the built-in molecules have one conformer each.
struct ResidueMol {
    std::string name;
    std::vector<MolAtom> atoms;
    std::vector<int> conformer_ids;
    std::vector<std::vector<std::array<double, 3>>> conformers;  // [conformer][atom]

    int atom_index(const std::string& atom_name) const;  // -1 when absent
};

class ConformerLibrary {
  public:
    void add(ResidueMol mol);
    bool has(const std::string& res) const { return mols_.count(res) > 0; }
    const ResidueMol& at(const std::string& res) const;  // throws naming the residue
    const std::map<std::string, ResidueMol>& all() const { return mols_; }

    // The molecules the parity fixtures were featurised with (generated table).
    static const ConformerLibrary& builtin();

  private:
    std::map<std::string, ResidueMol> mols_;
};

// Generated (conformers_data.cpp).
Vocab make_builtin_vocab();
ConformerLibrary make_builtin_conformers();

}  // namespace bioinfer::boltz2
