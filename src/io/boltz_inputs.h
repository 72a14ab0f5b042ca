// Boltz input files (YAML schema version 1, and FASTA with `>ID|TYPE|MSA` headers) read into a
// bio::Target: chains with their ids, types, sequences and MSA sources, in boltz's order, and
// the MSAs they name (load_boltz_msas).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bio/target.h"
#include "io/msa.h"

namespace bioinfer::io {

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
// With msa_server, a protein without an MSA is no error: it is left MsaKind::None for
// load_boltz_msas to ask the MSA server (boltz's --use_msa_server).
bio::Target parse_boltz_yaml(std::string_view text, const std::string& source,
                             bool msa_server = false);
bio::Target parse_boltz_fasta(std::string_view text, const std::string& source,
                              bool msa_server = false);
// By extension: .yaml/.yml or .fasta/.fa/.fas (case-insensitive), as boltz dispatches.
bio::Target read_boltz_input(const std::string& path, bool msa_server = false);

// boltz's checks on target.affinity_binder (set): a chain of the target, a ligand, one copy, one
// residue. Errors name affinity_where (or the source).
void check_affinity_binder(const bio::Target& target);

// Adds a SMILES ligand chain `id` to a parsed target as boltz would had the input listed it
// last: a copy of an existing entity with the same SMILES, else a new entity named LIG<k>.
// Errors name `where`: a chain id already used, an empty SMILES.
void add_boltz_ligand(bio::Target& target, const std::string& id, const std::string& smiles,
                      const std::string& where);

// Reads every File MSA of the target (each file once, shared by the chains of one entity) with
// boltz's rules (read_msa: unique rows, at most max_msa_seqs rows, boltz's CLI default 8192) and
// checks its first row against the chain's sequence as boltz's featurizer does (a mismatch only
// at positions where the input is UNK, or where the input is MET and the MSA UNK, is accepted and
// the query row takes the input's residues). Any other first row is not the query: as boltz
// ("MSA does not match input sequence, creating dummy"), the chain (and its entity) folds
// single-sequence (MsaKind::Empty), with a line in target.warnings naming the input, the chain and
// the MSA's row. Errors (an unreadable MSA) name the MSA file and the chain.
// Proteins without an MSA (read with msa_server) first get one from `fetch`: called once with
// the target's name and its protein entities that need one ((entity_id, sequence), in entity
// order), it returns an MSA file per entity (boltz's msa/<name>_<entity>.csv).
using MsaFetch = std::function<std::vector<std::string>(
    const std::string& target, const std::vector<std::pair<int, std::string>>& entities)>;
void load_boltz_msas(bio::Target& target, int64_t max_msa_seqs = 8192, const MsaFetch& fetch = {});

}  // namespace bioinfer::io
