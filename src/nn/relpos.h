// Relative-position encodings of the pair track: ESMFold's, where each residue pair's clipped
// offset in residue numbers picks a row of a learned table, and the chain-aware AlphaFold 3
// encoding Boltz-2 and ESMFold2 share (token, chain and entity terms).
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

// AlphaFold 3's chain-aware relative position encoding (Algorithm 3) as Boltz-2 computes it: a
// bias-free linear over [one-hot residue offset (2 r_max + 2), one-hot token offset (2 r_max + 2),
// same entity (1), one-hot chain offset (2 s_max + 2)] of each token pair (i, j):
//  - residue offset clip(r_i - r_j + r_max, 0, 2 r_max), class 2 r_max + 1 across chains; with
//    `cyclic` and any cyclic_period > 0, r_i - r_j is first wrapped by the period of token j;
//  - token offset clip(t_i - t_j + r_max, 0, 2 r_max), class 2 r_max + 1 unless same chain and
//    same residue;
//  - chain offset clip(sym_i - sym_j + s_max, 0, 2 s_max), class 2 s_max + 1 when the chain bucket
//    rule fires: Boltz-2 with fix_sym_check fires it when the entities differ; without (and
//    ESMFold2-style) it fires within the same chain.
// The linear over one-hots is evaluated as a sum of its columns (table rows).
struct ChainRelativePosition {
    enum class ChainBucket { DifferentEntity, SameChain };
    int64_t r_max = 32, s_max = 2;
    ChainBucket chain_bucket = ChainBucket::DifferentEntity;
    bool cyclic = false;
    Tensor table;  // (4 (r_max + 1) + 2 (s_max + 1) + 2, C): the linear's columns, then a zero row
    // <prefix>.weight (C, 4 (r_max + 1) + 2 (s_max + 1) + 1), no bias
    static ChainRelativePosition load(const io::ModelDir& m, const std::string& prefix, int64_t c,
                                      ChainBucket bucket, bool cyclic, int64_t r_max = 32,
                                      int64_t s_max = 2);
    // Per-token features (L) F32 holding exact integers (cyclic_period may be undefined: none).
    struct Tokens {
        Tensor asym_id, residue_index, entity_id, token_index, sym_id, cyclic_period;
    };
    // (L, L, C)
    Tensor operator()(const Tokens& t) const;
};

}  // namespace bioinfer::nn
