// boltz's ContactPotential (potentials.py: FlatBottomPotential over DistancePotential with a
// union soft-min) and the guidance loop of AtomDiffusion.sample, in fp32 as boltz computes them.
#include "models/boltz2/potentials.h"

#include <cmath>

#include "bioinfer/error.h"

namespace bioinfer::boltz2 {

ContactTerms ContactTerms::from(const Features& f) {
    ContactTerms c;
    if (!f.has("contact_pair_index")) return c;
    const Tensor idx = f.at("contact_pair_index").to_f32();
    const int64_t E = idx.numel() / 2;
    if (E == 0) return c;
    BI_CHECK(idx.ndim() == 2 && idx.shape()[0] == 2, "boltz2 contact potential",
             "contact_pair_index: expected (2, E), got ", shape_str(idx.shape()));
    const Tensor grp = f.at("contact_union_index").to_f32();
    const Tensor thr = f.at("contact_thresholds").to_f32();
    BI_CHECK(grp.numel() == E && thr.numel() == E, "boltz2 contact potential",
             "contact_union_index and contact_thresholds: expected ", E, " entries, got ",
             grp.numel(), " and ", thr.numel());
    // host-side: small index tables
    const float* p = idx.f32();
    for (int64_t e = 0; e < E; ++e) {
        c.i.push_back(int64_t(std::lrint(p[e])));
        c.j.push_back(int64_t(std::lrint(p[E + e])));
        c.group.push_back(int64_t(std::lrint(grp.f32()[e])));
        c.threshold.push_back(thr.f32()[e]);
        c.groups = std::max(c.groups, c.group.back() + 1);
    }
    return c;
}

double contact_guidance_weight(double t) { return t > 0.75 ? 1.0 : t > 0.25 ? 0.5 : 0.0; }

double contact_union_lambda(double t) {
    // ExponentialInterpolation(start 8, end 0, alpha -2)
    const double start = 8.0, end = 0.0, alpha = -2.0;
    return start + (end - start) * (std::exp(alpha * t) - 1.0) / (std::exp(alpha) - 1.0);
}

void contact_gradient(const ContactTerms& c, const float* x, double t, float scale, float* grad) {
    // host-side: a few hundred atom pairs per forced constraint
    const size_t E = c.i.size();
    const float lambda = float(contact_union_lambda(t));
    std::vector<float> energy(E), d_energy(E), r_hat(E * 3), neg(E);
    std::vector<float> z(size_t(c.groups), 0.f), f(size_t(c.groups), 0.f);
    for (size_t e = 0; e < E; ++e) {
        float r[3], n2 = 0;
        for (int k = 0; k < 3; ++k) {
            r[k] = x[c.i[e] * 3 + k] - x[c.j[e] * 3 + k];
            n2 += r[k] * r[k];
        }
        const float d = std::sqrt(n2);
        for (int k = 0; k < 3; ++k) r_hat[e * 3 + k] = r[k] / d;
        // flat bottom, k = 1, upper bound only
        const bool over = d > c.threshold[e];
        energy[e] = over ? d - c.threshold[e] : 0.f;
        d_energy[e] = over ? 1.f : 0.f;
        neg[e] = std::exp(-lambda * energy[e]);
        z[size_t(c.group[e])] += neg[e];
    }
    std::vector<float> soft(E);
    for (size_t e = 0; e < E; ++e) {
        const float zg = z[size_t(c.group[e])];
        soft[e] = zg == 0.f ? 0.f : neg[e] / zg;
        f[size_t(c.group[e])] += energy[e] * soft[e];
    }
    for (size_t e = 0; e < E; ++e) {
        const float ds =
            d_energy[e] * soft[e] * (1.f + lambda * (energy[e] - f[size_t(c.group[e])]));
        for (int k = 0; k < 3; ++k) {
            grad[c.i[e] * 3 + k] += scale * ds * r_hat[e * 3 + k];
            grad[c.j[e] * 3 + k] -= scale * ds * r_hat[e * 3 + k];
        }
    }
}

void apply_contact_guidance(const ContactTerms& c, double t, Tensor& denoised) {
    if (c.empty()) return;
    const double weight = contact_guidance_weight(t);
    if (weight <= 0) return;
    constexpr int kSteps = 20, kInterval = 4;  // num_gd_steps, the potential's guidance_interval
    BI_CHECK(denoised.ndim() == 3 && denoised.shape()[2] == 3, "boltz2 contact guidance",
             "expected denoised (S, A, 3), got ", shape_str(denoised.shape()));
    const int64_t S = denoised.shape()[0], A = denoised.shape()[1];
    // host-side: the update is a sparse function of a few atoms' coordinates
    float* xs = denoised.f32();
    for (int64_t s = 0; s < S; ++s) {
        float* x = xs + s * A * 3;
        std::vector<float> update(size_t(A * 3), 0.f), at(size_t(A * 3)), grad(size_t(A * 3));
        for (int g = 0; g < kSteps; ++g) {
            if (g % kInterval != 0) continue;
            for (size_t k = 0; k < at.size(); ++k) at[k] = x[k] + update[k];
            std::fill(grad.begin(), grad.end(), 0.f);
            contact_gradient(c, at.data(), t, float(weight), grad.data());
            for (size_t k = 0; k < update.size(); ++k) update[k] -= grad[k];
        }
        for (size_t k = 0; k < update.size(); ++k) x[k] += update[k];
    }
}

}  // namespace bioinfer::boltz2
