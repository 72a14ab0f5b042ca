// The pairformer of AlphaFold-3-family trunks (AlphaFold 3 algorithm 17; boltz's
// PairformerNoSeqLayer / PairformerLayer / PairformerModule, ESMFold2's pair update layers and
// stacks): the pair updates (triangle multiplication over outgoing and incoming edges, triangle
// attention around the starting and ending node where the model has it, the pair transition),
// then, in a full layer, the single track's pair-biased attention and transition; and stacks of
// either. Each model names its tensors its own way (PairformerNames).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "nn/pair_seq.h"
#include "nn/transformer.h"
#include "nn/triangle.h"

namespace bioinfer::nn {

// Checkpoint names of a layer's pair updates, relative to its prefix, and the blocks' own name
// maps. The defaults are boltz's module names.
struct PairformerNames {
    std::string tri_mul_out = "tri_mul_out", tri_mul_in = "tri_mul_in";
    std::string tri_att_start = "tri_att_start", tri_att_end = "tri_att_end";  // empty: none
    std::string transition = "transition_z";
    TriangleMultiplicationNames tri_mul;
    TriangleAttentionNames tri_att;
    ResidueMlpNames transition_names;
    // Boltz-2's PairformerNoSeqLayer: the Boltz-2 layouts of every block.
    static PairformerNames boltz2();
    // ESMFold2's EsmFold2PairUpdateLayer: no triangle attention, pair_transition.
    static PairformerNames esmfold2();
};

// The pair updates of a pairformer layer: z += tri_mul_out, tri_mul_in, tri_att_start,
// tri_att_end (when the layer has triangle attention), transition_z, each on the z the previous
// one left.
struct PairformerNoSeqLayer {
    TriangleMultiplication tri_mul_out, tri_mul_in;
    TriangleAttention tri_att_start, tri_att_end;  // heads 0: the layer has none
    ResidueMlp transition_z;                       // SwiGLU
    // transition: the transition's hidden width (Boltz-2's 4 c_z); tri_head_dim / tri_heads: the
    // triangle attention's, given when `names` has one.
    static PairformerNoSeqLayer load(const io::ModelDir& m, const std::string& prefix, int64_t c_z,
                                     int64_t transition, const PairformerNames& names,
                                     int64_t tri_head_dim = 0, int64_t tri_heads = 0);
    bool has_triangle_attention() const { return tri_att_start.heads > 0; }
    // z (L, L, C) in place; pair_mask (L, L) 0/1 masks the triangle updates (nn/triangle.h)
    void run(Tensor& z, const Tensor* pair_mask = nullptr) const;
};

// A stack of PairformerNoSeqLayers, "<prefix>.layers.<i>" (ESMFold2's pair stacks).
struct PairformerNoSeqStack {
    std::vector<PairformerNoSeqLayer> layers;
    static PairformerNoSeqStack load(const io::ModelDir& m, const std::string& prefix,
                                     int64_t blocks, int64_t c_z, int64_t transition,
                                     const PairformerNames& names, int64_t tri_head_dim = 0,
                                     int64_t tri_heads = 0);
    void run(Tensor& z) const;
};

// PairformerLayer (boltz's v2, its names; transitions 4 C wide): the pair updates of
// PairformerNoSeqLayer, then s += AttentionPairBias(LN(s), z) (bias LN(z) -> heads, mask -1e6
// never fires without padding) and s += transition_s(s).
struct PairformerLayer {
    PairformerNoSeqLayer pair;
    LayerNorm pre_norm_s;
    LayerNorm bias_norm;  // attention.proj_z.0
    Linear bias_proj;     // attention.proj_z.1: C_z -> heads
    GatedBiasedAttention attention;
    ResidueMlp transition_s;  // SwiGLU, 4 C_s
    static PairformerLayer load(const io::ModelDir& m, const std::string& prefix, int64_t c_s,
                                int64_t c_z, int64_t heads, int64_t tri_head_dim,
                                int64_t tri_heads);
    // The attention's update for LN(s) `s_normed` (L, C_s), without adding it anywhere.
    Tensor attention_update(const Tensor& s_normed, const Tensor& z) const;
    void run(Tensor& s, Tensor& z) const;
};

// A stack of PairformerLayers, "<prefix>.layers.<k>" (boltz's PairformerModule); the tap, when
// set, sees "<tap_prefix>block<k>.s" / ".z" after block k.
struct PairformerStack {
    std::vector<PairformerLayer> layers;
    // prefix e.g. "pairformer_module" or "confidence_module.pairformer_stack"
    static PairformerStack load(const io::ModelDir& m, const std::string& prefix, int64_t blocks,
                                int64_t c_s, int64_t c_z, int64_t heads, int64_t tri_head_dim,
                                int64_t tri_heads);
    void run(Tensor& s, Tensor& z,
             const std::function<void(const std::string& name, const Tensor& t)>& tap = {},
             const std::string& tap_prefix = "") const;
};

}  // namespace bioinfer::nn
