// The CPU's linear layers over a SIMD wrapper V: weights packed once for the GEMM provider the
// tuned table picks (oneDNN's blocked layout, the own panel GEMM of gemm_panel.h, the own AMX GEMM
// for bf16 and int8, or bf16 storage widened per panel), and the linear kernel that runs each
// with its epilogue (bias, activation, scale, residual); the fused linears' panels.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "backend/cpu/elementwise.h"
#include "backend/cpu/gemm_amx.h"
#include "backend/cpu/gemm_tile.h"
#include "backend/cpu/kernel_common.h"
#include "backend/cpu/linear_dnnl.h"
#include "backend/cpu/norms.h"

namespace bioinfer::cpu {
namespace {  // internal linkage: see kernel_common.h

// A linear weight packed for one GEMM provider, as the tuned table chooses per (K, N) and compute
// dtype: oneDNN's blocked layout (onednn_packed, the default), or fp32 panels for the own GEMM
// (own_packed, fp32 only; gemm_panel.h) with its blocking; panels alone (paired or not) for the
// fused linears (pack_panels). A bf16-stored weight
// computed in fp32 stays bf16 in memory (wb, the checkpoint's (N, K) rows): the GEMM widens
// kWidenRows output columns' rows at a time into an fp32 panel and runs oneDNN on the panel, so a
// bf16 checkpoint never has an fp32 copy (half the memory; exact, bf16 -> fp32 loses nothing).
struct CpuPacked {
    void* dnnl = nullptr;
    // int8 (compute I8): w quantized per output channel, w ~ w_scale[n] * q[n, k], packed for
    // oneDNN's u8 x s8 GEMM in dnnl; w_sum[n] = sum_k q[n, k] undoes the activations' +128 shift
    std::vector<float> w_scale;
    std::vector<int32_t> w_sum;
    std::vector<int32_t> w_sum128;  // 128 * w_sum, padded to 32 columns (the AMX epilogue's)
    float* panels = nullptr;  // own_packed and pack_panels: gemm_panel.h's (np, K, NR)
    bool pairs = false;       // panels interleave two weights (pack_panels with wb)
    uint16_t* wb = nullptr;  // bf16 storage, fp32 compute: (N, K), 64-byte aligned
    // int8 or bf16 compute on a CPU with AMX: the own AMX GEMM's tiles (gemm_amx.h) instead of
    // oneDNN's layout
    AmxWeights* amx = nullptr;
    int64_t K = 0, N = 0, m_block = 0, n_block = 0, k_block = 0;
    DType compute = DType::F32;
    CpuPacked() = default;
    CpuPacked(const CpuPacked&) = delete;
    CpuPacked& operator=(const CpuPacked&) = delete;
    ~CpuPacked() {
        if (dnnl) free_packed_dnnl(dnnl);
        free_amx(amx);
        std::free(panels);
        std::free(wb);
    }
};

template <typename T>
T* aligned_array(int64_t n) {
    const size_t bytes = (size_t(n) * sizeof(T) + 63) / 64 * 64;
    auto* p = static_cast<T*>(std::aligned_alloc(64, std::max<size_t>(bytes, 64)));
    if (!p) throw std::bad_alloc();
    return p;
}

inline float stored_to_f32(const void* w, DType t, int64_t i) {
    switch (t) {
        case DType::F32: return static_cast<const float*>(w)[i];
        case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(w)[i]);
        case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(w)[i]);
        case DType::I8:
            return float(static_cast<const int8_t*>(w)[i]);
        case DType::I32: break;  // not a weight dtype: ops::pack_linear_weight refuses it
    }
    return 0.0f;
}

// The int8 weight levels: +-127 where oneDNN's int8 GEMM accumulates each product in 32 bits
// (AVX512-VNNI, AMX); +-63 elsewhere, where vpmaddubsw adds two u8 x s8 products in a saturating
// 16-bit lane: 255 * 63 * 2 = 32130 fits, 255 * 127 * 2 does not.
inline int int8_weight_levels() {
    static const int q = dnnl_int8_exact_products() ? 127 : 63;
    return q;
}

