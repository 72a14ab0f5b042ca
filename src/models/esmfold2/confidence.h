// ESMFold2's confidence head (transformers' EsmFold2ConfidenceHead), per diffusion sample: the
// pair LN(z_trunk) + relpos + bonds + s_inputs' single-to-pair terms and their product, plus the
// embedding of each token pair's representative-atom distance bin; a pair-update stack added to
// it (pair + stack(pair)); row attention pooling to a single; per-atom pLDDT and resolved logits
// from weights chosen by the atom's position within its token; PAE and PDE heads on the pair; pTM,
// ipTM and the chain-pair ipTM from the PAE.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "models/esmfold2/config.h"
#include "models/esmfold2/trunk.h"

namespace bioinfer::esmfold2 {

struct ConfidenceOutput {
    Tensor plddt_logits;            // (S, A, plddt bins)
    Tensor plddt_per_atom;          // (S, A) in [0, 1]
    Tensor plddt;                   // (S, N) per-token mean over its atoms
    Tensor plddt_ca;                // (S, N) at the representative atom
    Tensor resolved_logits;         // (S, A, 2)
    Tensor pae_logits, pde_logits;  // (S, N, N, bins)
    Tensor pae, pde;                // (S, N, N) Angstrom
    std::vector<float> complex_plddt, complex_iplddt, ptm, iptm;  // per sample
    Tensor pair_chains_iptm;                                      // (S, chains, chains)
};

struct ConfidenceHead {
    Config cfg;
    std::vector<float> boundaries;  // distance-bin boundaries (bins - 1)
    Tensor dist_embed;              // (bins, C)
    nn::LayerNorm s_norm, z_norm;
    nn::Linear s_to_z, s_to_z_t, prod_in1, prod_in2, prod_out;
    nn::PairformerNoSeqStack stack;
    nn::Linear pool_score, pool_out;  // C -> 1, C -> c_s
    nn::LayerNorm plddt_ln, resolved_ln, pae_ln, pde_ln;
    nn::Linear plddt_lin, resolved_lin;  // c_s -> 23 * bins, 23 * 2: every position's weights
    nn::Linear pae_head, pde_head;

    static ConfidenceHead load(const io::ModelDir& m, const Config& cfg);
    // coords (S, A, 3). Taps: conf.pair (S, N, N, C) after the stack, conf.single (S, N, c_s).
    ConfidenceOutput run(const Inputs& in, const TrunkOutput& trunk, const Tensor& coords,
                         const Tap& tap = {}) const;
};

}  // namespace bioinfer::esmfold2
