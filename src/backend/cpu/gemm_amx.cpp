// The own AMX GEMMs (gemm_amx.h). Built with the base ISA: only the functions marked with a target
// attribute use AMX or AVX-512, and they run only where amx_gemm_usable() says so.
#include "backend/cpu/gemm_amx.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <type_traits>

#include "backend/cpu/peak.h"
#include "bioinfer/dtype.h"

namespace bioinfer::cpu {

struct AmxWeights {
    DType compute = DType::I8;
    int64_t K = 0, N = 0;
    int64_t k_tiles = 0;      // tile rows of K (64 bytes each)
    int64_t n_tiles = 0;      // 16-column tiles, even (N padded to 32)
    uint8_t* data = nullptr;  // [n_tiles][k_tiles][16 rows][64 bytes]
};

namespace {

constexpr int64_t kTileBytes = 16 * kAmxKBytes;
// Output rows per task: the A rows a thread keeps in its L2 while it walks its columns, at most
// kTaskRows and kTaskABytes of them.
constexpr int64_t kTaskRows = 256;
constexpr int64_t kTaskABytes = int64_t(1) << 20;
// Output columns per task (8 blocks of 32).
constexpr int64_t kTaskCols = 256;

bool elements_per_tile_row(DType compute, int64_t& per) {
    if (compute == DType::I8)
        per = kAmxKBytes;
    else if (compute == DType::BF16)
        per = kAmxKBytes / 2;
    else
        return false;
    return true;
}

// Rows [m_begin, m_end) and 16-column tiles [t_begin, t_end) of the output, 32 x 32 at a time,
// each block over the whole K. (K in L1-sized chunks, the partial sums parked between them, was
// slower at the models' shapes: 1269-1441 against 1439-1809 GFLOP/s in bf16.)
template <bool Int8>
__attribute__((target("amx-tile,amx-int8,amx-bf16"))) void amx_task(
    const uint8_t* a, int64_t lda_bytes, const AmxWeights& p, int64_t M, int64_t m_begin,
    int64_t m_end, int64_t t_begin, int64_t t_end, AmxEpilogue epi, void* ctx, uint8_t* out) {
    const int64_t kt = p.k_tiles;
    for (int64_t t = t_begin; t < t_end; t += 2) {
        const uint8_t* b0 = p.data + t * kt * kTileBytes;
        const uint8_t* b1 = b0 + kt * kTileBytes;
        for (int64_t m0 = m_begin; m0 < m_end; m0 += kAmxRows) {
            const uint8_t* a0 = a + m0 * lda_bytes;
            const uint8_t* a1 = a0 + 16 * lda_bytes;
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int64_t k = 0; k < kt; ++k) {
                _tile_loadd(4, a0 + k * kAmxKBytes, lda_bytes);
                _tile_loadd(5, a1 + k * kAmxKBytes, lda_bytes);
                _tile_loadd(6, b0 + k * kTileBytes, kAmxKBytes);
                _tile_loadd(7, b1 + k * kTileBytes, kAmxKBytes);
                if constexpr (Int8) {
                    _tile_dpbusd(0, 4, 6);
                    _tile_dpbusd(1, 4, 7);
                    _tile_dpbusd(2, 5, 6);
                    _tile_dpbusd(3, 5, 7);
                } else {
                    _tile_dpbf16ps(0, 4, 6);
                    _tile_dpbf16ps(1, 4, 7);
                    _tile_dpbf16ps(2, 5, 6);
                    _tile_dpbf16ps(3, 5, 7);
                }
            }
            // 32 rows of 32 4-byte sums, 128 bytes apart
            _tile_stored(0, out, 128);
            _tile_stored(1, out + 64, 128);
            _tile_stored(2, out + 16 * 128, 128);
            _tile_stored(3, out + 16 * 128 + 64, 128);
            const int64_t n0 = t * 16;
            epi(ctx, out, m0, std::min(kAmxRows, M - m0), n0, std::min<int64_t>(32, p.N - n0));
        }
    }
}

__attribute__((target("amx-tile"))) void release_tiles() {
    _tile_release();
}

// One thread's share of the tasks: column chunks outer (each thread keeps its weight columns),
// row chunks inner.
void amx_thread(const uint8_t* a, const AmxWeights& p, int64_t M, AmxEpilogue epi, void* ctx,
                int thread, int threads) {
    const int64_t lda_bytes = p.k_tiles * kAmxKBytes;
    const int64_t rows = (M + kAmxRows - 1) / kAmxRows * kAmxRows;
    const int64_t task_rows =
        std::clamp<int64_t>(kTaskABytes / lda_bytes / kAmxRows * kAmxRows, kAmxRows, kTaskRows);
    const int64_t m_tasks = (rows + task_rows - 1) / task_rows;
    const int64_t n_tasks = (p.n_tiles * 16 + kTaskCols - 1) / kTaskCols;
    const int64_t tasks = m_tasks * n_tasks;
    const int64_t begin = tasks * thread / threads, end = tasks * (thread + 1) / threads;
    if (begin >= end) return;
    alignas(64) int32_t block[kAmxRows * 32];  // one block's sums
    amx_load_tiles();  // 16 rows of kAmxKBytes
    for (int64_t i = begin; i < end; ++i) {
        const int64_t nt = i / m_tasks, mt = i % m_tasks;
        const int64_t m_begin = mt * task_rows, m_end = std::min(rows, m_begin + task_rows);
        const int64_t t_begin = nt * (kTaskCols / 16);
        const int64_t t_end = std::min(p.n_tiles, t_begin + kTaskCols / 16);
        if (p.compute == DType::I8)
            amx_task<true>(a, lda_bytes, p, M, m_begin, m_end, t_begin, t_end, epi, ctx,
                           reinterpret_cast<uint8_t*>(block));
        else
            amx_task<false>(a, lda_bytes, p, M, m_begin, m_end, t_begin, t_end, epi, ctx,
                            reinterpret_cast<uint8_t*>(block));
    }
    release_tiles();
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void round_rows_bf16(
    const float* x, int64_t K, uint16_t* xb, int64_t ldb, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
        const float* s = x + r * K;
        uint16_t* d = xb + r * ldb;
        int64_t k = 0;
        for (; k + 16 <= K; k += 16) {
            const __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(s + k));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + k),
                                reinterpret_cast<const __m256i&>(v));
        }
        for (; k < K; ++k) d[k] = f32_to_bf16(s[k]);
        for (; k < ldb; ++k) d[k] = 0;
    }
}

}  // namespace