// w (N, K) quantized per output channel into p (int8 compute): q = round(w / s), s = max|w| / Q.
inline void pack_int8(const void* w, DType w_dtype, int64_t K, int64_t N, CpuPacked& p) {
    const int Q = int8_weight_levels();
    std::vector<int8_t> q(size_t(N * K));
    p.w_scale.assign(size_t(N), 0.0f);
    p.w_sum.assign(size_t(N), 0);
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
        float mx = 0.0f;
        for (int64_t k = 0; k < K; ++k)
            mx = std::max(mx, std::fabs(stored_to_f32(w, w_dtype, n * K + k)));
        const float sc = mx > 0.0f ? mx / float(Q) : 1.0f, inv = 1.0f / sc;
        int32_t sum = 0;
        for (int64_t k = 0; k < K; ++k) {
            const float v = std::nearbyint(stored_to_f32(w, w_dtype, n * K + k) * inv);
            const auto qi = int8_t(std::clamp(v, float(-Q), float(Q)));
            q[size_t(n * K + k)] = qi;
            sum += qi;
        }
        p.w_scale[size_t(n)] = sc;
        p.w_sum[size_t(n)] = sum;
    }
    if (amx_gemm_usable()) {
        p.amx = pack_amx(q.data(), DType::I8, K, N, DType::I8);
        p.w_sum128.assign(size_t((N + 31) / 32 * 32), 0);
        for (int64_t n = 0; n < N; ++n) p.w_sum128[size_t(n)] = 128 * p.w_sum[size_t(n)];
    } else
        p.dnnl = pack_linear_dnnl(q.data(), DType::I8, K, N, DType::I8);
}

inline void free_packed(void* packed) {
    delete static_cast<CpuPacked*>(packed);
}

}  // namespace
}  // namespace bioinfer::cpu

#include "backend/cpu/gemm_panel.h"  // the own GEMM, over the spans above

