// Boltz-2 prediction outputs exactly as `boltz predict` (boltz 2.2.1) writes them: the
// boltz_results_<input>/predictions/<name>/ folder with one structure, confidence JSON and
// pLDDT / PAE / PDE npz per sample, ranked by confidence score.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bio/molecule.h"
#include "bio/prediction.h"

namespace bioinfer::io {

// The structure as boltz's writer sees it (StructureV2 after remove_invalid_chains): chains hold
// contiguous residues, residues contiguous atoms, in file order. Plain vectors, one entry per
// chain / residue / atom.
struct BoltzStructureInfo {
    std::vector<std::string> chain_names;  // "A", "B": the YAML ids, written as chain ids
    std::vector<bio::MoleculeType> chain_types;  // boltz's chain_type_ids
    std::vector<int32_t>
        chain_entities;  // boltz's entity_id: chains sharing one share the mmCIF entity
    std::vector<int32_t> residue_chains;     // chain index of each residue (non-decreasing)
    std::vector<std::string> residue_names;  // "MET", "A", "DG", "LIG1"
    std::vector<int32_t> residue_numbers;    // written number: boltz's res_idx + 1
    std::vector<int32_t> atom_residues;      // residue index of each atom (non-decreasing)
    std::vector<std::string> atom_names;     // "CA", "O5'", "CL5"
    // Upper-case elements; left empty, they come from the atom names by boltz's own rule (the
    // name without digits, through its table of ambiguous names, else its first letter), which is
    // what boltz writes: fill it only to depart from boltz.
    std::vector<std::string> atom_elements;
    // Atom index pairs written as PDB CONECT records (boltz: the structure's bonds, i.e. the
    // ligands' bonds, then its connections), in order.
    std::vector<std::pair<int32_t, int32_t>> bonds;

    size_t num_atoms() const { return atom_names.size(); }
    // Tokens as boltz's writer counts them for pLDDT: one per residue of a polymer chain, one
    // per atom of a non-polymer chain.
    size_t num_plddt_tokens() const;
    // Throws naming the first inconsistency (sizes, ordering, indices).
    void validate(const std::string& where) const;
};

// The summary boltz writes to confidence_<name>_model_<k>.json (float32 values, as the model
// computes them; written as Python writes the double of each).
struct BoltzConfidence {
    float confidence_score = 0, ptm = 0, iptm = 0, ligand_iptm = 0, protein_iptm = 0;
    float complex_plddt = 0, complex_iplddt = 0, complex_pde = 0, complex_ipde = 0;
    // (C, C) over the chains (asym ids 0..C-1): [i][j] = ipTM of chain pair (i, j); the diagonal
    // is written again as chains_ptm.
    std::vector<std::vector<float>> pair_chains_iptm;
};

// One diffusion sample.
struct BoltzSample {
    std::vector<float> coords;  // (num_atoms, 3), Angstrom, unpadded
    std::vector<float> plddt;   // (num_plddt_tokens), 0-1 (written x100 as B-factors)
    std::vector<float> pae;     // (T, T), Angstrom; empty: no pae_ file
    std::vector<float> pde;     // (T, T), Angstrom; empty: no pde_ file
    BoltzConfidence confidence;
};

struct BoltzWriteOptions {
    std::string output_format = "mmcif";  // "mmcif" (.cif) or "pdb"
    // boltz 2.2.1 writes pae_/pde_ npz for Boltz-2 whatever --write_full_pae/--write_full_pde say
    // (its Boltz2.predict_step always returns both): keep true to match it.
    bool write_pae = true;
    bool write_pde = true;
    // The affinity stage's outputs (key, value) in boltz's order: written as
    // affinity_<name>.json when given.
    std::vector<std::pair<std::string, double>> affinity = {};
};

// What boltz's writers take from a prediction: its chains, residues (a ligand's atom tokens,
// consecutive with one chain and residue number, grouped into their residue), atoms and bonds.
BoltzStructureInfo boltz_structure_info(const bio::Prediction& p);
// Its samples, in the prediction's order: coordinates, per-token pLDDT, PAE and PDE (empty when
// undefined), and the confidence summary from the sample's named scores (0 when one is absent)
// and its "pair_chains_iptm".
std::vector<BoltzSample> boltz_samples(const bio::Prediction& p);

// boltz's ranking: rank[sample] = position of the sample when sorted by confidence_score,
// highest first (ties keep sample order, as torch.argsort's stable CPU sort does for these
// sizes); the file suffix _model_<rank>.
std::vector<int32_t> boltz_ranks(const std::vector<BoltzSample>& samples);

// boltz's confidence_score per sample: (4 complex_plddt + iptm) / 5, with ptm instead of iptm
// for every sample when all iptm are ~0 (torch.allclose to zero: single-chain inputs).
std::vector<float> boltz_confidence_scores(const std::vector<float>& complex_plddt,
                                           const std::vector<float>& iptm,
                                           const std::vector<float>& ptm);

// The element boltz writes for an atom name in a residue (boltz.data.write's rule for Boltz-2).
std::string boltz_element(const std::string& atom_name, const std::string& residue_name);

// File contents, byte for byte as boltz writes them (coords (num_atoms, 3), plddt 0-1 per
// token). The mmCIF follows what boltz builds with ihm/modelcif: entities, chemical components
// (ihm's RNA/DNA alphabet names and weights), sequences, schemes, atom_site with pLDDT x 100 as
// B_iso, and per-residue pLDDT. Proven equal for polymers (one entity shared by copies, long
// sequences), one-residue chains and single-residue ligands; a ligand of several residues (a
// glycan, which ihm writes as a branched entity with its own categories) gets the same atom_site
// and pLDDT rows but not ihm's branch categories.
std::string boltz_pdb(const BoltzStructureInfo& s, const std::vector<float>& coords,
                      const std::vector<float>& plddt);
std::string boltz_mmcif(const BoltzStructureInfo& s, const std::vector<float>& coords,
                        const std::vector<float>& plddt);
std::string boltz_confidence_json(const BoltzConfidence& c);
// affinity_<name>.json as boltz's BoltzAffinityWriter writes it: json.dumps(indent=4), no
// trailing newline, values as Python floats.
std::string boltz_affinity_json(const std::vector<std::pair<std::string, double>>& values);
// Python's repr of a double (json.dumps' float format): shortest round-trip digits.
std::string python_float_repr(double v);

// Writes predictions/<name>/ under `predictions_dir` (boltz_results_<input>/predictions):
//   <name>_model_<k>.cif|.pdb, confidence_<name>_model_<k>.json, plddt_<name>_model_<k>.npz
//   (key "plddt"), pae_/pde_<name>_model_<k>.npz (keys "pae", "pde") with k the rank, and
//   affinity_<name>.json when opt.affinity holds values.
// All files are made in a hidden staging folder next to the target, which then replaces
// predictions/<name> in one rename: a failure leaves no part of the new output (and an earlier
// output of the same name untouched). Returns the folder written.
std::string write_boltz_prediction(const std::string& predictions_dir, const std::string& name,
                                   const BoltzStructureInfo& s,
                                   const std::vector<BoltzSample>& samples,
                                   const BoltzWriteOptions& opt = {});

// boltz's output folder for an input file: <out_dir>/boltz_results_<stem of input>.
std::string boltz_results_dir(const std::string& out_dir, const std::string& input_path);

}  // namespace bioinfer::io
