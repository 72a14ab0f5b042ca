// The atoms and tokens a Boltz-2 input's constraints name (bonds, pockets, contacts), resolved
// by boltz's rules: once before any weights load, to refuse a bad reference at once, and again
// by the featurizer, which places them.
#pragma once
#include <string>

#include "bio/target.h"
#include "models/boltz2/conformers.h"

namespace bioinfer::boltz2 {

// The chain a reference names, as an index into target.chains; an error naming r.where when
// the input has no such chain.
int constraint_chain(const bio::Target& target, const bio::ConstraintRef& r);
// The residue a reference names, 0-based within chain `c` (references count from 1); an error
// naming r.where when it is not a number or lies outside the chain.
int constraint_residue(const bio::Chain& c, const bio::ConstraintRef& r);
// Whether a pocket or contact token names a ligand's atom (true: looked up in the chain's first
// residue, as boltz does) or a polymer's residue (false); the other spelling is an error naming
// r.where.
bool token_names_atom(const bio::Chain& c, const bio::ConstraintRef& r);
// The error for an atom name its residue does not have.
[[noreturn]] void fail_missing_atom(const bio::Chain& c, int residue, const bio::ConstraintRef& r);

// Every bond, pocket and contact of `target` checked against its chains, with the errors the
// featurizer would give: chains that exist (the pocket's binder too), residue numbers inside
// their chain, a residue for a polymer token and an atom for a ligand token, and every atom name
// one of its residue's atoms (a standard residue's by boltz's atom table, a modified residue's
// and a CCD ligand's by its molecule in `canonical` or `mols_dir`, a SMILES ligand's by the names
// boltz gives its atoms).
void check_constraint_references(const bio::Target& target, const ConformerLibrary& canonical,
                                 const std::string& mols_dir);

}  // namespace bioinfer::boltz2
