// boltz's ContactPotential (potentials.py: FlatBottomPotential over DistancePotential with a
// union soft-min) and the guidance loop of AtomDiffusion.sample, in fp32 as boltz computes them.
#include "models/boltz2/potentials.h"

#include <algorithm>
#include <cmath>

#include "bioinfer/error.h"
#include "models/boltz2/sampler.h"
#include "ops/ops.h"

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

TemplateTerms TemplateTerms::from(const Features& f) {
    TemplateTerms t;
    if (!f.has("template_force") || !f.has("template_cb")) return t;
    const Tensor force = f.at("template_force").to_f32();
    const Tensor cb = f.at("template_cb").to_f32(), cbm = f.at("template_mask_cb").to_f32();
    const Tensor thr = f.at("template_force_threshold").to_f32();
    const int64_t T = force.numel(), N = f.num_tokens();
    BI_CHECK(cb.shape() == Shape({T, N, 3}) && cbm.shape() == Shape({T, N}) && thr.numel() == T,
             "boltz2 template potential",
             "template_cb, template_mask_cb and "
             "template_force_threshold do not match template_force (",
             T, " templates)");
    t.tokens = N;
    // host-side: small per-template tables and index lists
    for (int64_t k = 0; k < T; ++k) {
        if (force.f32()[k] == 0.0f) continue;
        t.ref.push_back(Tensor::of(
            std::vector<float>(cb.f32() + k * N * 3, cb.f32() + (k + 1) * N * 3), {N, 3}));
        t.mask.push_back(
            Tensor::of(std::vector<float>(cbm.f32() + k * N, cbm.f32() + (k + 1) * N)));
        // host-side: one threshold per template
        t.threshold.push_back(thr.f32()[k]);
    }
    if (t.ref.empty()) return t;
    // each token's representative atom and each atom's token (rows of zeros: index 0), as the
    // reference's products with arange give them
    const Tensor rep = f.at("token_to_rep_atom").to_f32(), a2t = f.at("atom_to_token").to_f32();
    const int64_t A = rep.size(1);
    t.rep_atom.assign(size_t(N), 0);
    t.atom_token.assign(size_t(A), 0);
    // host-side: index tables read once per target from the one-hot maps
    for (int64_t n = 0; n < N; ++n)
        for (int64_t a = 0; a < A; ++a)
            if (rep.f32()[n * A + a] != 0.0f) t.rep_atom[size_t(n)] = a;
    for (int64_t a = 0; a < A; ++a)
        for (int64_t n = 0; n < N; ++n)
            if (a2t.f32()[a * N + n] != 0.0f) t.atom_token[size_t(a)] = n;
    return t;
}

void template_gradient(const TemplateTerms& t, const Tensor& x, float scale, Tensor& grad) {
    const int64_t S = x.size(0), A = x.size(1), N = t.tokens, F = int64_t(t.ref.size());
    // host-side: one gather of N representative atoms per sample
    std::vector<float> p(size_t(S * N * 3));
    for (int64_t s = 0; s < S; ++s)
        for (int64_t n = 0; n < N; ++n)
            for (int k = 0; k < 3; ++k)
                p[size_t((s * N + n) * 3 + k)] = x.f32()[(s * A + t.rep_atom[size_t(n)]) * 3 + k];
    const Tensor P = Tensor::of(p, {S, N, 3});
    std::vector<float> de(size_t(S * N), 0.f), rhat0(size_t(S * N * 3), 0.f);
    for (int64_t f = 0; f < F; ++f) {
        // host-side: per template, N token distances and their flat-bottom derivative
        const float* m = t.mask[size_t(f)].f32();
        if (std::all_of(m, m + N, [](float v) { return v == 0.0f; })) continue;
        const Tensor ref = ops::contiguous(t.ref[size_t(f)].reshape({1, N, 3}).expand({S, N, 3}));
        const Tensor aligned = rigid_align(ref, P, t.mask[size_t(f)]);
        const Tensor al = aligned.to_f32();
        for (int64_t s = 0; s < S; ++s)
            for (int64_t n = 0; n < N; ++n) {
                float r[3], n2 = 0.f;
                // host-side: (see above)
                for (int k = 0; k < 3; ++k) {
                    r[k] = p[size_t((s * N + n) * 3 + k)] - al.f32()[(s * N + n) * 3 + k];
                    n2 += r[k] * r[k];
                }
                const float d = std::sqrt(n2);
                // upper bound: the threshold where the template has a CB, else none
                if (m[n] != 0.0f && d > t.threshold[size_t(f)]) de[size_t(s * N + n)] += 1.f;
                if (f == 0 && d > 0.f)
                    for (int k = 0; k < 3; ++k)
                        rhat0[size_t((s * N + n) * 3 + k)] = r[k] / d * m[n];
            }
    }
    // host-side: every atom takes its token's gradient (a gather over A atoms)
    float* g = grad.f32();
    for (int64_t s = 0; s < S; ++s)
        for (int64_t a = 0; a < A; ++a) {
            const int64_t n = t.atom_token[size_t(a)];
            for (int k = 0; k < 3; ++k)
                g[(s * A + a) * 3 + k] +=
                    scale * de[size_t(s * N + n)] * rhat0[size_t((s * N + n) * 3 + k)];
        }
}

void apply_guidance(const SteeringTerms& terms, double t, Tensor& denoised) {
    if (terms.empty()) return;
    const double contact_weight = terms.contacts.empty() ? 0.0 : contact_guidance_weight(t);
    constexpr float kTemplateWeight = 0.1f;
    if (contact_weight <= 0 && terms.templates.empty()) return;
    // num_gd_steps; each potential's guidance_interval
    constexpr int kSteps = 20, kContactInterval = 4, kTemplateInterval = 2;
    BI_CHECK(denoised.ndim() == 3 && denoised.shape()[2] == 3, "boltz2 guidance",
             "expected denoised (S, A, 3), got ", shape_str(denoised.shape()));
    const int64_t S = denoised.shape()[0], A = denoised.shape()[1];
    Tensor update = Tensor::zeros({S, A, 3}), at = Tensor::empty({S, A, 3}),
           grad = Tensor::empty({S, A, 3});
    for (int g = 0; g < kSteps; ++g) {
        const bool contact = contact_weight > 0 && g % kContactInterval == 0;
        const bool tmpl = !terms.templates.empty() && g % kTemplateInterval == 0;
        if (!contact && !tmpl) continue;
        ops::add(denoised, update, at);
        ops::scale(at, 0.0f, grad);
        if (contact)
            for (int64_t s = 0; s < S; ++s) {
                // host-side: the contact gradient touches the few atoms of the forced pairs
                contact_gradient(terms.contacts, at.f32() + s * A * 3, t, float(contact_weight),
                                 grad.f32() + s * A * 3);
            }
        if (tmpl) template_gradient(terms.templates, at, kTemplateWeight, grad);
        ops::axpy(-1.0f, grad, update);
    }
    ops::add_into(update, denoised);
}

}  // namespace bioinfer::boltz2
