// Linear layers through oneDNN matmul (AVX2/AVX-512/AMX inside), with bias, GELU and the
// residual add fused as post-ops. Primitives are cached per shape.
#pragma once
#include <cstdint>

namespace bioinfer::cpu {

void linear_dnnl(const float* x, const float* w, const float* b, float* y, int64_t M, int64_t K,
                 int64_t N, bool gelu, bool accumulate);

}  // namespace bioinfer::cpu
