// Greedy length batching over items sorted longest first (ties keep input order).
#include "runtime/batching.h"

#include <algorithm>
#include <numeric>

namespace bioinfer::runtime {

std::vector<std::vector<size_t>> make_batches(const std::vector<int64_t>& lengths,
                                              int64_t toks_per_batch) {
    std::vector<size_t> order(lengths.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return lengths[a] > lengths[b]; });
    std::vector<std::vector<size_t>> batches;
    int64_t total = 0;
    for (size_t i : order) {
        if (batches.empty() || total + lengths[i] > toks_per_batch) {
            batches.push_back({i});
            total = lengths[i];
        } else {
            batches.back().push_back(i);
            total += lengths[i];
        }
    }
    return batches;
}

}  // namespace bioinfer::runtime