namespace bioinfer::cpu {
namespace {  // internal linkage: see kernel_common.h

// The GEMM provider of a weight: the table's "matmul" choice for its shape or, for a weight that
// runs at a fold's few rows (rows > 0), its "matmul_fold" choice. oneDNN 2.6's fp32 GEMM runs at
// half its rate below about 512 rows on an AVX2 EPYC while the own GEMM keeps its rate
// (docs/performance.md): the sweep's fold set times both at those rows.
template <typename V>
tuning::Choice gemm_provider(DType compute, int64_t K, int64_t N, int64_t rows) {
    return tuned_dtype<V>(rows > 0 ? "matmul_fold" : "matmul", compute, {{"k", K}, {"n", N}});
}

template <typename V>
void* pack_linear(const void* w, DType w_dtype, int64_t K, int64_t N, DType compute, int64_t rows) {
    if (compute == DType::I8) {
        auto p = std::make_unique<CpuPacked>();
        p->K = K;
        p->N = N;
        p->compute = compute;
        pack_int8(w, w_dtype, K, N, *p);
        return p->dnnl || p->amx ? p.release() : nullptr;
    }
    const tuning::Choice c = gemm_provider<V>(compute, K, N, rows);
    auto p = std::make_unique<CpuPacked>();
    p->K = K;
    p->N = N;
    p->compute = compute;
    if (w_dtype == DType::BF16 && compute == DType::F32) {
        p->wb = aligned_array<uint16_t>(K * N);
        std::copy_n(static_cast<const uint16_t*>(w), K * N, p->wb);
        return p.release();
    }
    if (compute == DType::BF16 && (w_dtype == DType::F32 || w_dtype == DType::BF16) &&
        amx_gemm_usable()) {
        p->amx = pack_amx(w, w_dtype, K, N, compute);
        return p.release();
    }
    if (c.is("own_packed") && compute == DType::F32) {
        p->m_block = std::max<int64_t>(1, c.param("m_block"));
        p->n_block = std::max<int64_t>(1, c.param("n_block"));
        p->k_block = std::max<int64_t>(1, c.param("k_block"));
        int64_t np = 0;
        p->panels = pack_panels<V>(w, nullptr, w_dtype, K, N, np);
        return p.release();
    }
    p->dnnl = pack_linear_dnnl(w, w_dtype, K, N, compute);
    return p->dnnl ? p.release() : nullptr;
}

// y (+)= scale * act(x . w^T + b) with the own GEMM and the weight's blocking.
template <typename V>
void own_linear(const float* x, const CpuPacked& p, const float* b, float* y, int64_t M, Act act,
                float scale, bool accumulate) {
    kernels::PanelLinearArgs a{.x = x,
                               .x_rs = p.K,
                               .bias = b,
                               .act = act,
                               .scale = scale,
                               .y = y,
                               .y_rs = p.N,
                               .accumulate = accumulate,
                               .M = M,
                               .K = p.K,
                               .N = p.N};
    panel_linear<V>(a, p.panels, p.m_block, p.n_block, p.k_block);
}

// The fused linears' weights: panels of w, or of w and wb interleaved.
template <typename V>
void* pack_fused(const void* w, const void* wb, DType w_dtype, int64_t K, int64_t N) {
    auto p = std::make_unique<CpuPacked>();
    p->K = K;
    p->N = N;
    p->pairs = wb != nullptr;
    int64_t np = 0;
    p->panels = pack_panels<V>(w, wb, w_dtype, K, N, np);
    return p.release();
}

// A fused linear with the own GEMM's default blocking (backend/tuning/defaults.cpp's own_packed).
template <typename V>
void fused_linear(const kernels::PanelLinearArgs& a) {
    const auto& p = *static_cast<const CpuPacked*>(a.packed);
    static const tuning::Choice c = tuning::resolve("matmul", {"own_packed", {}});
    panel_linear<V>(a, p.panels, c.param("m_block"), c.param("n_block"), c.param("k_block"));
}

// rows x cols of bf16 src (row stride ld_src) widened into fp32 dst (row stride ld_dst), rows
// over the threads.
template <typename V>
void widen_bf16(const uint16_t* src, int64_t ld_src, float* dst, int64_t ld_dst, int64_t rows,
                int64_t cols) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const uint16_t* s = src + r * ld_src;
        float* d = dst + r * ld_dst;
        int64_t c = 0;
        for (; c + V::W <= cols; c += V::W) V::store(d + c, V::load_bf16(s + c));
        for (; c < cols; ++c) d[c] = bf16_to_f32(s[c]);
    }
}

// oneDNN's y (+)= scale * act(x . w^T + b), y's rows ldy apart. A scale without an activation is
// applied in a pass of our own: oneDNN 2.6's GEMM-based matmul (AVX2's fast one) takes a sum only
// as the first post-op, so eltwise_linear then sum went to its reference kernel (DNNL_VERBOSE=1
// shows ref:any), and an output scale with the sum was slower than this pass.
template <typename V>
void dnnl_linear(const float* x, const float* w, const void* pd, const float* b, float* y,
                 int64_t ldy, int64_t M, int64_t K, int64_t N, Act act, float scale,
                 bool accumulate) {
    if (scale == 1.0f || act != Act::None) {
        linear_dnnl(x, w, pd, b, y, M, K, N, act, scale, accumulate, ldy);
        return;
    }
    float* t =
        accumulate
            ? static_cast<float*>(thread_scratch(kScratchScaledSum, size_t(M * N) * sizeof(float)))
            : y;
    const int64_t ldt = accumulate ? N : ldy;
    linear_dnnl(x, w, pd, b, t, M, K, N, Act::None, 1.0f, false, ldt);
    const auto vs = V::set1(scale);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < M; ++r) {
        float* yr = y + r * ldy;
        const float* tr = t + r * ldt;
        int64_t c = 0;
        if (accumulate) {
            for (; c + V::W <= N; c += V::W)
                V::store(yr + c, V::fmadd(V::load(tr + c), vs, V::load(yr + c)));
            for (; c < N; ++c) yr[c] += scale * tr[c];
        } else {
            for (; c + V::W <= N; c += V::W) V::store(yr + c, V::mul(V::load(tr + c), vs));
            for (; c < N; ++c) yr[c] *= scale;
        }
    }
}

