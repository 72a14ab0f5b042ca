// Caching allocator: a size-keyed free list guarded by one mutex (allocation is not on hot paths).
#include "core/allocator.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <new>

namespace bioinfer {
namespace {

struct Pool {
    std::mutex mu;
    std::multimap<size_t, void*> free_blocks;  // capacity -> block
    size_t cached = 0;

    ~Pool() {
        for (auto& [cap, p] : free_blocks) std::free(p);
    }
};

Pool& pool() {
    static Pool* p = new Pool();  // leaked on purpose: tensors may outlive static destruction
    return *p;
}

size_t round_capacity(size_t bytes) {
    // Round to 4 KiB (small) or 1/16 of the next power of two (large) so near sizes share blocks.
    if (bytes <= 4096) return 4096;
    size_t p = 1;
    while (p < bytes) p <<= 1;
    size_t step = p >> 4;
    return (bytes + step - 1) / step * step;
}

}  // namespace

std::shared_ptr<void> pooled_alloc(size_t bytes) {
    size_t cap = round_capacity(bytes);
    Pool& pl = pool();
    void* ptr = nullptr;
    {
        std::lock_guard<std::mutex> lock(pl.mu);
        auto it = pl.free_blocks.lower_bound(cap);
        if (it != pl.free_blocks.end() && it->first <= cap + cap / 4) {
            cap = it->first;
            ptr = it->second;
            pl.free_blocks.erase(it);
            pl.cached -= cap;
        }
    }
    if (!ptr) {
        ptr = std::aligned_alloc(64, cap);
        if (!ptr) throw std::bad_alloc();
    }
    return std::shared_ptr<void>(ptr, [cap](void* p) {
        Pool& pl = pool();
        std::lock_guard<std::mutex> lock(pl.mu);
        pl.free_blocks.emplace(cap, p);
        pl.cached += cap;
    });
}

void pool_trim() {
    Pool& pl = pool();
    std::lock_guard<std::mutex> lock(pl.mu);
    for (auto& [cap, p] : pl.free_blocks) std::free(p);
    pl.free_blocks.clear();
    pl.cached = 0;
}

size_t pool_cached_bytes() {
    Pool& pl = pool();
    std::lock_guard<std::mutex> lock(pl.mu);
    return pl.cached;
}

}  // namespace bioinfer
