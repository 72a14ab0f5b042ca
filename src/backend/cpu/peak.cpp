// Register-level peak loops, one per instruction family, each compiled for its own ISA with a
// target attribute and run only where /proc/cpuinfo lists every feature it needs.
#include "backend/cpu/peak.h"

#include <immintrin.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include "bioinfer/error.h"

namespace bioinfer::cpu {

namespace {

constexpr const char* kWhere = "bench peak";

// Each loop returns the sum of every accumulator lane after `iters` iterations; the loops add a
// known amount per iteration (all operands are ones), so that sum has a closed form.

// The sum of every lane of n vectors of type Vec, lanes of type E (float or int32), read through
// memory so no instruction of the vectors' ISA runs here.
template <typename E, typename Vec>
double lane_sum(const Vec* v, int n) {
    double s = 0;
    for (int i = 0; i < n; ++i) {
        E l[sizeof(Vec) / sizeof(E)];
        std::memcpy(l, &v[i], sizeof(Vec));
        for (E e : l) s += double(e);
    }
    return s;
}

// fp32: 12 independent accumulators, acc = acc * 1 + 1 (each lane counts the iterations)
__attribute__((target("avx2,fma"))) double fp32_fma_avx2(int64_t iters) {
    __m256 one = _mm256_set1_ps(1.0f);
    asm volatile("" : "+x"(one));
    // accumulator k starts at k, hidden from the compiler, so no two can be proven equal and
    // merged into one (which would time one dependency chain and count twelve)
    __m256 a[12];
    for (int k = 0; k < 12; ++k) {
        a[k] = _mm256_set1_ps(float(k));
        asm volatile("" : "+x"(a[k]));
    }
    for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
        for (int k = 0; k < 12; ++k) a[k] = _mm256_fmadd_ps(a[k], one, one);
    }
    return lane_sum<float>(a, 12);
}

__attribute__((target("avx512f"))) double fp32_fma_avx512(int64_t iters) {
    __m512 one = _mm512_set1_ps(1.0f);
    asm volatile("" : "+v"(one));
    __m512 a[12];
    for (int k = 0; k < 12; ++k) {
        a[k] = _mm512_set1_ps(float(k));
        asm volatile("" : "+v"(a[k]));
    }
    for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
        for (int k = 0; k < 12; ++k) a[k] = _mm512_fmadd_ps(a[k], one, one);
    }
    return lane_sum<float>(a, 12);
}

// bf16 pairs: acc += 1 * 1 + 1 * 1 per lane
__attribute__((target("avx512f,avx512bf16"))) double bf16_avx512(int64_t iters) {
    __m512i ones = _mm512_set1_epi16(0x3f80);
    asm volatile("" : "+v"(ones));
    const __m512bh one = (__m512bh)ones;
    __m512 a[12];
    for (int k = 0; k < 12; ++k) {
        a[k] = _mm512_set1_ps(float(k));
        asm volatile("" : "+v"(a[k]));
    }
    for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
        for (int k = 0; k < 12; ++k) a[k] = _mm512_dpbf16_ps(a[k], one, one);
    }
    return lane_sum<float>(a, 12);
}

// int8 without VNNI: u8 x s8 pairs to s16 (vpmaddubsw), pairs of those to s32 (vpmaddwd by
// ones), added; six chains over six distinct weight registers, the activation register marked
// changed every iteration so the products are not hoisted out of the loop. Per lane and chain:
// 4 per iteration.
__attribute__((target("avx2"))) double int8_avx2(int64_t iters) {
    __m256i x = _mm256_set1_epi8(1);
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256i w[6], acc[6];
    for (int k = 0; k < 6; ++k) {
        w[k] = _mm256_set1_epi8(1);
        asm volatile("" : "+x"(w[k]));  // six registers, not one
        acc[k] = _mm256_set1_epi32(k);
        asm volatile("" : "+x"(acc[k]));
    }
    for (int64_t i = 0; i < iters; ++i) {
        asm volatile("" : "+x"(x));
#pragma GCC unroll 6
        for (int k = 0; k < 6; ++k)
            acc[k] =
                _mm256_add_epi32(acc[k], _mm256_madd_epi16(_mm256_maddubs_epi16(x, w[k]), ones16));
    }
    return lane_sum<int32_t>(acc, 6);
}