// y (+)= scale * act(x . w^T + b) for a bf16-stored w in fp32: panels of kWidenRows rows of w
// (output columns) widened into a cached fp32 buffer, each one oneDNN GEMM writing its columns
// of y in place. `bioinfer bench matmul --weights-dtype bf16|fp32` times it against the fp32 copy
// packed at load (docs/performance.md: 140 against 92 GFLOP/s at 130 x 2560 x 7680, 2 AVX2 cores).
template <typename V>
void widened_linear(const float* x, const CpuPacked& p, const float* b, float* y, int64_t M,
                    Act act, float scale, bool accumulate) {
    constexpr int64_t kWidenRows = 256;
    const int64_t K = p.K, N = p.N, rows = std::min(kWidenRows, N);
    float* panel =
        static_cast<float*>(thread_scratch(kScratchWidenedPanel, size_t(rows * K) * sizeof(float)));
    for (int64_t j0 = 0; j0 < N; j0 += rows) {
        const int64_t n = std::min(rows, N - j0);
        widen_bf16<V>(p.wb + j0 * K, K, panel, K, n, K);
        dnnl_linear<V>(x, panel, nullptr, b ? b + j0 : nullptr, y + j0, N, M, K, n, act, scale,
                       accumulate);
    }
}

// What an AMX GEMM block hands its epilogue: the output and the linear's terms.
struct AmxLinearEpi {
    float* y;
    const float* b;
    Act act;
    float scale;
    bool accumulate;
    const float* sx = nullptr;    // int8: the rows' activation scales
    const float* sw = nullptr;    // int8: the columns' weight scales
    const int32_t* ws = nullptr;  // int8: 128 x the columns' weight sums (the +128 shift)
    int64_t N = 0;
};

// y rows [m0, m0 + rows), columns [n0, n0 + cols) from an AMX block: int8 rescaled (as
// int8_linear's pass below), then the bias, the activation, the scale and the residual.
template <typename V, bool Int8>
void amx_linear_epilogue(void* ctx, const void* block, int64_t m0, int64_t rows, int64_t n0,
                         int64_t cols) {
    const auto& e = *static_cast<const AmxLinearEpi*>(ctx);
    alignas(64) float o[32];
    const auto vscale = V::set1(e.scale);
    // One vector of the block's row r at column c, rescaled (int8) and with the bias.
    auto value = [&](int64_t r, int64_t c) {
        typename V::R v;
        if constexpr (Int8) {
            const int32_t* ar = static_cast<const int32_t*>(block) + r * 32;
            v = V::mul(V::i32_diff(ar + c, e.ws + n0 + c),
                       V::mul(V::set1(e.sx[m0 + r]), V::load(e.sw + n0 + c)));
        } else {
            v = V::load(static_cast<const float*>(block) + r * 32 + c);
        }
        return e.b ? V::add(v, V::load(e.b + n0 + c)) : v;
    };
    for (int64_t r = 0; r < rows; ++r) {
        float* yr = e.y + (m0 + r) * e.N + n0;
        if (cols == 32 && e.act == Act::None) {  // in registers to y
            for (int64_t c = 0; c < 32; c += V::W) {
                auto v = value(r, c);
                if (e.scale != 1.0f) v = V::mul(v, vscale);
                V::store(yr + c, e.accumulate ? V::add(V::load(yr + c), v) : v);
            }
            continue;
        }
        int64_t c = 0;
        if (cols == 32)
            for (; c < 32; c += V::W) V::store(o + c, value(r, c));
        for (; c < cols; ++c) {
            if constexpr (Int8) {
                const int32_t* ar = static_cast<const int32_t*>(block) + r * 32;
                o[c] = float(ar[c] - e.ws[n0 + c]) * (e.sx[m0 + r] * e.sw[n0 + c]);
            } else {
                o[c] = static_cast<const float*>(block)[r * 32 + c];
            }
            if (e.b) o[c] += e.b[n0 + c];
        }
        activate_span<V>(e.act, o, 0, cols);
        c = 0;
        if (cols == 32)
            for (; c < 32; c += V::W) {
                auto v = V::load(o + c);
                if (e.scale != 1.0f) v = V::mul(v, vscale);
                V::store(yr + c, e.accumulate ? V::add(V::load(yr + c), v) : v);
            }
        for (; c < cols; ++c) yr[c] = (e.accumulate ? yr[c] : 0.0f) + o[c] * e.scale;
    }
}

