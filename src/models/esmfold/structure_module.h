// AlphaFold 2's structure module as ESMFold uses it (algorithm 20): invariant point attention
// and a transition repeated with shared weights, a quaternion backbone update per block, and the
// angle resnet whose torsions place every heavy atom through the residue-constant rigid groups.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "core/rigid.h"
#include "io/model_dir.h"
#include "nn/ipa.h"
#include "nn/transformer.h"

namespace bioinfer::esmfold {

struct StructureModuleConfig {
    int64_t c_s = 384, c_z = 128, ipa_dim = 16, resnet_dim = 128, heads = 12, qk_points = 4,
            v_points = 8, blocks = 8, transition_layers = 1, resnet_blocks = 2, angles = 7;
    float trans_scale = 10.0f, eps = 1e-8f;
};

// Per block (blocks, ...) as the reference stacks them; positions and frames in Angstrom.
struct StructureOutput {
    Tensor frames;     // (blocks, L, 7): quaternion (w, x, y, z), translation
    Tensor positions;  // (blocks, L, 14, 3): atom14
    Tensor angles;     // (blocks, L, 7, 2): normalised (sin, cos)
    Tensor states;     // (blocks, L, c_s)
};

// Checkpoint names relative to the module's prefix; transformers' EsmFoldStructureModule.
// Numbered layers are "<list>.<l>.<linear><k>" (e.g. "transition.layers.0.linear_1").
struct StructureModuleNames {
    std::string ln_s = "layer_norm_s", ln_z = "layer_norm_z", ln_ipa = "layer_norm_ipa";
    std::string linear_in = "linear_in";
    std::string ipa = "ipa";
    nn::InvariantPointAttentionNames ipa_names;
    std::string transition_ln = "transition.layer_norm";
    std::string transition_layers = "transition.layers", transition_linear = "linear_";  // k 1..3
    std::string bb_update = "bb_update.linear";
    std::string angle_resnet = "angle_resnet";  // the names below are relative to it
    std::string angle_in = "linear_in", angle_initial = "linear_initial", angle_out = "linear_out";
    std::string angle_layers = "layers", angle_linear = "linear_";  // k 1..2
};

class StructureModule {
public:
    static StructureModule load(const io::ModelDir& m, const std::string& prefix,
                                const StructureModuleConfig& c,
                                const StructureModuleNames& names = {});
    // s (L, c_s) and z (L, L, c_z): the trunk's projections (before this module's LayerNorms).
    StructureOutput operator()(const Tensor& s, const Tensor& z,
                               const std::vector<int32_t>& aatype) const;

private:
    StructureModuleConfig cfg_;
    nn::LayerNorm ln_s_, ln_z_, ln_ipa_, ln_transition_;
    nn::Linear linear_in_;
    nn::InvariantPointAttention ipa_;
    std::vector<nn::Linear> transition_;  // 3 per layer
    nn::Linear bb_update_;
    nn::Linear angle_in_, angle_initial_, angle_out_;
    std::vector<nn::Linear> angle_blocks_;  // 2 per block
};

// atom14 (L, 14, 3) -> atom37 (L, 37, 3) for residues `aatype`; exists (L, 37) is 1 where the
// residue type has that atom.
void atom14_to_atom37(const Tensor& atom14, const std::vector<int32_t>& aatype, Tensor& atom37,
                      Tensor& exists);

}  // namespace bioinfer::esmfold
