// The MSA-side blocks AlphaFold3-style trunks share (Boltz-2's MSA module, ESMFold2's MSA
// encoder): the pair-weighted average of the MSA rows and the outer product mean into the pair.
// Each model names its tensors its own way (the Names structs); where the two compute
// differently, a switch says which (OuterProductMeanNames::divide_before_projection).
#pragma once
#include <cstdint>
#include <string>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "nn/transformer.h"

namespace bioinfer::nn {

struct PairWeightedAveragingNames {
    std::string norm_m = "norm_m", norm_z = "norm_z", proj_m = "proj_m", proj_g = "proj_g",
                proj_z = "proj_z", proj_o = "proj_o";
    static PairWeightedAveragingNames boltz2() { return {}; }
    static PairWeightedAveragingNames esmfold2();  // norm_single, bias_norm, v_proj, ...
};

// m (S, L, c_m) += proj_o(sigmoid(proj_g(LN(m))) * o), o[s, i, h] =
// sum_j softmax_j(proj_z(LN(z))[i, j, h]) proj_m(LN(m))[s, j, h]. Masks are all ones (one target).
struct PairWeightedAveraging {
    int64_t heads = 8, head_dim = 32;
    LayerNorm norm_m, norm_z;
    Linear proj_m, proj_g, proj_z, proj_o;
    static PairWeightedAveraging load(const io::ModelDir& m, const std::string& prefix, int64_t c_m,
                                      int64_t c_z, int64_t head_dim = 32, int64_t heads = 8,
                                      const PairWeightedAveragingNames& n = {});
    void add_to(Tensor& m, const Tensor& z) const;
};

struct OuterProductMeanNames {
    std::string norm = "norm", proj_a = "proj_a", proj_b = "proj_b", proj_o = "proj_o";
    std::string proj_ab;  // set: a's and b's rows stacked in this one weight (a first)
    // boltz divides the sum by the rows before the output linear (its bias not divided);
    // ESMFold2 divides after it (bias divided too)
    bool divide_before_projection = true;
    static OuterProductMeanNames boltz2() { return {}; }
    static OuterProductMeanNames esmfold2();  // input_proj (a; b), output_proj, divided after
};

// z[i, j] += proj_o(sum_s a[s, i] (x) b[s, j] / n) with a, b = proj_a, proj_b of LN(m) and n the
// MSA rows (where the division falls: see OuterProductMeanNames).
struct OuterProductMean {
    int64_t hidden = 32;
    bool divide_before_projection = true;
    LayerNorm norm;
    Linear proj_a, proj_b, proj_o;
    static OuterProductMean load(const io::ModelDir& m, const std::string& prefix, int64_t c_m,
                                 int64_t c_z, int64_t hidden, const OuterProductMeanNames& n);
    // m (S, L, c_m), z (L, L, c_z); every MSA row counts (msa_mask all ones).
    void add_to(const Tensor& m, Tensor& z, int64_t chunk = 0) const;
};

}  // namespace bioinfer::nn