// x's rows quantized to s8 with their own scales (max|x| / 127), shifted by 128 into u8, rows
// ldq bytes apart (the padding columns and the rows from M to M_pad hold 128, a zero).
template <typename V>
void quantize_rows_u8(const float* x, int64_t M, int64_t K, uint8_t* xq, int64_t ldq, int64_t M_pad,
                      float* sx) {
    const auto lo = V::set1(-127.0f), hi = V::set1(127.0f), shift = V::set1(128.0f);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < M_pad; ++r) {
        uint8_t* qr = xq + r * ldq;
        if (r >= M) {
            std::fill_n(qr, ldq, uint8_t(128));
            continue;
        }
        const float* xr = x + r * K;
        auto vm = V::zero();
        int64_t k = 0;
        for (; k + V::W <= K; k += V::W) vm = V::max(vm, V::abs(V::load(xr + k)));
        float mx = V::hmax(vm);
        for (; k < K; ++k) mx = std::max(mx, std::fabs(xr[k]));
        const float sc = mx > 0.0f ? mx / 127.0f : 1.0f, inv = 1.0f / sc;
        const auto vinv = V::set1(inv);
        k = 0;
        for (; k + V::W <= K; k += V::W) {
            const auto q = V::min(hi, V::max(lo, V::round(V::mul(V::load(xr + k), vinv))));
            V::store_u8(qr + k, V::add(q, shift));
        }
        for (; k < K; ++k)
            qr[k] = uint8_t(int(std::clamp(std::nearbyint(xr[k] * inv), -127.0f, 127.0f)) + 128);
        std::fill(qr + K, qr + ldq, uint8_t(128));
        sx[r] = sc;
    }
}

// y (+)= scale * act(x . w^T + b) in int8: each row of x quantized on the fly to s8 with its own
// scale (max|x| / 127) and shifted by 128 into u8, the u8 x s8 -> s32 GEMM against the
// per-channel quantized w (the own AMX GEMM where it runs, else oneDNN's), then y = sx * sw *
// (acc - 128 * w_sum) + b, the activation, the scale, the residual: fused into the AMX GEMM's
// blocks, one pass after oneDNN's.
template <typename V>
void int8_linear(const float* x, const CpuPacked& p, const float* b, float* y, int64_t M, Act act,
                 float scale, bool accumulate) {
    const int64_t K = p.K, N = p.N;
    const int64_t ldq = p.amx ? amx_lda(*p.amx) : K;
    const int64_t M_pad = p.amx ? (M + kAmxRows - 1) / kAmxRows * kAmxRows : M;
    const size_t xq_bytes = (size_t(M_pad * ldq) + 63) / 64 * 64;
    auto* xq = static_cast<uint8_t*>(
        thread_scratch(kScratchInt8Activations, xq_bytes + size_t(M_pad) * sizeof(float)));
    auto* sx = reinterpret_cast<float*>(xq + xq_bytes);
    quantize_rows_u8<V>(x, M, K, xq, ldq, M_pad, sx);
    const float* sw = p.w_scale.data();
    const int32_t* ws = p.w_sum.data();
    if (p.amx) {
        AmxLinearEpi e{y, b, act, scale, accumulate, sx, sw, p.w_sum128.data(), N};
        amx_gemm(xq, *p.amx, M, amx_linear_epilogue<V, true>, &e);
        return;
    }
    auto* acc = static_cast<int32_t*>(
        thread_scratch(kScratchInt8Accumulators, size_t(M * N) * sizeof(int32_t)));
    linear_int8_dnnl(xq, p.dnnl, acc, M, K, N);
#pragma omp parallel
    {
        // a row is rescaled straight into y, or, for a residual add, into a row of its own first
        std::vector<float> t(accumulate ? static_cast<size_t>(N) : 0);
#pragma omp for schedule(static)
        for (int64_t r = 0; r < M; ++r) {
            const int32_t* ar = acc + r * N;
            const float s = sx[r];
            float* yr = y + r * N;
            float* o = accumulate ? t.data() : yr;
            for (int64_t n = 0; n < N; ++n)
                o[n] = float(ar[n] - 128 * ws[n]) * (s * sw[n]) + (b ? b[n] : 0.0f);
            activate_span<V>(act, o, 0, N);
            if (scale != 1.0f) scale_row(o, N, scale);
            if (accumulate) add<V>(yr, o, yr, N);
        }
    }
}

