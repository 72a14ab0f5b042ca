// Boltz input files (YAML schema version 1, and FASTA with `>ID|TYPE|MSA` headers) read into a
// target description: chains with their ids, types, sequences and MSA sources, in boltz's order.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/msa.h"

namespace bioinfer::io {

// boltz's entity types.
enum class BoltzEntityType { Protein, Dna, Rna, Ligand };
const char* boltz_entity_name(BoltzEntityType t);  // "protein", "dna", "rna", "ligand"

// Where a chain's MSA comes from. None: not a protein (boltz gives such chains a one-row MSA of
// their own sequence); Empty: `msa: empty`, single-sequence mode; File: an .a3m or .csv file.
enum class BoltzMsaKind { None, Empty, File };

struct BoltzChain {
    std::string id;  // chain name as written ("A")
    BoltzEntityType type = BoltzEntityType::Protein;
    int entity_id = 0;     // boltz's entity: index of the (type, sequence) group, first appearance
    int sym_id = 0;        // copy number within the entity, in chain order
    std::string sequence;  // one-letter sequence as written (polymers)
    // Residue tokens: ALA..VAL/UNK, A C G U N, DA DC DG DT DN; a modified residue is its CCD
    // code (`modifications`; boltz reads MSE as MET).
    std::vector<std::string> residues;
    bool cyclic = false;                // `cyclic: true` (polymers)
    BoltzMsaKind msa_kind = BoltzMsaKind::None;
    std::string msa_path;  // resolved path (File)
    // Filled by load_boltz_msas: the parsed MSA (File), shared by the chains of one entity.
    std::shared_ptr<const Msa> msa;
    // Ligands: CCD codes (one residue each, `residues` holds them) or a SMILES string (one
    // residue, named LIG1, LIG2, ... per SMILES entity as boltz names them).
    std::vector<std::string> ccd;
    std::string smiles;
    std::string where;  // "file:line:col" of the chain's entry, for messages
};

// An atom or token a constraint names, as written: `[chain, residue, atom]` for a bond's atoms
// (residue numbers 1-based); `[chain, residue]` (polymers) or `[chain, atom name]` (ligands) for
// pocket and contact tokens. Resolved against the chains by the featurizer.
struct BoltzRef {
    std::string chain;
    std::string residue;  // a number as written ("3"); empty for a ligand token
    std::string atom;     // empty for a polymer token
    std::string where;    // file:line:col
};
struct BoltzBondConstraint {  // a covalent bond between two atoms
    BoltzRef atom1, atom2;
};
struct BoltzPocketConstraint {  // the binder chain lies within max_distance of these tokens
    std::string binder;
    std::vector<BoltzRef> contacts;
    double max_distance = 6.0;
    bool force = false;
    std::string where;
};
struct BoltzContactConstraint {  // two tokens within max_distance
    BoltzRef token1, token2;
    double max_distance = 6.0;
    bool force = false;
    std::string where;
};

// `templates:` entry: a structure file whose protein chains template the target's protein chains.
// chain_ids empty: every protein chain of the target; template_ids empty: each query chain takes
// the template chain found by global alignment (an optimal one-to-one assignment), as boltz.
struct BoltzTemplate {
    std::string path;  // resolved like an MSA path
    bool pdb = false;  // `pdb:` (PDB format) rather than `cif:`
    std::string name;  // the file's stem: boltz's template id (one template per distinct stem)
    std::vector<std::string> chain_ids, template_ids;
    bool force = false;      // steer the sampler to the template (needs threshold)
    double threshold = 0.0;  // with force: the distance (A) the potential allows; else inf
    std::string where;       // file:line:col
};

struct BoltzTarget {
    std::string name;    // the input file's stem, as boltz names the record
    std::string source;  // the input file
    // Chains in boltz's order: grouped by entity (first appearance of each (type, sequence)), then
    // in file order within an entity; this order gives asym_id.
    std::vector<BoltzChain> chains;
    // `constraints`, in file order within each kind.
    std::vector<BoltzBondConstraint> bonds;
    std::vector<BoltzPocketConstraint> pockets;
    std::vector<BoltzContactConstraint> contacts;
    std::vector<BoltzTemplate> templates;  // `templates`, in file order
    // `properties: - affinity: binder: <chain>`: the ligand chain whose binding affinity the
    // affinity stage predicts (empty: none), and where it was given.
    std::string affinity_binder;
    std::string affinity_where;
};

// Reading. Errors name the file, the line (and column for YAML) and the chain:
// YAML syntax, an unknown key or entity type, a ligand without exactly one of `smiles` and `ccd`,
// a malformed modification or constraint, a template without `cif`/`pdb`, naming a chain that is
// not a protein of the input, with chain_id and template_id lists of different lengths or
// `force` without `threshold`, an affinity binder
// that is not one single-copy, single-residue ligand chain (or more than one binder), a
// duplicated chain id, a letter outside the chain type's alphabet, a protein without an `msa` key
// (boltz's "missing MSA" error; `msa: empty` runs single-sequence), and entries of one entity that
// give different MSAs. Relative MSA paths are looked up next to the input file first, then in the
// working directory (boltz resolves them against the working directory only).
BoltzTarget parse_boltz_yaml(std::string_view text, const std::string& source);
BoltzTarget parse_boltz_fasta(std::string_view text, const std::string& source);
// By extension: .yaml/.yml or .fasta/.fa/.fas (case-insensitive), as boltz dispatches.
BoltzTarget read_boltz_input(const std::string& path);

// boltz's checks on target.affinity_binder (set): a chain of the target, a ligand, one copy, one
// residue. Errors name affinity_where (or the source).
void check_affinity_binder(const BoltzTarget& target);

// Adds a SMILES ligand chain `id` to a parsed target as boltz would had the input listed it
// last: a copy of an existing entity with the same SMILES, else a new entity named LIG<k>.
// Errors name `where`: a chain id already used, an empty SMILES.
void add_boltz_ligand(BoltzTarget& target, const std::string& id, const std::string& smiles,
                      const std::string& where);

// Reads every File MSA of the target (each file once, shared by the chains of one entity) with
// boltz's rules (read_msa: unique rows, at most max_msa_seqs rows, boltz's CLI default 8192) and
// checks its first row against the chain's sequence as boltz's featurizer does (a mismatch only
// at positions where the input is UNK, or where the input is MET and the MSA UNK, is accepted and
// the query row takes the input's residues). Errors name the MSA file and the chain.
void load_boltz_msas(BoltzTarget& target, int64_t max_msa_seqs = 8192);

}  // namespace bioinfer::io
