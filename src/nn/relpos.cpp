// Relative-position classes of residue pairs.
#include "nn/relpos.h"

#include "ops/ops.h"

namespace bioinfer::nn {

RelativePosition RelativePosition::load(const io::ModelDir& m, const std::string& prefix,
                                        int64_t bins, int64_t c) {
    RelativePosition r;
    r.bins = bins;
    r.table = m.get_f32(prefix + ".embedding.weight", {2 * bins + 2, c});
    return r;
}

Tensor RelativePosition::classes(const std::vector<int64_t>& residue_index) const {
    const int64_t L = int64_t(residue_index.size());
    // The input's residue numbers as an index tensor (they fit 32 bits: chains offset by 512).
    const Tensor index = Tensor::of(std::vector<int32_t>(residue_index.begin(), residue_index.end()));
    Tensor out = Tensor::empty({L, L}, DType::I32);
    ops::relpos_classes(index, bins, out);
    return out;
}

}  // namespace bioinfer::nn
