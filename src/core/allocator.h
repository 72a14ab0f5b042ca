// Caching allocator for activations: freed blocks are kept by size and handed out again, so a
// run over many same-shaped batches stops calling malloc after the first one.
#pragma once
#include <cstddef>
#include <memory>

namespace bioinfer {

// 64-byte aligned block of at least `bytes`; released back to the cache when the last owner goes.
std::shared_ptr<void> pooled_alloc(size_t bytes);
// Frees every cached block (not those in use).
void pool_trim();
size_t pool_cached_bytes();

}  // namespace bioinfer
