// Boltz-2's residue vocabulary (boltz.data.const) and the canonical residue molecules its
// featurizer reads (boltz's mols/<RES>.pkl), reduced to heavy atoms with names, elements, charges,
// chirality and conformer coordinates. The built-in tables are generated (conformers_data.cpp);
// the residue tokens and one-letter codes are bio's (bio/residues.h).
#pragma once
#include <array>
#include <map>
#include <string>
#include <vector>

namespace bioinfer::boltz2 {

// boltz.data.const, as the featurizer uses it.
struct Vocab {
    // bio's residue vocabulary in boltz's spelling (bio::kResidueTokens, bio::residue_of_letter,
    // bio::unknown_residue):
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
    std::string name;    // CCD atom name ("CA", "C1'"), or boltz's generated name for SMILES
    int element = 0;     // atomic number
    std::string symbol;  // element symbol as RDKit writes it ("C", "Se")
    int charge = 0;      // formal charge
    int chirality = 0;   // index into Vocab::chirality_types
    bool leaving = false;  // the CCD's leaving_atom flag (dropped when a residue is a modification)
};

// A bond between two heavy atoms (indices into ResidueMol::atoms, a < b) with boltz's bond type
// (const.bond_types: OTHER 0, SINGLE 1, DOUBLE 2, TRIPLE 3, AROMATIC 4, COVALENT 5).
struct MolBond {
    int a = 0, b = 0;
    int type = 0;
};
// boltz's bond type id for an RDKit Bond::BondType value (SINGLE 1, DOUBLE 2, TRIPLE 3, AROMATIC 12;
// every other type is OTHER).
int boltz_bond_type(int rdkit_bond_type);
// boltz's chirality id (index into Vocab::chirality_types) for an RDKit Atom::ChiralType value:
// mapped by the tag's name, CHI_OTHER for a name boltz lacks.
int boltz_chirality(int rdkit_chiral_tag);

// One canonical residue: heavy atoms in the molecule's order, and each conformer's coordinates
// (Angstrom) in that order. boltz picks a conformer per residue with numpy's
// Generator.choice(conformer_ids) (see numpy_rng.h); the built-in molecules have one each.
// boltz's geometric constraints of a ligand residue (schema.py compute_*_constraints), atom
// indices into ResidueMol::atoms; the physical steering potentials read them.
struct ResidueConstraints {
    struct Bounds {  // RDKit's distance bounds of a heavy-atom pair (a < b in the molecule)
        int a = 0, b = 0;
        bool is_bond = false, is_angle = false;
        float upper = 0.f, lower = 0.f;
    };
    struct Chiral {  // three neighbours by CIP rank and the centre
        std::array<int, 4> atoms{};
        bool is_reference = false, is_r = false;
    };
    struct Stereo {  // neighbour, begin, end, neighbour of an E/Z double bond
        std::array<int, 4> atoms{};
        bool is_check = false, is_e = false;
    };
    std::vector<Bounds> bounds;
    std::vector<Chiral> chiral;
    std::vector<Stereo> stereo;
    std::vector<std::array<int, 6>> planar_bonds;
    std::vector<std::array<int, 5>> rings5;
    std::vector<std::array<int, 6>> rings6;
};

struct ResidueMol {
    std::string name;
    std::vector<MolAtom> atoms;
    std::vector<int> conformer_ids;
    std::vector<std::vector<std::array<double, 3>>> conformers;  // [conformer][atom]
    std::vector<MolBond> bonds;  // in the molecule's bond order; empty for the built-in residues
    ResidueConstraints constraints;  // ligands and modified residues (none for the built-in ones)

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

    // boltz's molecule cache: reads <mols_dir>/<RES>.pkl for each name (boltz's canonical
    // residues by default: the builtin table's names). Throws naming the file when one is missing,
    // is not a plain pickled RDKit molecule, or lacks an atom name.
    static ConformerLibrary from_boltz_mols(const std::string& mols_dir);
    static ConformerLibrary from_boltz_mols(const std::string& mols_dir,
                                            const std::vector<std::string>& names);

  private:
    std::map<std::string, ResidueMol> mols_;
};

// One residue molecule of boltz's cache (`path`: a pickled RDKit molecule, read with the
// restricted unpickler and a native RDKit-format decoder; nothing is executed): its heavy atoms
// (atomic number != 1) in the molecule's order with their `name` property, element, formal
// charge and chirality (boltz's chirality id: the RDKit tag's name, CHI_OTHER when boltz lacks
// it), and every conformer (id and heavy-atom coordinates), as boltz's featurizer reads them.
ResidueMol read_boltz_mol(const std::string& path, const std::string& res);

// Wire-up for the CLI: the canonical conformers for a model folder / boltz cache `cache_dir`
// (boltz's layout: <cache_dir>/mols/<RES>.pkl). When <cache_dir>/mols exists every canonical
// residue is read from it (a missing or unreadable file is an error naming it, as in boltz);
// otherwise the built-in table is used. `source` says which ("<dir>/mols" or "built-in table").
// Pass &result.library as FeaturizeOptions::conformers and keep it alive while featurising.
struct CacheConformers {
    ConformerLibrary library;
    std::string source;
    bool from_cache = false;
};
CacheConformers load_cache_conformers(const std::string& cache_dir);

// Generated (conformers_data.cpp): the vocabulary but its residue tokens and one-letter maps.
Vocab make_builtin_vocab();
ConformerLibrary make_builtin_conformers();

}  // namespace bioinfer::boltz2
