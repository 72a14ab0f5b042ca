// Linear layers through oneDNN matmul (AVX2/AVX-512/AMX inside), with bias, GELU and the
// residual add fused as post-ops. Primitives are cached per shape; weights can be packed once
// into the blocked layout oneDNN's kernels read directly (no per-call repacking).
#pragma once
#include <cstdint>
#include <string>

#include "backend/kernels.h"
#include "bioinfer/dtype.h"

namespace bioinfer::cpu {

// y's rows are ldy floats apart (0: N).
void linear_dnnl(const float* x, const float* w, const void* packed, const float* b, float* y,
                 int64_t M, int64_t K, int64_t N, Act act, float scale, bool accumulate,
                 int64_t ldy = 0);
// w (N, K) reordered into oneDNN's preferred weights layout for `compute` (F32, BF16, or I8 for
// s8 weights already quantized), straight from its stored dtype (no fp32 copy of a bf16
// checkpoint); owned by the returned handle.
void* pack_linear_dnnl(const void* w, DType w_dtype, int64_t K, int64_t N, DType compute);
void free_packed_dnnl(void* packed);
// Whether oneDNN's int8 GEMM on this machine adds each u8 x s8 product into 32 bits (VNNI, AMX),
// rather than pairs of them into a saturating 16-bit lane first (AVX2, plain AVX-512).
bool dnnl_int8_exact_products();
// acc (M, N) int32 = xq (M, K) u8 . w^T for w packed with compute I8 (s8 weights): oneDNN's
// u8 x s8 -> s32 matmul.
void linear_int8_dnnl(const uint8_t* xq, const void* packed, int32_t* acc, int64_t M, int64_t K,
                      int64_t N);
// c[g] (M, N) = op(a[g]) . op(b[g]) for g < G, fp32; a[g] is (M, K), or stored (K, M) when
// trans_a; b[g] is (K, N), or stored (N, K) when trans_b. One batched oneDNN matmul.
void bmm_dnnl(const float* a, const float* b, float* c, int64_t G, int64_t M, int64_t N, int64_t K,
              bool trans_a, bool trans_b);
// A buffer of at least `bytes` owned by the calling thread, 64-byte aligned (AMX tile loads of a
// misaligned source split cache lines: 25% slower), kept across calls; one per slot.
enum ScratchSlot : int {
    kScratchBf16Activations,   // x rounded to bf16 for a bf16 GEMM
    kScratchWidenedPanel,      // a bf16 weight's rows widened to fp32
    kScratchScaledSum,         // a GEMM's output before its scaled residual add
    kScratchInt8Activations,   // x quantized per row to u8, and the rows' scales
    kScratchInt8Accumulators,  // an int8 GEMM's int32 output
    kScratchDnnl,              // a oneDNN primitive's scratchpad (scratchpad_mode::user)
    kScratchSlots
};
void* thread_scratch(ScratchSlot slot, size_t bytes);
// The oneDNN library this build runs: "MAJOR.MINOR.PATCH (git hash)" (recorded with benchmarks).
std::string onednn_version();

}  // namespace bioinfer::cpu