bool amx_gemm_usable() {
    static const bool ok = [] {
        const char* env = std::getenv("BIOINFER_GEMM_AMX");
        if (env && std::strcmp(env, "0") == 0) return false;
        // oneDNN's ISA cap holds for the own AMX kernels too (ONEDNN_MAX_CPU_ISA=AVX512_CORE ...)
        if (const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA")) {
            std::string c(cap);
            for (char& ch : c) ch = char(std::toupper(static_cast<unsigned char>(ch)));
            if (c != "ALL" && c.find("AMX") == std::string::npos) return false;
        }
        if (!cpu_has_flag("amx_tile") || !cpu_has_flag("amx_int8") || !cpu_has_flag("amx_bf16") ||
            !cpu_has_flag("avx512_bf16"))
            return false;
        return amx_permitted();
    }();
    return ok;
}

AmxWeights* pack_amx(const void* w, DType w_dtype, int64_t K, int64_t N, DType compute) {
    int64_t per = 0;
    if (!elements_per_tile_row(compute, per)) return nullptr;
    auto* p = new AmxWeights;
    p->compute = compute;
    p->K = K;
    p->N = N;
    p->k_tiles = (K + per - 1) / per;
    p->n_tiles = (N + 31) / 32 * 2;
    const size_t bytes = size_t(p->n_tiles * p->k_tiles * kTileBytes);
    p->data = static_cast<uint8_t*>(std::aligned_alloc(64, bytes));
    if (!p->data) {
        delete p;
        throw std::bad_alloc();
    }
    std::memset(p->data, 0, bytes);
    // Tile (t, kt), row r holds K values [kt * per + r * pair, + pair) of its 16 columns, side by
    // side.
    auto fill = [&](auto pair_c, auto value) {
        constexpr int64_t pair = decltype(pair_c)::value;
#pragma omp parallel for schedule(static)
        for (int64_t t = 0; t < p->n_tiles; ++t)
            for (int64_t kt = 0; kt < p->k_tiles; ++kt) {
                uint8_t* tile = p->data + (t * p->k_tiles + kt) * kTileBytes;
                for (int64_t c = 0; c < 16 && t * 16 + c < N; ++c) {
                    const int64_t n = t * 16 + c;
                    for (int64_t i = 0; i < per && kt * per + i < K; ++i)
                        value(tile + (i / pair) * kAmxKBytes +
                                  (c * pair + i % pair) * (kAmxKBytes / 16 / pair),
                              n * K + kt * per + i);
                }
            }
    };
    if (compute == DType::I8) {
        const auto* q = static_cast<const int8_t*>(w);
        fill(std::integral_constant<int64_t, 4>{},
             [q](uint8_t* at, int64_t i) { *at = uint8_t(q[i]); });
    } else if (w_dtype == DType::BF16) {
        const auto* b = static_cast<const uint16_t*>(w);
        fill(std::integral_constant<int64_t, 2>{},
             [b](uint8_t* at, int64_t i) { std::memcpy(at, b + i, 2); });
    } else {
        const auto* f = static_cast<const float*>(w);
        fill(std::integral_constant<int64_t, 2>{}, [f](uint8_t* at, int64_t i) {
            const uint16_t v = f32_to_bf16(f[i]);
            std::memcpy(at, &v, 2);
        });
    }
    return p;
}

void free_amx(AmxWeights* p) {
    if (!p) return;
    std::free(p->data);
    delete p;
}

int64_t amx_lda(const AmxWeights& p) {
    return p.k_tiles * (p.compute == DType::I8 ? kAmxKBytes : kAmxKBytes / 2);
}

void amx_gemm(const void* a, const AmxWeights& p, int64_t M, AmxEpilogue epi, void* ctx) {
    if (M <= 0) return;
    const auto* a8 = static_cast<const uint8_t*>(a);
#pragma omp parallel
    amx_thread(a8, p, M, epi, ctx, omp_get_thread_num(), omp_get_num_threads());
}

void amx_round_bf16(const float* x, int64_t M, int64_t K, uint16_t* xb, int64_t ldb) {
#pragma omp parallel
    {
        const int t = omp_get_thread_num(), n = omp_get_num_threads();
        round_rows_bf16(x, K, xb, ldb, M * t / n, M * (t + 1) / n);
    }
}

}  // namespace bioinfer::cpu
