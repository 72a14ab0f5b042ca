// Length batching: sort by length, fill batches up to a token budget (padded tokens), so each
// batch is padded only to its own longest member. Masks make a batched result equal the single one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace bioinfer::runtime {

// lengths: tokens per item (with special tokens). Returns batches of item indices, longest first.
// A batch holds n items of max length m with n * m <= toks_per_batch; an item longer than the
// budget forms a batch of its own.
std::vector<std::vector<size_t>> make_batches(const std::vector<int64_t>& lengths,
                                              int64_t toks_per_batch);

}  // namespace bioinfer::runtime
