// numpy's PCG64 + SeedSequence and Generator.integers / choice, reproduced bit for bit.
#include "models/boltz2/numpy_rng.h"

#include <array>
#include <vector>

#include "bioinfer/error.h"

namespace bioinfer::boltz2 {
namespace {

using u128 = unsigned __int128;

constexpr u128 kPcgMultiplier = (u128(0x2360ed051fc65da4ULL) << 64) | u128(0x4385df649fccf645ULL);

// SeedSequence's hash constants (numpy/random/bit_generator.pyx).
constexpr uint32_t kInitA = 0x43b0d7e5u, kMultA = 0x931e8875u, kInitB = 0x8b51f9ddu,
                   kMultB = 0x58f38dedu, kMixMultL = 0xca01f9ddu, kMixMultR = 0x4973f715u;
constexpr int kXShift = 16;
constexpr size_t kPoolSize = 4;

uint32_t hashmix(uint32_t value, uint32_t& hash_const) {
    value ^= hash_const;
    hash_const *= kMultA;
    value *= hash_const;
    value ^= value >> kXShift;
    return value;
}

uint32_t mix(uint32_t x, uint32_t y) {
    uint32_t r = kMixMultL * x - kMixMultR * y;
    r ^= r >> kXShift;
    return r;
}

// SeedSequence(seed).generate_state(4, uint64): the entropy is the seed's 32-bit words, low first.
std::array<uint64_t, 4> seed_sequence_state(uint64_t seed) {
    std::vector<uint32_t> entropy;
    if (seed == 0) entropy.push_back(0);
    for (uint64_t s = seed; s > 0; s >>= 32) entropy.push_back(uint32_t(s & 0xffffffffu));
    std::array<uint32_t, kPoolSize> pool{};
    uint32_t hash_const = kInitA;
    for (size_t i = 0; i < kPoolSize; ++i)
        pool[i] = hashmix(i < entropy.size() ? entropy[i] : 0u, hash_const);
    for (size_t src = 0; src < kPoolSize; ++src)
        for (size_t dst = 0; dst < kPoolSize; ++dst)
            if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src], hash_const));
    for (size_t src = kPoolSize; src < entropy.size(); ++src)
        for (size_t dst = 0; dst < kPoolSize; ++dst)
            pool[dst] = mix(pool[dst], hashmix(entropy[src], hash_const));

    std::array<uint32_t, 8> words{};
    uint32_t hb = kInitB;
    for (size_t i = 0; i < words.size(); ++i) {
        uint32_t v = pool[i % kPoolSize];
        v ^= hb;
        hb *= kMultB;
        v *= hb;
        v ^= v >> kXShift;
        words[i] = v;
    }
    std::array<uint64_t, 4> out{};
    for (size_t i = 0; i < 4; ++i)
        out[i] = uint64_t(words[2 * i]) | uint64_t(words[2 * i + 1]) << 32;
    return out;
}

}  // namespace

NumpyGenerator::NumpyGenerator(uint64_t seed) {
    const auto s = seed_sequence_state(seed);
    // pcg64_set_seed: state from words 0 (high) and 1 (low), increment from words 2 and 3, then
    // PCG's srandom: state = 0, inc = (initseq << 1) | 1, step, state += initstate, step.
    const u128 initstate = (u128(s[0]) << 64) | s[1];
    const u128 initseq = (u128(s[2]) << 64) | s[3];
    state_ = 0;
    inc_ = (initseq << 1) | 1u;
    state_ = state_ * kPcgMultiplier + inc_;
    state_ += initstate;
    state_ = state_ * kPcgMultiplier + inc_;
}

uint64_t NumpyGenerator::next_uint64() {
    state_ = state_ * kPcgMultiplier + inc_;
    const uint64_t hi = uint64_t(state_ >> 64), lo = uint64_t(state_);
    const unsigned rot = unsigned(state_ >> 122);
    const uint64_t x = hi ^ lo;
    return (x >> rot) | (x << ((64u - rot) & 63u));
}

uint32_t NumpyGenerator::next_uint32() {
    if (has_uint32_) {
        has_uint32_ = false;
        return uinteger_;
    }
    const uint64_t next = next_uint64();
    has_uint32_ = true;
    uinteger_ = uint32_t(next >> 32);
    return uint32_t(next & 0xffffffffu);
}

int64_t NumpyGenerator::integers(int64_t n) {
    BI_CHECK(n >= 1 && uint64_t(n) <= (uint64_t(1) << 32), "numpy generator",
             "integers(0, n) needs 1 <= n <= 2^32, got ", n);
    const uint64_t rng = uint64_t(n) - 1;  // inclusive range, as numpy's bounded fill takes it
    if (rng == 0) return 0;
    if (rng == 0xffffffffu) return int64_t(next_uint32());
    // buffered_bounded_lemire_uint32
    const uint32_t rng_excl = uint32_t(rng) + 1;
    uint64_t m = uint64_t(next_uint32()) * rng_excl;
    uint32_t leftover = uint32_t(m & 0xffffffffu);
    if (leftover < rng_excl) {
        const uint32_t threshold = (UINT32_MAX - uint32_t(rng)) % rng_excl;
        while (leftover < threshold) {
            m = uint64_t(next_uint32()) * rng_excl;
            leftover = uint32_t(m & 0xffffffffu);
        }
    }
    return int64_t(m >> 32);
}

}  // namespace bioinfer::boltz2
