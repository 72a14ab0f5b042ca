// The model-specific ops composed from core ops (fallback.cpp): what ops.cpp runs where the
// backend's kernel table leaves such an entry null (backend/kernels.h). Each takes the arguments
// its op has already checked.
#pragma once
#include <cstdint>
#include <vector>

#include "bioinfer/tensor.h"
#include "ops/ops.h"

namespace bioinfer::ops::fallback {

void rms_norm(const Tensor& x, float eps, Tensor& out);
void l2_normalize(const Tensor& x, float eps, Tensor& out);
void token_dropout(Tensor& x, const std::vector<int32_t>& ids, const std::vector<int64_t>& cu,
                   int32_t mask_id, float keep);
void contact_apc(const Tensor& probs, const Tensor& weights, Tensor& acc);
void virtual_cb(const Tensor& atoms, Tensor& out);
void atom_pair_geometry(const Tensor& pos, const Tensor& valid, const Tensor& uid,
                        const Tensor& keys, Tensor& out);
void quat_update(Tensor& frames, const Tensor& update);
void ipa(const IpaInputs& in, Tensor& out);
void atom_frames(const Tensor& backbone, const Tensor& angles, const Tensor& aatype,
                 const ResidueTables& t, float trans_scale, Tensor& frames_out,
                 Tensor& positions);

}  // namespace bioinfer::ops::fallback
