// Boltz-2's confidence module (boltz 2.2.1 confidencev2, inference): the trunk's s and z
// re-embedded with the input terms and the sampled structure's representative-atom distogram, an
// own pairformer stack per sample, the heads (separate intra/inter-chain PAE and PDE, per-token
// pLDDT and resolved) and the aggregates boltz reports (pLDDT, ipLDDT, PDE, iPDE, pTM, ipTM,
// ligand/protein ipTM, chain-pair ipTM).
#pragma once
#include <cstdint>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "models/boltz2/config.h"
#include "models/boltz2/features.h"
#include "models/boltz2/trunk.h"

namespace bioinfer::boltz2 {

// Per sample (the leading dimension S = samples), as boltz's confidence module returns them.
struct ConfidenceOutput {
    Tensor pae_logits, pde_logits;         // (S, L, L, num_pae_bins / num_pde_bins)
    Tensor plddt_logits, resolved_logits;  // (S, L, num_plddt_bins), (S, L, 2)
    Tensor pae, pde;                       // (S, L, L) Angstrom: expected values over [0, 32]
    Tensor plddt;                          // (S, L) in [0, 1]
    // (S) each
    Tensor complex_plddt, complex_iplddt, complex_pde, complex_ipde;
    Tensor ptm, iptm, ligand_iptm, protein_iptm;
    // (n_chain, n_chain, S): [a][b] = boltz's pair_chains_iptm[chains[a]][chains[b]], the best
    // (over frames i of chain b) mean TM term over tokens j of chain a
    Tensor pair_chains_iptm;
    std::vector<int64_t> chains;  // the asym ids, ascending
};

struct ConfidenceModule {
    Config cfg;
    nn::LayerNorm s_inputs_norm, s_norm, z_norm;
    nn::Linear s_input_to_s;         // undefined unless add_s_input_to_s
    bool add_z_input_to_z = true;
    PairInputEmbedding pair_inputs;  // its own weights (confidence_module.rel_pos, ...)
    nn::Linear s_to_z, s_to_z_transpose;
    nn::Linear s_to_z_prod_in1, s_to_z_prod_in2, s_to_z_prod_out;  // undefined unless add_s_to_z_prod
    Tensor dist_embed;  // (num_dist_bins, C)
    Tensor bounds_sq;   // (num_dist_bins - 1) the bins' squared boundaries (linspace(2, max, n-1))
    nn::PairformerStack pairformer;
    nn::Linear pae_intra, pae_inter, pde_intra, pde_inter;  // C_z -> bins, no bias
    nn::Linear to_plddt, to_resolved;                       // C_s -> bins / 2, no bias

    static ConfidenceModule load(const io::ModelDir& m, const Config& cfg);
    // s_inputs, s (L, token_s), z (L, L, token_z): the trunk's; x_pred (samples, atoms, 3) the
    // sampled coordinates (atoms padded as the features are); pdistogram (L, L, num_bins) the
    // trunk's distogram logits. The tap sees "<k>.s_embed" / ".z_embed" (the stack's inputs)
    // and "<k>.s_stack" / ".z_stack" (its outputs) for sample k.
    ConfidenceOutput run(const Features& f, const Tensor& s_inputs, const Tensor& s,
                         const Tensor& z, const Tensor& x_pred, const Tensor& pdistogram,
                         const Tap& tap = {}) const;
};

// The frame-validity mask of pTM (L) for one sample's coordinates x (atoms, 3): token i's frame
// atoms (boltz's frames_idx; a nonpolymer chain of >= 3 atoms takes each atom's two nearest
// atoms of its chain instead) must not be collinear (|cos| < 0.9063) or overlapping (> 0.01 A).
std::vector<float> frame_mask(const Features& f, const Tensor& x);

}  // namespace bioinfer::boltz2
