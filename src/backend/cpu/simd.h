// Thin SIMD wrappers so one kernel source (the family headers of kernel_table.h) compiles for AVX2
// and AVX-512.
// Each translation unit includes this with its own target flags; only that ISA's struct is used.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace bioinfer::cpu {

#if defined(__AVX512F__)
struct VecAvx512 {
    using R = __m512;
    static constexpr int W = 16;
    static constexpr const char* kTable = "cpu-avx512";  // the kernel table's name
    static R load(const float* p) { return _mm512_loadu_ps(p); }
    static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
    static R set1(float x) { return _mm512_set1_ps(x); }
    static R zero() { return _mm512_setzero_ps(); }
    static R add(R a, R b) { return _mm512_add_ps(a, b); }
    static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
    static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
    static R div(R a, R b) { return _mm512_div_ps(a, b); }
    static R fmadd(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
    static R fnmadd(R a, R b, R c) { return _mm512_fnmadd_ps(a, b, c); }
    static R max(R a, R b) { return _mm512_max_ps(a, b); }
    static R min(R a, R b) { return _mm512_min_ps(a, b); }
    static R abs(R a) { return _mm512_abs_ps(a); }
    static R round(R a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT); }
    static R copysign(R mag, R sgn) {
        const __m512i m = _mm512_set1_epi32(0x80000000);
        return _mm512_castsi512_ps(_mm512_or_si512(
            _mm512_andnot_si512(m, _mm512_castps_si512(mag)),
            _mm512_and_si512(m, _mm512_castps_si512(sgn))));
    }
    // p * 2^n for integral n in [-126, 128], in one vscalefps.
    static R mul_pow2(R p, R n) { return _mm512_scalef_ps(p, n); }
    // The first n (0 < n <= W) lanes; the others read as zero and are never touched in memory.
    static R load_partial(const float* p, int64_t n) {
        return _mm512_maskz_loadu_ps(__mmask16((1u << n) - 1u), p);
    }
    static void store_partial(float* p, R v, int64_t n) {
        _mm512_mask_storeu_ps(p, __mmask16((1u << n) - 1u), v);
    }
    // W bf16 values widened to fp32 (exact: bf16 is fp32's top half).
    static R load_bf16(const uint16_t* p) {
        const __m512i u =
            _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
    }
    static float hsum(R v) { return _mm512_reduce_add_ps(v); }
    static float hmax(R v) { return _mm512_reduce_max_ps(v); }
    // float(a[i] - b[i]) for W int32 lanes (the difference taken in integers).
    static R i32_diff(const int32_t* a, const int32_t* b) {
        return _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_loadu_si512(a), _mm512_loadu_si512(b)));
    }
    // W lanes holding whole numbers in [0, 255] stored as bytes.
    static void store_u8(uint8_t* p, R v) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                         _mm512_cvtusepi32_epi8(_mm512_cvtps_epi32(v)));
    }
};
#endif

#if defined(__AVX2__) && defined(__FMA__)
struct VecAvx2 {
    using R = __m256;
    static constexpr int W = 8;
    static constexpr const char* kTable = "cpu-avx2";
    static R load(const float* p) { return _mm256_loadu_ps(p); }
    static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
    static R set1(float x) { return _mm256_set1_ps(x); }
    static R zero() { return _mm256_setzero_ps(); }
    static R add(R a, R b) { return _mm256_add_ps(a, b); }
    static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
    static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
    static R div(R a, R b) { return _mm256_div_ps(a, b); }
    static R fmadd(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
    static R fnmadd(R a, R b, R c) { return _mm256_fnmadd_ps(a, b, c); }
    static R max(R a, R b) { return _mm256_max_ps(a, b); }
    static R min(R a, R b) { return _mm256_min_ps(a, b); }
    static R abs(R a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
    static R round(R a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
    static R copysign(R mag, R sgn) {
        const R m = _mm256_set1_ps(-0.0f);
        return _mm256_or_ps(_mm256_andnot_ps(m, mag), _mm256_and_ps(m, sgn));
    }
    // p * 2^n for integral n in [-126, 128], 2^n made in the exponent bits (inf at 128).
    static R mul_pow2(R p, R n) {
        __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
        return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(e, 23)));
    }
    static __m256i lanes_below(int64_t n) {
        return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    }
    static R load_partial(const float* p, int64_t n) { return _mm256_maskload_ps(p, lanes_below(n)); }
    static void store_partial(float* p, R v, int64_t n) { _mm256_maskstore_ps(p, lanes_below(n), v); }
    static R load_bf16(const uint16_t* p) {
        const __m256i u =
            _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
    }
    static float hsum(R v) {
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        s = _mm_add_ss(s, _mm_movehdup_ps(s));
        return _mm_cvtss_f32(s);
    }
    static float hmax(R v) {
        __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        s = _mm_max_ps(s, _mm_movehl_ps(s, s));
        s = _mm_max_ss(s, _mm_movehdup_ps(s));
        return _mm_cvtss_f32(s);
    }
    static R i32_diff(const int32_t* a, const int32_t* b) {
        const auto* pa = reinterpret_cast<const __m256i*>(a);
        const auto* pb = reinterpret_cast<const __m256i*>(b);
        return _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_loadu_si256(pa), _mm256_loadu_si256(pb)));
    }
    static void store_u8(uint8_t* p, R v) {
        const __m256i i = _mm256_cvtps_epi32(v);
        const __m128i w16 =
            _mm_packus_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
        _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packus_epi16(w16, w16));
    }
};
#endif

}  // namespace bioinfer::cpu
