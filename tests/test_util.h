// Test helpers: seeded random tensors and comparisons that report PCC, max-abs and relative L2.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "bioinfer/tensor.h"
#include "ops/ops.h"

namespace bioinfer::test {

inline Tensor random_tensor(const Shape& s, uint32_t seed, float mean = 0.0f, float sd = 1.0f) {
    Tensor t = Tensor::empty(s);
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(mean, sd);
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = d(rng);
    return t;
}

struct Stats {
    double pcc = 0, max_abs = 0, rel_l2 = 0;
};

inline Stats stats(const float* a, const float* b, int64_t n) {
    double sa = 0, sb = 0;
    for (int64_t i = 0; i < n; ++i) {
        sa += a[i];
        sb += b[i];
    }
    const double ma = sa / double(n), mb = sb / double(n);
    double cov = 0, va = 0, vb = 0, diff2 = 0, ref2 = 0;
    Stats s;
    for (int64_t i = 0; i < n; ++i) {
        const double x = a[i] - ma, y = b[i] - mb;
        cov += x * y;
        va += x * x;
        vb += y * y;
        const double d = double(a[i]) - b[i];
        diff2 += d * d;
        ref2 += double(b[i]) * b[i];
        s.max_abs = std::max(s.max_abs, std::fabs(d));
    }
    s.pcc = (va > 0 && vb > 0) ? cov / std::sqrt(va * vb) : (diff2 == 0 ? 1.0 : 0.0);
    s.rel_l2 = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
    return s;
}

// Elementwise |got - ref| <= atol + rtol * |ref|.
inline void compare(const Tensor& got, const Tensor& ref, double atol, double rtol,
                    const std::string& what) {
    ASSERT_EQ(got.numel(), ref.numel()) << what;
    int bad = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
        const double g = got.f32()[i], r = ref.f32()[i];
        if (!(std::fabs(g - r) <= atol + rtol * std::fabs(r)) && bad++ < 5)
            ADD_FAILURE() << what << " [" << i << "]: got " << g << ", expected " << r;
    }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.numel() << " elements differ";
}

// Whether this CPU has a bf16 GEMM: without one, loaders fall back to fp32 and a bf16 test
// would test nothing new.
inline bool has_bf16_gemm() {
    return ops::pack_linear_weight(Tensor::zeros({16, 16}), DType::BF16) != nullptr;
}

}  // namespace bioinfer::test
