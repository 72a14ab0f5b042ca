// Relative-position encoding of the pair track: each residue pair's clipped offset in residue
// numbers picks a row of a learned table (ESMFold). The chain-aware AlphaFold 3 encoding of
// Boltz-2 and ESMFold2 (token, chain and entity terms) joins it here.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/model_dir.h"

namespace bioinfer::nn {

struct RelativePosition {
    int64_t bins = 32;  // offsets clipped to [-bins, bins]
    Tensor table;       // (2 * bins + 2, C); row 0 is upstream's padding class, never picked
    // <prefix>.embedding.weight
    static RelativePosition load(const io::ModelDir& m, const std::string& prefix, int64_t bins,
                                 int64_t c);
    // (L, L) I32 table rows, pair (i, j): clamp(r_j - r_i, -bins, bins) + bins + 1.
    Tensor classes(const std::vector<int64_t>& residue_index) const;
};

}  // namespace bioinfer::nn