// int8 with VNNI: four u8 x s8 products per s32 lane in one instruction
__attribute__((target("avx2,avxvnni"))) double int8_avx_vnni(int64_t iters) {
    __m256i one = _mm256_set1_epi8(1);
    asm volatile("" : "+x"(one));
    __m256i a[12];
    for (int k = 0; k < 12; ++k) {
        a[k] = _mm256_set1_epi32(k);
        asm volatile("" : "+x"(a[k]));
    }
    for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
        for (int k = 0; k < 12; ++k) a[k] = _mm256_dpbusd_avx_epi32(a[k], one, one);
    }
    return lane_sum<int32_t>(a, 12);
}

__attribute__((target("avx512f,avx512vnni"))) double int8_avx512_vnni(int64_t iters) {
    __m512i one = _mm512_set1_epi8(1);
    asm volatile("" : "+v"(one));
    __m512i a[12];
    for (int k = 0; k < 12; ++k) {
        a[k] = _mm512_set1_epi32(k);
        asm volatile("" : "+v"(a[k]));
    }
    for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
        for (int k = 0; k < 12; ++k) a[k] = _mm512_dpbusd_epi32(a[k], one, one);
    }
    return lane_sum<int32_t>(a, 12);
}

// AMX: tiles 0-3 accumulate 16 x 16 fp32 (int32), tiles 4-5 hold A rows and 6-7 B columns (16
// rows of 64 bytes each, all ones): four independent tile products per iteration.
template <bool Int8>
__attribute__((target("amx-tile,amx-bf16,amx-int8"))) double amx(int64_t iters) {
    alignas(64) uint8_t ones[16 * 64];
    if (Int8) {
        std::memset(ones, 1, sizeof ones);
    } else {
        for (int i = 0; i < 16 * 32; ++i) ones[2 * i] = 0x80, ones[2 * i + 1] = 0x3f;  // bf16 1.0
    }
    amx_load_tiles();
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, ones, 64);
    _tile_loadd(5, ones, 64);
    _tile_loadd(6, ones, 64);
    _tile_loadd(7, ones, 64);
    for (int64_t i = 0; i < iters; ++i) {
        if constexpr (Int8) {
            _tile_dpbssd(0, 4, 6);
            _tile_dpbssd(1, 4, 7);
            _tile_dpbssd(2, 5, 6);
            _tile_dpbssd(3, 5, 7);
        } else {
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    }
    alignas(64) uint8_t out[4][16 * 64];
    _tile_stored(0, out[0], 64);
    _tile_stored(1, out[1], 64);
    _tile_stored(2, out[2], 64);
    _tile_stored(3, out[3], 64);
    _tile_release();
    double s = 0;
    for (const auto& t : out)
        for (int e = 0; e < 256; ++e) {
            if (Int8) {
                int32_t v;
                std::memcpy(&v, t + 4 * e, 4);
                s += double(v);
            } else {
                float v;
                std::memcpy(&v, t + 4 * e, 4);
                s += double(v);
            }
        }
    return s;
}

struct Loop {
    PeakKernel k;
    std::vector<std::string> needs;  // /proc/cpuinfo flags
    double (*run)(int64_t);
    int64_t instr_per_iter;
    double ops_per_iter;       // multiply-adds count 2
    double lane_sum_per_iter;  // what one iteration adds to the sum of every accumulator lane
    double start_sum;          // that sum before the loop (accumulator k starts at k)
    double cycles_per_iter;    // nominal, for sizing the loops
    int64_t max_iters;         // the accumulators stay exact below this
};

const std::vector<Loop>& loops() {
    // start sums: lanes x (0 + 1 + ... + 11), or x (0 + ... + 5) for the six int8 AVX2 chains
    // clang-format off
    // name, dtype, isa; cpuinfo flags; loop; instructions, ops, lane sum per iteration; start
    // sum; nominal cycles per iteration; iteration cap
    static const std::vector<Loop> l = {
        {{"fp32_fma_avx2", "fp32", "avx2 fma"}, {"avx2", "fma"},
         fp32_fma_avx2, 12, 12 * 16, 12 * 8, 8 * 66, 6, int64_t(1) << 23},
        {{"fp32_fma_avx512", "fp32", "avx512f"}, {"avx512f"},
         fp32_fma_avx512, 12, 12 * 32, 12 * 16, 16 * 66, 6, int64_t(1) << 23},
        {{"bf16_avx512_bf16", "bf16", "avx512_bf16"}, {"avx512f", "avx512_bf16"},
         bf16_avx512, 12, 12 * 64, 12 * 16 * 2, 16 * 66, 6, int64_t(1) << 22},
        {{"amx_bf16", "bf16", "amx_tile amx_bf16"}, {"amx_tile", "amx_bf16", "amx_int8"},
         amx<false>, 4, 4 * 16384, 4 * 256 * 32.0, 0, 64, int64_t(1) << 18},
        // vpmaddubsw, vpmaddwd, vpaddd: 32 multiply-adds per three instructions
        {{"int8_avx2", "int8", "avx2"}, {"avx2"},
         int8_avx2, 18, 6 * 64, 6 * 8 * 4, 8 * 15, 6, int64_t(1) << 26},
        {{"int8_avx_vnni", "int8", "avx_vnni"}, {"avx2", "avx_vnni"},
         int8_avx_vnni, 12, 12 * 64, 12 * 8 * 4, 8 * 66, 6, int64_t(1) << 26},
        {{"int8_avx512_vnni", "int8", "avx512_vnni"}, {"avx512f", "avx512_vnni"},
         int8_avx512_vnni, 12, 12 * 128, 12 * 16 * 4, 16 * 66, 6, int64_t(1) << 26},
        {{"amx_int8", "int8", "amx_tile amx_int8"}, {"amx_tile", "amx_bf16", "amx_int8"},
         amx<true>, 4, 4 * 32768, 4 * 256 * 64.0, 0, 64, int64_t(1) << 22},
    };
    // clang-format on
    return l;
}

