// Boltz-2's affinity module (boltz 2.2.1 AffinityModule, model/modules/affinity.py): from the
// affinity model's trunk pair z restricted to ligand-receptor and ligand-ligand pairs, the input
// embedding and one predicted structure, a binding-affinity value and a binder logit.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "models/boltz2/affinity_crop.h"
#include "models/boltz2/embedder.h"
#include "models/boltz2/features.h"
#include "models/boltz2/trunk.h"
#include "nn/transformer.h"

namespace bioinfer::boltz2 {

// The pairs the affinity module looks at (N, N) 0/1: binder ligand with receptor (protein tokens)
// both ways, and binder with binder; the binder's tokens are affinity_token_mask's.
Tensor affinity_pair_mask(const Features& f);

struct AffinityOutput {
    float value = 0;  // affinity_pred_value
    float logit = 0;  // affinity_logits_binary (its sigmoid: the binder probability)
};

struct AffinityModule {
    nn::LayerNorm z_norm;
    nn::Linear z_linear;                  // token_z -> token_z, no bias
    nn::Linear s_to_z_in1, s_to_z_in2;    // token_s -> token_z, no bias (row and column terms)
    Tensor dist_embed;                    // (bins, token_z)
    Tensor boundaries_sq;                 // (bins - 1) the bins' squared boundaries
    PairwiseConditioner conditioner;      // over [z, distance embedding], 2 transitions
    std::vector<nn::PairformerNoSeqLayer> stack;
    // heads: g = relu(out2(relu(out1(masked mean of z)))); value = v3(relu(v2(relu(v1(g)))));
    // score likewise from p1..p3; logit = to_logit(score)
    nn::Linear out1, out2, v1, v2, v3, p1, p2, p3, to_logit;

    // prefix "affinity_module1" / "affinity_module2" (or "affinity_module"); widths, pairformer
    // depth and heads come from the tensors.
    static AffinityModule load(const io::ModelDir& m, const std::string& prefix, int64_t token_s,
                               int64_t token_z);

    // s_inputs (N, token_s) the input embedding with the affinity profile; z (N, N, token_z) the
    // trunk's pair masked by affinity_pair_mask; coords (A, 3) the chosen sample's atoms. The tap
    // sees "z_in" (after the input terms), "z_cond", "z_stack" and "g" (the pooled pair).
    AffinityOutput forward(const Tensor& s_inputs, const Tensor& z, const Tensor& coords,
                           const Features& f, const Tap& tap = {}) const;
};

}  // namespace bioinfer::boltz2
