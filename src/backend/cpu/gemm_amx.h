// The own AMX GEMMs (Sapphire Rapids and later): int8 (u8 activations x s8 weights -> s32,
// TDPBUSD) and bf16 (bf16 x bf16 -> fp32, TDPBF16PS), on weights packed once into the tiles the
// instructions read. Each block of 32 x 32 outputs is computed over the whole K in four
// accumulator tiles (two A tiles of 16 rows, two B tiles of 16 columns) and handed to an epilogue
// while it is hot, so no M x N intermediate is written: the int8 linear rescales, adds the bias,
// activates and adds the residual from a 4 KiB buffer. oneDNN 2.6's AMX GEMM reaches a third of
// the tile peak at the models' shapes; this one runs the int8 GEMM 1.5-3x faster
// (docs/performance.md, "int8 and bf16 on AMX").
#pragma once
#include <cstdint>

#include "bioinfer/dtype.h"

namespace bioinfer::cpu {

// Whether the AMX GEMMs run here: the CPU has AMX-INT8 and AMX-BF16, Linux grants this process
// the tile state, BIOINFER_GEMM_AMX is not "0" (which keeps oneDNN's GEMM, for comparisons) and
// ONEDNN_MAX_CPU_ISA, when set, allows AMX.
bool amx_gemm_usable();

// Rows of a block and the row padding the activations need (tiles read 16 rows at a time).
constexpr int64_t kAmxRows = 32;
// Bytes of K per tile row: 64 int8 or 32 bf16 values. K is padded with zero weights to it.
constexpr int64_t kAmxKBytes = 64;

struct AmxWeights;
// w (N, K) packed into tiles: int8 (compute I8, w already quantized, s8) or bf16 (compute BF16,
// w fp32 or bf16; fp32 is rounded to nearest even). N is padded to 32 columns, K to a tile row.
AmxWeights* pack_amx(const void* w, DType w_dtype, int64_t K, int64_t N, DType compute);
void free_amx(AmxWeights* p);
// Row stride, in elements, the activations must have for p (K rounded up to a tile row).
int64_t amx_lda(const AmxWeights& p);

// Called once per computed block: rows [m0, m0 + rows) and columns [n0, n0 + cols) of the output
// are in `block` (int32 for int8, fp32 for bf16), row r at block + r * 32.
using AmxEpilogue = void (*)(void* ctx, const void* block, int64_t m0, int64_t rows, int64_t n0,
                             int64_t cols);

// a: M rows of the activations, amx_lda(p) elements apart (u8 for int8, bf16 for bf16), with at
// least round_up(M, 32) rows readable (the rows past M are read, their outputs never handed out).
// Blocks run over the OpenMP threads; each calls `epi` on its own blocks.
void amx_gemm(const void* a, const AmxWeights& p, int64_t M, AmxEpilogue epi, void* ctx);

// x (M, K) fp32 rounded to bf16 (nearest even) into xb, rows ldb elements apart, the padding
// columns [K, ldb) zeroed; over the OpenMP threads.
void amx_round_bf16(const float* x, int64_t M, int64_t K, uint16_t* xb, int64_t ldb);

}  // namespace bioinfer::cpu