bool runs(const Loop& l) {
    for (const std::string& f : l.needs)
        if (!cpu_has_flag(f)) return false;
    if (l.k.name.rfind("amx", 0) == 0) return amx_permitted();
    return true;
}

const Loop& loop_of(const PeakKernel& k) {
    for (const Loop& l : loops())
        if (l.k.name == k.name) return l;
    BI_CHECK(false, kWhere, "no peak kernel '", k.name, "'");
    return loops().front();
}

struct alignas(64) TileConfig {  // ldtilecfg's operand
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};

}  // namespace

bool amx_permitted() {
    // Linux hands out the tile data state on request (ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA).
    static const bool ok = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
    return ok;
}

__attribute__((target("amx-tile"))) void amx_load_tiles() {
    TileConfig cfg;
    for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
    // GCC 12 does not see ldtilecfg read its operand and drops the stores above without this.
    asm volatile("" : : "r"(&cfg) : "memory");
    _tile_loadconfig(&cfg);
}

bool cpu_has_flag(const std::string& flag) {
    static const std::string flags = [] {
        std::ifstream f("/proc/cpuinfo");
        for (std::string line; std::getline(f, line);)
            if (line.rfind("flags", 0) == 0) return " " + line.substr(line.find(':') + 1) + " ";
        return std::string();
    }();
    return flags.find(" " + flag + " ") != std::string::npos;
}

std::vector<PeakKernel> peak_kernels() {
    std::vector<PeakKernel> out;
    for (const Loop& l : loops()) {
        PeakKernel k = l.k;
        k.ops_per_instr = l.ops_per_iter / double(l.instr_per_iter);
        k.supported = runs(l);
        out.push_back(k);
    }
    return out;
}

int64_t peak_iterations(const PeakKernel& k, double seconds) {
    const Loop& l = loop_of(k);
    const auto n = int64_t(seconds * 3e9 / l.cycles_per_iter);
    return std::clamp<int64_t>(n, 1, l.max_iters);
}

PeakResult measure_peak(const PeakKernel& k, int threads, int64_t iters, int reps) {
    const Loop& l = loop_of(k);
    BI_CHECK(runs(l), kWhere, k.name, ": this CPU lacks ", k.isa);
    BI_CHECK(iters > 0 && iters <= l.max_iters, kWhere, k.name, ": ", iters, " iterations (1 to ",
             l.max_iters, ")");
    BI_CHECK(threads > 0 && reps > 0, kWhere, "threads and repetitions must be positive");
    const double want = double(iters) * l.lane_sum_per_iter + l.start_sum;
    PeakResult r;
    r.instructions_per_thread = iters * l.instr_per_iter;
    r.seconds = 1e300;
    for (int rep = 0; rep < reps; ++rep) {
        std::vector<double> got(size_t(threads), 0.0);
        const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
        got[size_t(omp_get_thread_num())] = l.run(iters);
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        for (int t = 0; t < threads; ++t)
            BI_CHECK(got[size_t(t)] == want, kWhere, k.name, ": thread ", t,
                     "'s accumulators hold ", got[size_t(t)], ", expected ", want);
        r.seconds = std::min(r.seconds, s);
    }
    r.ops_per_s = l.ops_per_iter * double(iters) * threads / r.seconds;
    return r;
}

}  // namespace bioinfer::cpu
