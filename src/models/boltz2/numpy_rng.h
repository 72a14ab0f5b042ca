// numpy's default random generator (np.random.default_rng(seed): PCG64 seeded through
// SeedSequence) and the one draw boltz's featurizer makes with it, Generator.choice(list), so the
// conformer boltz picks per residue is the one picked here.
#pragma once
#include <cstdint>

namespace bioinfer::boltz2 {

class NumpyGenerator {
  public:
    // np.random.default_rng(seed) for a non-negative integer seed.
    explicit NumpyGenerator(uint64_t seed);

    uint64_t next_uint64();  // PCG64 (XSL-RR 128/64) output
    uint32_t next_uint32();  // numpy's: the low half of a 64-bit draw, then the buffered high half

    // Generator.integers(0, n) for 1 <= n <= 2^32 (Lemire's bounded method as numpy runs it);
    // n == 1 returns 0 without drawing, as numpy does.
    int64_t integers(int64_t n);
    // Generator.choice(a) on a 1-d sequence of n items, as an index into it.
    int64_t choice_index(int64_t n) { return integers(n); }

  private:
    unsigned __int128 state_ = 0, inc_ = 0;
    bool has_uint32_ = false;
    uint32_t uinteger_ = 0;
};

}  // namespace bioinfer::boltz2
