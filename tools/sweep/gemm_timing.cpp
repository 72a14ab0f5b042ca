// Warm timing of the packed linear layer.
#include "sweep/gemm_timing.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "bioinfer/tensor.h"
#include "ops/ops.h"

namespace bioinfer::tuning {

double time_packed_linear(int64_t M, int64_t K, int64_t N, DType compute, int repeat, int calls,
                          DType stored) {
    Tensor x = Tensor::empty({M, K}), w = Tensor::empty({N, K}), y = Tensor::empty({M, N});
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = nd(rng);
    for (int64_t i = 0; i < w.numel(); ++i) w.f32()[i] = nd(rng) * 0.02f;
    Tensor ws = w;
    if (stored == DType::BF16) {
        ws = Tensor::empty({N, K}, DType::BF16);
        for (int64_t i = 0; i < w.numel(); ++i)
            static_cast<uint16_t*>(ws.raw())[i] = f32_to_bf16(w.f32()[i]);
    }
    auto packed = ops::pack_linear_weight(ws, compute);
    if (!packed) return -1.0;
    for (int i = 0; i < 3; ++i) ops::linear(x, w, nullptr, y, {}, packed.get());  // warm-up
    double best = 1e300;
    for (int r = 0; r < repeat; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < calls; ++i) ops::linear(x, w, nullptr, y, {}, packed.get());
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::min(best, s / calls);
    }
    return best;
}

bool has_packed_gemm(DType compute) {
    return ops::pack_linear_weight(Tensor::zeros({16, 16}), compute) != nullptr;
}

}  // namespace bioinfer::tuning
