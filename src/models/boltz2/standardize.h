// The affinity binder's SMILES standardisation of boltz 2.2.1 (schema.py `standardize`): the ChEMBL
// structure pipeline's clean-up, done before the binder is built as a ligand.
#pragma once
#include <string>

namespace bioinfer::boltz2 {

// boltz's standardize: the SMILES is parsed unsanitised; a molecule the ChEMBL pipeline excludes
// (a metal of its list, or more than 7 borons) is refused; RDKit's LargestFragmentChooser keeps the
// largest fragment; then the pipeline's standardize_mol: valences updated, S-groups removed,
// kekulised, hydrogens removed except those the pipeline keeps (wedged bonds, stereocentres,
// unusual valences, bridgeheads), alkali alkoxides split and the pipeline's normalisations applied,
// uncharged (RDKit's Uncharger in canonical order), tartrate stereo flattened, sanitised. Returns
// RDKit's canonical isomeric SMILES of the result, which must parse again. Errors name `where`:
// RDKit's own message for a SMILES it cannot parse or a step that fails, an excluded molecule, a
// result that does not parse.
std::string standardize_smiles(const std::string& smiles, const std::string& where);

// RDKit's canonical isomeric SMILES of a SMILES parsed and sanitised with its hydrogens kept (as
// written): what another RDKit version's SMILES of a molecule reads as here, to compare with
// standardize_smiles. Errors as above.
std::string canonical_smiles(const std::string& smiles, const std::string& where);

}  // namespace bioinfer::boltz2