// y (+)= scale * act(x . w^T + b) in bf16 on the own AMX GEMM: x rounded to bf16 (nearest even,
// as oneDNN's reorder), fp32 accumulation, the epilogue fused into the GEMM's blocks.
template <typename V>
void amx_bf16_linear(const float* x, const CpuPacked& p, const float* b, float* y, int64_t M,
                     Act act, float scale, bool accumulate) {
    const int64_t ld = amx_lda(*p.amx);
    const int64_t M_pad = (M + kAmxRows - 1) / kAmxRows * kAmxRows;
    auto* xb = static_cast<uint16_t*>(
        thread_scratch(kScratchBf16Activations, size_t(M_pad * ld) * sizeof(uint16_t)));
    amx_round_bf16(x, M, p.K, xb, ld);
    std::fill(xb + M * ld, xb + M_pad * ld, uint16_t(0));
    AmxLinearEpi e{y, b, act, scale, accumulate};
    e.N = p.N;
    amx_gemm(xb, *p.amx, M, amx_linear_epilogue<V, false>, &e);
}

// The linear kernel: the provider the weight was packed for (oneDNN when not packed). With an
// activation, oneDNN applies it as a post-op (fused, the default) or the GEMM writes y and the
// activation runs after it over y (separate), as the tuned table says for the shape.
template <typename V>
void linear(const float* x, const float* w, const void* packed, const float* b, float* y,
            int64_t M, int64_t K, int64_t N, Act act, float scale, bool accumulate) {
    const auto* p = static_cast<const CpuPacked*>(packed);
    if (p && p->compute == DType::I8) {
        int8_linear<V>(x, *p, b, y, M, act, scale, accumulate);
        return;
    }
    if (p && p->amx) {
        amx_bf16_linear<V>(x, *p, b, y, M, act, scale, accumulate);
        return;
    }
    if (p && p->panels) {
        own_linear<V>(x, *p, b, y, M, act, scale, accumulate);
        return;
    }
    if (p && p->wb) {
        widened_linear<V>(x, *p, b, y, M, act, scale, accumulate);
        return;
    }
    const void* pd = p ? p->dnnl : nullptr;
    if (act != Act::None && !accumulate &&
        tuned_dtype<V>("matmul_act", p ? p->compute : DType::F32,
                       {{"m", M}, {"k", K}, {"n", N}, {"act", int64_t(act)}})
            .is("separate")) {
        linear_dnnl(x, w, pd, b, y, M, K, N, Act::None, 1.0f, false);
        // One pass over y: the activation, then the scale, chunk by chunk.
        elementwise<V>(act_name(act), M * N, [&](int64_t i, int64_t e) {
            activate_span<V>(act, y, i, e);
            if (scale != 1.0f) scale_row(y + i, e - i, scale);
        });
        return;
    }
    dnnl_linear<V>(x, w, pd, b, y, N, M, K, N, act, scale, accumulate);
}

}  // namespace
}  // namespace bioinfer::cpu
