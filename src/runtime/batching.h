// Length batching: sort by length, fill batches up to a token budget. The models run a batch
// packed (no padding), so the budget counts real tokens; longest first keeps the attention work of
// a batch even across threads.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace bioinfer::runtime {

// lengths: tokens per item (with special tokens). Returns batches of item indices, longest first.
// A batch holds items whose lengths sum to at most toks_per_batch; an item longer than the budget
// forms a batch of its own.
std::vector<std::vector<size_t>> make_batches(const std::vector<int64_t>& lengths,
                                              int64_t toks_per_batch);

}  // namespace bioinfer::runtime
