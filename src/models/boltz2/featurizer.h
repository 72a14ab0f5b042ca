// Boltz-2's featurizer for polymers (proteins, DNA, RNA): a bio::Target -> the feature tensors
// boltz 2.2.1's inference pipeline hands the model (tokenizer boltz2.py + featurizerv2.py as
// inferencev2.py calls them), and the per-token/per-atom metadata a structure writer needs.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/boltz_inputs.h"
#include "models/boltz2/affinity_crop.h"
#include "models/boltz2/conformers.h"
#include "models/boltz2/features.h"

namespace bioinfer::boltz2 {

// One residue's random rigid motion in boltz's center_random_augmentation, applied to the
// centred conformer as row vectors: x' = x @ rot + trans (rot[d][j] multiplies x[d] into x'[j]).
struct RigidTransform {
    std::array<std::array<float, 3>, 3> rot{};
    std::array<float, 3> trans{};
};
// Called once per augmented residue, in ref_space_uid order (0, 1, ..., last - 1).
using AugmentationSource = std::function<RigidTransform(int64_t uid)>;
// boltz's draw with a seeded std::mt19937_64 instead of torch's generator: a quaternion from four
// standard normals (real part made non-negative), its rotation matrix, and three standard normals
// as the translation. Same distribution as boltz, not the same numbers.
AugmentationSource seeded_augmentation(uint64_t seed);

// boltz's affinity stage featurises a predicted complex again: the tokens around the binder
// (AffinityCropper), method "other", frames and distogram centres from the predicted coordinates,
// the binder's affinity_token_mask, and the affinity profile (profile_affinity,
// deletion_mean_affinity: the MSA's first row).
struct AffinityInputs {
    std::string binder;  // the binder ligand's chain
    std::vector<std::array<float, 3>>
        coords;  // every atom of the uncropped target, in featurize's order
    CropLimits limits;
};

struct FeaturizeOptions {
    // MSA rows kept per file (unique rows, file order) when the target's MSAs are not loaded
    // yet: boltz's --max_msa_seqs, default 8192.
    int64_t max_msa_seqs = 8192;
    uint64_t seed = 0;                // seeds seeded_augmentation when `augmentation` is unset
    AugmentationSource augmentation;  // overrides the seed (tests inject the reference's motions)
    // method conditioning: a name of boltz's method table in any case (boltz's default)
    std::string method = "x-ray diffraction";
    int64_t atoms_per_window = 32;                 // atoms are padded to a multiple of this
    const ConformerLibrary* conformers = nullptr;  // null: ConformerLibrary::builtin()
    // Seeds the numpy Generator that picks each residue's conformer (Generator.choice over its
    // conformer ids, in token order); boltz's inference fixes 42.
    uint64_t conformer_seed = 42;
    // Ligands: molecules of CCD codes outside `conformers` are read from boltz's molecule folder
    // (<mols_dir>/<CODE>.pkl); SMILES are embedded with RDKit seeded with ligand_seed (see
    // ligands.h). Molecules in extra_mols (by residue name: LIG1, a CCD code) take precedence;
    // tests inject the reference's own there.
    std::string mols_dir;
    int ligand_seed = 42;
    const ConformerLibrary* extra_mols = nullptr;
    const AffinityInputs* affinity = nullptr;  // the affinity stage (method becomes "other")
};

// Metadata for writing structures; indices refer to the feature rows.
struct ChainMeta {
    std::string id;    // chain name
    std::string type;  // "protein", "dna", "rna", "ligand"
    int asym_id = 0, entity_id = 0, sym_id = 0;
    int64_t token_begin = 0, token_count = 0;  // tokens [begin, begin + count)
    int64_t atom_begin = 0, atom_count = 0;    // atoms (unpadded indices)
};
struct TokenMeta {
    int chain = 0;         // index into chains
    std::string res_name;  // residue token: ALA, UNK, A, DN, ...
    int res_idx = 0;       // 0-based residue number within the chain (write res_idx + 1)
    int64_t atom_begin = 0, atom_count = 0;
    int64_t center_atom = 0, disto_atom = 0;  // absolute atom indices (CA / C1'; CB / CA / C4 ...)
};
struct AtomMeta {
    std::string name;    // CCD atom name
    int element = 0;     // atomic number
    std::string symbol;  // element symbol
    int64_t token = 0;
};
struct StructureMeta {
    std::vector<ChainMeta> chains;
    std::vector<TokenMeta> tokens;
    std::vector<AtomMeta> atoms;  // real atoms; the features pad to num_atoms_padded
    // Bonds between real atoms in boltz's order (each ligand residue's bonds, chain by chain):
    // atom indices and boltz's bond type (const.bond_types).
    std::vector<std::array<int64_t, 3>> bonds;
    int64_t num_atoms_padded = 0;
};

struct Featurized {
    Features feats;
    StructureMeta meta;
    // The ligand and modified-residue molecules the target took (by residue name): as
    // FeaturizeOptions::extra_mols they featurise the same target again without remaking them.
    ConformerLibrary ligands;
};

// Every feature Boltz-2's inference reads, named and shaped as the reference's batch (batch dim
// dropped): token features (token_index, residue_index, asym_id, entity_id, sym_id, mol_type,
// res_type (N,33), disto_center, token_bonds (N,N,1), type_bonds, masks, contact_conditioning
// (N,N,5), contact_threshold, method_feature, modified, cyclic_period, affinity_token_mask), atom
// features (ref_pos (A,3), atom_resolved_mask, ref_atom_name_chars (A,4,64), ref_element (A,128),
// ref_charge, ref_chirality, atom_backbone_feat (A,17), ref_space_uid, atom_pad_mask,
// atom_to_token (A,N), token_to_rep_atom (N,A), r_set_to_rep_atom, token_to_center_atom,
// frames_idx (1,N,3), frame_resolved_mask (1,N)), MSA features (msa (S,N), msa_paired,
// deletion_value, has_deletion, msa_mask (S,N), deletion_mean (N), profile (N,33)), the dummy
// template set (template_* (1,N,...), query_to_template, visibility_ids) and ensemble_ref_idxs.
// A is padded to a multiple of options.atoms_per_window. Ligands (SMILES, CCD codes) are one token
// per heavy atom, each ligand residue one ref_space_uid, its bonds token bonds.
Featurized featurize(const bio::Target& target, const FeaturizeOptions& options = {});

}  // namespace bioinfer::boltz2
