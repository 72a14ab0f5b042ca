// Boltz-2's inference-time steering of the sampler's denoised coordinates by forced pocket and
// contact constraints (boltz's ContactPotential under contact_guidance_update, on by default):
// every forced constraint is a group of atom pairs with an upper distance bound, and the
// gradient of a soft-min over each group's flat-bottom energies pulls the closest pair in.
#pragma once
#include <cstdint>
#include <vector>

#include "bioinfer/tensor.h"
#include "models/boltz2/features.h"

namespace bioinfer::boltz2 {

struct ContactTerms {
    std::vector<int64_t> i, j;     // atom pairs (indices into the padded atoms)
    std::vector<int64_t> group;    // each pair's union group: one per pocket token or contact
    std::vector<float> threshold;  // each pair's upper bound (Angstrom)
    int64_t groups = 0;
    bool empty() const { return i.empty(); }

    // From the features boltz names contact_pair_index (2, E), contact_union_index (E) and
    // contact_thresholds (E); empty when they are absent or hold no pair.
    static ContactTerms from(const Features& f);
};

// boltz's schedules at steering time t = 1 - step / steps: the guidance weight (1 above 0.75,
// 0.5 above 0.25, else 0) and the union soft-min's lambda (8 at t = 0 falling to 0 at t = 1).
double contact_guidance_weight(double t);
double contact_union_lambda(double t);

// d energy / d coordinates of the contact potential at `x` (A, 3) for one sample, added into
// `grad` (A, 3) times `scale`.
void contact_gradient(const ContactTerms& c, const float* x, double t, float scale, float* grad);

// The guidance a step applies to the denoised coordinates (S, A, 3) at steering time t: 20
// gradient steps on a running update, the contact potential's gradient taken every 4th step at
// the denoised coordinates plus the update so far, times its weight; then denoised += update.
void apply_contact_guidance(const ContactTerms& c, double t, Tensor& denoised);

}  // namespace bioinfer::boltz2
