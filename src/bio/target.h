// A biomolecular target as the structure models take it: chains (proteins, DNA, RNA as
// sequences, with modified residues and MSAs; ligands as CCD codes or SMILES), grouped into
// entities; covalent bonds, pockets and contacts between them; structural templates; and the
// ligand whose binding affinity is asked for. The chains, entities and constraints follow boltz's
// input schema (boltz/data/parse/schema.py), the widest any model reads; io reads inputs into it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bio/molecule.h"
#include "bio/msa.h"

namespace bioinfer::bio {

// Where a chain's MSA comes from. None: not given (boltz gives non-protein chains a one-row MSA
// of their own sequence); Empty: `msa: empty`, single-sequence mode; File: an alignment file.
enum class MsaKind { None, Empty, File };

struct Chain {
    std::string id;  // chain name as written ("A")
    MoleculeType type = MoleculeType::Protein;
    // The entity: chains with the same type and sequence are copies of one molecule (AlphaFold
    // 3's entities); entity_id numbers them by first appearance, sym_id the copy within one.
    int entity_id = 0;
    int sym_id = 0;
    std::string sequence;  // one-letter sequence as written (polymers; upper case)
    // Residue names (bio/residues.h tokens: ALA..VAL/UNK, A C G U N, DA DC DG DT DN); a modified
    // residue is its CCD code (`modifications`; boltz reads MSE as MET). Ligands: their CCD
    // codes, or LIG1, LIG2, ... for a SMILES (one per SMILES entity, as boltz names them).
    std::vector<std::string> residues;
    bool cyclic = false;  // `cyclic: true` (polymers)
    MsaKind msa_kind = MsaKind::None;
    std::string msa_path;  // the alignment file (File)
    // The alignment read from msa_path (File), shared by the chains of one entity; null until
    // read.
    std::shared_ptr<const Msa> msa;
    // Ligands: CCD codes (one residue each, `residues` holds them) or a SMILES string.
    std::vector<std::string> ccd;
    std::string smiles;
    std::string where;  // "file:line:col" of the chain's entry, for messages
};

// An atom or token a constraint names, as written: `[chain, residue, atom]` for a bond's atoms
// (residue numbers 1-based); `[chain, residue]` (polymers) or `[chain, atom name]` (ligands) for
// pocket and contact tokens. Resolved against the chains by the model.
struct ConstraintRef {
    std::string chain;
    std::string residue;  // a number as written ("3"); empty for a ligand token
    std::string atom;     // empty for a polymer token
    std::string where;    // file:line:col
};
struct BondConstraint {  // a covalent bond between two atoms
    ConstraintRef atom1, atom2;
};
struct PocketConstraint {  // the binder chain lies within max_distance of these tokens
    std::string binder;
    std::vector<ConstraintRef> contacts;
    double max_distance = 6.0;
    bool force = false;
    std::string where;
};
struct ContactConstraint {  // two tokens within max_distance
    ConstraintRef token1, token2;
    double max_distance = 6.0;
    bool force = false;
    std::string where;
};

// A structure file whose protein chains template the target's protein chains. chain_ids empty:
// every protein chain of the target; template_ids empty: each query chain takes the template
// chain found by global alignment (an optimal one-to-one assignment), as boltz.
struct Template {
    std::string path;  // resolved like an MSA path
    bool pdb = false;  // PDB format rather than mmCIF
    std::string name;  // the file's stem: boltz's template id (one template per distinct stem)
    std::vector<std::string> chain_ids, template_ids;
    bool force = false;      // steer the sampler to the template (needs threshold)
    double threshold = 0.0;  // with force: the distance (A) the potential allows; else inf
    std::string where;       // file:line:col
};

struct Target {
    std::string name;    // the input file's stem, as boltz names the record
    std::string source;  // the input file
    // Chains grouped by entity (first appearance of each (type, sequence)), then in file order
    // within an entity; this order gives boltz's asym_id.
    std::vector<Chain> chains;
    // Constraints, in file order within each kind.
    std::vector<BondConstraint> bonds;
    std::vector<PocketConstraint> pockets;
    std::vector<ContactConstraint> contacts;
    std::vector<Template> templates;  // in file order
    // The ligand chain whose binding affinity is predicted (empty: none), and where it was
    // named.
    std::string affinity_binder;
    std::string affinity_where;
    // What reading forgave, one line each, as boltz warns and goes on (an MSA whose first row is
    // not the chain's sequence: the chain folds single-sequence). The job prints them.
    std::vector<std::string> warnings;
};

// Chain ids in input order: A..Z, then a..z, then 0..9, then two characters.
std::string chain_id(int32_t k);

}  // namespace bioinfer::bio
