// Timing of the packed GEMM the models' linear layers run: `bench matmul` reports it, and the
// op sweep measures the machine's GEMM peak with it.
#pragma once
#include <cstdint>

#include "bioinfer/dtype.h"

namespace bioinfer::tuning {

// Best seconds per call of out (M, N) = x (M, K) . w (N, K)^T with w packed once for `compute`,
// over `repeat` timings of `calls` back-to-back calls after 3 warm-up calls; a negative value
// when this CPU has no GEMM for `compute`. `stored`: w's checkpoint dtype (F32 or BF16; a bf16
// weight computed in fp32 stays bf16 and is widened inside the GEMM).
double time_packed_linear(int64_t M, int64_t K, int64_t N, DType compute, int repeat, int calls,
                          DType stored = DType::F32);

// Whether this CPU has a packed GEMM computing in `compute` (BF16 needs AVX512-BF16 or AMX).
bool has_packed_gemm(DType compute);

}  // namespace bioinfer::tuning
