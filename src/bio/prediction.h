// A predicted structure as every structure model returns it and every writer reads it (as
// gemmi's model.hpp holds a structure): chains, tokens and named atoms shared by all samples, and
// per sample the coordinates with their confidences (pLDDT, PAE/PDE, named scores).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bio/molecule.h"
#include "bioinfer/tensor.h"

namespace bioinfer::bio {

// The predicted model's topology, shared by all samples. Tokens are the units of per-token
// confidences and of PAE: a residue of a polymer, an atom of a ligand.
struct PredictedChain {
    std::string id;
    MoleculeType type = MoleculeType::Protein;
    int64_t first_token = 0, tokens = 0;
    int32_t entity = 0;  // chains with the same entity are copies of one molecule
};
struct Token {
    int32_t chain = 0;                  // index into Prediction::chains
    int32_t residue = 0;                // residue number written out (1-based within the chain)
    std::string name;                   // residue name: "ALA", "DA", "U", a CCD code
    char letter = 'X';                  // one-letter code (X when none)
    int64_t first_atom = 0, atoms = 0;  // its atoms are [first_atom, first_atom + atoms)
    int64_t rep_atom = -1;              // Calpha of an amino acid (C1' of a nucleotide); -1: none
};
struct Atom {
    int64_t token = 0;
    std::string name;     // "CA"
    std::string element;  // "C"
};

// One predicted structure with its confidences.
struct Sample {
    Tensor coords;       // (atoms, 3) Angstrom
    Tensor plddt;        // (atoms) in [0, 1]
    Tensor token_plddt;  // (tokens) in [0, 1]
    Tensor pae, pde;     // (tokens, tokens) Angstrom; undefined when the model has no such head
    // Named scalars: "ptm", and for complexes "iptm", "confidence_score", ... Written into the
    // confidence JSON under these names, which must not be one of its own keys.
    std::map<std::string, double> scores;
    // Named (chains, chains) scores, e.g. "pair_chains_iptm".
    std::map<std::string, Tensor> chain_pair_scores;
};

struct Prediction {
    std::vector<PredictedChain> chains;
    std::vector<Token> tokens;
    std::vector<Atom> atoms;
    // Bonds between atoms (indices into atoms) a structure file records: ligands' own bonds,
    // written as PDB CONECT records as boltz writes them.
    std::vector<std::pair<int64_t, int64_t>> bonds;
    std::vector<Sample> samples;  // best first, by the model's own ranking
    int num_recycles = 0;         // what the run used
    // Per-target predictions beside the structure, in the model's order (Boltz-2's affinity:
    // affinity_pred_value, affinity_probability_binary, then per ensemble member).
    std::vector<std::pair<std::string, double>> properties;
    std::vector<std::pair<std::string, double>> stage_seconds;  // in run order
    // The model's internal representations, when asked for (Boltz-2's --write_embeddings: "s"
    // (1, tokens, token_s) and "z" (1, tokens, tokens, token_z), the trunk's final single and
    // pair representations); empty otherwise.
    std::map<std::string, Tensor> embeddings;
};

}  // namespace bioinfer::bio
