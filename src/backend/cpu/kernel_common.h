// What every CPU kernel family shares, written once over a SIMD wrapper V (simd.h): vector exp
// and erf (Cephes, Abramowitz & Stegun), the scalar GELUs, the tuned table's lookups and the
// chunking of elementwise work. The family headers (elementwise, norms, gemm_tile, attention,
// linear) build on it and kernel_table.h gathers them into one table; kernels_avx2.cpp and
// kernels_avx512.cpp compile them all with their own target flags. Tails run scalar code.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "backend/cpu/simd.h"
#include "backend/kernels.h"
#include "backend/tuning/defaults.h"
#include "bioinfer/dtype.h"

namespace bioinfer::cpu {
// Everything in the family headers has internal linkage: kernels_avx2.cpp and kernels_avx512.cpp
// compile them with different ISA flags, and an external inline function (a scalar tail helper,
// say) emitted by both would leave the linker free to hand the AVX-512 copy to the AVX2 table.
namespace {

// exp(x), Cephes-style: x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial; rel. error ~2e-7.
template <typename V>
inline typename V::R vexp(typename V::R x) {
    using R = typename V::R;
    x = V::min(x, V::set1(88.3762626647949f));
    x = V::max(x, V::set1(-87.3365447504f));
    R n = V::round(V::mul(x, V::set1(1.44269504088896341f)));
    R r = V::fnmadd(n, V::set1(0.693359375f), x);
    r = V::fnmadd(n, V::set1(-2.12194440e-4f), r);
    R p = V::set1(1.9875691500e-4f);
    p = V::fmadd(p, r, V::set1(1.3981999507e-3f));
    p = V::fmadd(p, r, V::set1(8.3334519073e-3f));
    p = V::fmadd(p, r, V::set1(4.1665795894e-2f));
    p = V::fmadd(p, r, V::set1(1.6666665459e-1f));
    p = V::fmadd(p, r, V::set1(5.0000001201e-1f));
    p = V::fmadd(p, V::mul(r, r), V::add(r, V::set1(1.0f)));
    return V::mul_pow2(p, n);  // n in [-126, 128] after the clamps
}

// erf(x) by Abramowitz & Stegun 7.1.26 (abs. error <= 1.5e-7), odd symmetry.
template <typename V>
inline typename V::R verf(typename V::R x) {
    using R = typename V::R;
    R a = V::abs(x);
    R t = V::div(V::set1(1.0f), V::fmadd(V::set1(0.3275911f), a, V::set1(1.0f)));
    R p = V::set1(1.061405429f);
    p = V::fmadd(p, t, V::set1(-1.453152027f));
    p = V::fmadd(p, t, V::set1(1.421413741f));
    p = V::fmadd(p, t, V::set1(-0.284496736f));
    p = V::fmadd(p, t, V::set1(0.254829592f));
    p = V::mul(p, t);
    R e = vexp<V>(V::sub(V::zero(), V::mul(a, a)));
    R y = V::fnmadd(p, e, V::set1(1.0f));
    return V::copysign(y, x);
}

inline float gelu_scalar(float x) {
    return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
}

inline float gelu_tanh_scalar(float x) {
    return 0.5f * x * (1.0f + std::tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}

// The tuned table's choice for an op at this shape, for a compute dtype or fp32 (the own kernels
// compute in fp32); where the table has none, the kernel's default
// (backend/tuning/defaults.cpp). It carries every parameter the variant reads.
template <typename V>
tuning::Choice tuned_dtype(const char* op, DType compute, std::initializer_list<tuning::Dim> shape) {
    return tuning::choose(V::kTable, op, compute == DType::BF16 ? "bf16" : "fp32", shape);
}

template <typename V>
tuning::Choice tuned(const char* op, std::initializer_list<tuning::Dim> shape) {
    return tuned_dtype<V>(op, DType::F32, shape);
}

// Elementwise work in chunks of kChunk elements: over all threads (the "simd" variant with
// parallel = 1, the default) or on the calling thread (parallel = 0, cheaper for small n).
constexpr int64_t kChunk = 4096;

template <typename V, typename F>
void elementwise(const char* op, int64_t n, F f) {  // f(begin, end)
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    if (chunks > 1 && tuned<V>(op, {{"n", n}}).param("parallel") != 0) {
#pragma omp parallel for schedule(static)
        for (int64_t c = 0; c < chunks; ++c) f(c * kChunk, std::min(n, (c + 1) * kChunk));
    } else {
        f(0, n);
    }
}

}  // namespace
}  // namespace bioinfer::cpu
