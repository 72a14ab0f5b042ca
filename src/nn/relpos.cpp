// Relative-position classes of residue pairs.
#include "nn/relpos.h"

#include <algorithm>

namespace bioinfer::nn {

RelativePosition RelativePosition::load(const io::ModelDir& m, const std::string& prefix,
                                        int64_t bins, int64_t c) {
    RelativePosition r;
    r.bins = bins;
    r.table = m.get_f32(prefix + ".embedding.weight", {2 * bins + 2, c});
    return r;
}

std::vector<int32_t> RelativePosition::classes(const std::vector<int64_t>& residue_index) const {
    const int64_t L = int64_t(residue_index.size());
    std::vector<int32_t> relpos(size_t(L * L));
    for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < L; ++j) {
            const int64_t d = residue_index[size_t(j)] - residue_index[size_t(i)];
            relpos[size_t(i * L + j)] = int32_t(std::clamp(d, -bins, bins) + bins + 1);
        }
    return relpos;
}

}  // namespace bioinfer::nn
