// The CPU's geometry kernels (the structure models' per-residue and per-pair ops): one set for
// every ISA, threaded with OpenMP and built without ISA flags so they compute exactly what the
// plain per-unit code in backend/geometry_units.h says.
#pragma once
#include <cstdint>

#include "backend/kernels.h"

namespace bioinfer::cpu::glue {

using kernels::Context;

void virtual_cb(const Context& ctx, const float* atoms, int64_t L, int64_t stride, float* out);
void distance_bins(const Context& ctx, const float* points, int64_t L, const float* bounds_sq,
                   int64_t nb, int32_t* out);
void atom_pair_geometry(const Context& ctx, const float* pos, const float* valid, const float* uid,
                        const int32_t* keys, int64_t K, int64_t W, int64_t H, float* out);
void quat_update(const Context& ctx, float* frames, const float* update, int64_t L);
void ipa(const Context& ctx, const kernels::IpaArgs& a);
void atom_frames(const Context& ctx, const kernels::AtomFrameArgs& a);

// Fills the geometry entries of a kernel table.
void fill_geometry(kernels::KernelTable& t);

}  // namespace bioinfer::cpu::glue
