// The CPU's data-movement and glue kernels (strided copies, gathers, the small per-row and
// per-sequence ops; the per-residue geometry is in geometry_kernels.h): one set for every ISA, threaded with OpenMP and built
// without ISA flags so they compute exactly what the plain per-unit code in
// backend/glue_units.h says.
#pragma once
#include <cstdint>

#include "backend/kernels.h"

namespace bioinfer::cpu::glue {

using kernels::Context;

void copy_strided(const Context& ctx, const void* src, void* dst, int ndim, const int64_t* shape,
                  const int64_t* src_strides, const int64_t* dst_strides, bool accumulate);
void binary_rows(const Context& ctx, int op, const float* a, int64_t lda, const float* b,
                 int64_t ldb, float* y, int64_t ldy, int64_t rows, int64_t cols);
void add_mul(const Context& ctx, const float* a, const float* b, float* y, int64_t n);
void axpy(const Context& ctx, float alpha, const float* x, float* y, int64_t n);
void scale_rows(const Context& ctx, const float* x, const float* f, float* y, int64_t rows,
                int64_t cols);
void activation(const Context& ctx, Act act, const float* x, float shift, float* y, int64_t n);
void embedding(const Context& ctx, const int32_t* ids, int64_t n, const float* table, int64_t D,
               float* out, bool accumulate);
void token_dropout(const Context& ctx, float* x, const int32_t* ids, const int64_t* cu, int64_t B,
                   int64_t D, int32_t mask_id, float keep);
void outer_product_difference(const Context& ctx, const float* qk, int64_t L, int64_t I,
                              int64_t r0, int64_t r1, float* out);
void contact_apc(const Context& ctx, const float* probs, int64_t H, int64_t P, int64_t L,
                 const float* w, float* acc);
void l2_normalize(const Context& ctx, const float* x, float* y, int64_t rows, int64_t d, float eps);
void rms_norm(const Context& ctx, const float* x, float* y, int64_t rows, int64_t d, float eps);
void bin_expectation(const Context& ctx, const float* probs, const float* values, float* out,
                     int64_t rows, int64_t K);
void max_value(const Context& ctx, const float* x, int64_t n, float* out);
void relpos_classes(const Context& ctx, const int32_t* index, int64_t L, int64_t bins, int32_t* out);

// Fills the glue entries of a kernel table (the geometry ones: geometry_kernels.h).
void fill_table(kernels::KernelTable& t);

}  // namespace bioinfer::cpu::glue
