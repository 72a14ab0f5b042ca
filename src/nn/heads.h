// Heads on a structure model's trunk outputs: the distogram (ESMFold's symmetrised form and the
// W(z + z^T) + b of Boltz-2 and ESMFold2), ESMFold's pLDDT, and the predicted aligned error
// (PAE) with pTM, and the bin edges the heads and features take from torch.linspace. Boltz-2's
// and ESMFold2's confidence modules (per-atom pLDDT, intra/inter-chain PAE and PDE, the
// frame-validity mask of pTM) are their own (models/*/confidence.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "nn/transformer.h"

namespace bioinfer::nn {

// torch.linspace(start, end, steps) in fp32 as its CPU kernel computes it: the first half from
// the start, the second half back from the end.
std::vector<float> torch_linspace(float start, float end, int64_t steps);

// Distance-bin logits symmetrised as ESMFold does, (W z_ij + W z_ji) / 2, or, with `sum_pairs`,
// as Boltz-2 and ESMFold2 do, W (z_ij + z_ji) + b.
struct DistogramHead {
    Linear proj;  // C -> bins
    int64_t bins = 64;
    bool sum_pairs = false;
    static DistogramHead load(const io::ModelDir& m, const std::string& prefix, int64_t c,
                              int64_t bins, bool sum_pairs = false);
    // z (L, L, C) -> (L, L, bins), symmetric in (i, j)
    Tensor operator()(const Tensor& z) const;
};

// ESMFold's lddt_head: LayerNorm, then three linear layers (no activation between, as upstream)
// to `bins` lDDT bins per atom slot; the pLDDT is the expected bin centre.
struct PlddtHead {
    LayerNorm ln;
    Linear l1, l2, l3;  // c_s -> hidden -> hidden -> atoms * bins
    int64_t atoms = 37, bins = 50;
    Tensor centres;  // (bins) the bins' centres in [0, 1]
    // <prefix>.0 (LayerNorm), .1, .2, .3 (linear)
    static PlddtHead load(const io::ModelDir& m, const std::string& prefix, int64_t c_s,
                          int64_t hidden, int64_t atoms, int64_t bins);
    // s (L, c_s) -> (L, atoms) in [0, 1]
    Tensor operator()(const Tensor& s) const;
};

struct AlignedError {
    Tensor pae;  // (L, L) Angstrom: expected aligned error of residue j in the frame of i
    float ptm = 0;
};

// PAE and pTM from aligned-error logits over bins 0.5 A wide (centres 0.25 .. 31.75), pTM with
// TM-score's d0 for max(L, 19) residues: softmax over the bins, in place, then expectations.
// logits (L * L, 64).
AlignedError aligned_error_from_logits(Tensor& logits, int64_t L);

// ESMFold's ptm_head: a linear layer to aligned-error bins, then aligned_error_from_logits.
struct AlignedErrorHead {
    Linear proj;  // C -> 64
    static AlignedErrorHead load(const io::ModelDir& m, const std::string& prefix, int64_t c);
    AlignedError operator()(const Tensor& z) const;  // z (L, L, C)
};

}  // namespace bioinfer::nn
