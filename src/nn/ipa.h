// Invariant point attention (AlphaFold 2 algorithm 22), the attention of the structure module:
// scalar query/key attention, a pair bias and a distance term between query and key points placed
// in each residue's frame, attending over values, value points (returned to the local frame, with
// their norms) and the pair representation.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "core/rigid.h"
#include "io/model_dir.h"
#include "nn/transformer.h"

namespace bioinfer::nn {

// Checkpoint names of an IPA relative to its prefix; OpenFold's (ESMFold) are the defaults.
struct InvariantPointAttentionNames {
    std::string q = "linear_q", kv = "linear_kv", q_points = "linear_q_points",
                kv_points = "linear_kv_points", b = "linear_b", out = "linear_out";
    std::string head_weights = "head_weights";  // (heads), before softplus
};

struct InvariantPointAttention {
    int64_t heads = 0, dim = 0, qk_points = 0, v_points = 0;
    float eps = 1e-8f;
    Linear q, kv, q_points, kv_points, b, out;
    Tensor head_weights;  // (heads): softplus(w) * sqrt(1 / (3 * qk_points * 9 / 2))
    // prefix: e.g. "trunk.structure_module.ipa"
    static InvariantPointAttention load(const io::ModelDir& m, const std::string& prefix,
                                        int64_t c_s, int64_t c_z, int64_t dim, int64_t heads,
                                        int64_t qk_points, int64_t v_points, float eps,
                                        const InvariantPointAttentionNames& names = {});
    // update (L, c_s) from s (L, c_s), z (L, L, c_z) and the residues' frames (L, 7):
    // quaternion (w, x, y, z) and translation.
    void operator()(const Tensor& s, const Tensor& z, const Tensor& frames, Tensor& update) const;
};

}  // namespace bioinfer::nn
