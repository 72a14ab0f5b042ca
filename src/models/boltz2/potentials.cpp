// boltz's steering potentials (potentials.py: the contact potential's union soft-min, the
// template reference potential, the physical flat-bottom potentials), the guidance loop of
// AtomDiffusion.sample and its resampling energy, in fp32 as boltz computes them.
#include "models/boltz2/potentials.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "bioinfer/error.h"
#include "nn/edm_sampler.h"
#include "ops/ops.h"

namespace bioinfer::boltz2 {

namespace {

// boltz's const.vdw_radii for elements 1..118 (Angstrom).
constexpr float kVdwRadii[118] = {
    1.2f,  1.4f,  2.2f,  1.9f,  1.8f,  1.7f,  1.6f, 1.55f, 1.5f,  1.54f, 2.4f,  2.2f,  2.1f,  2.1f,
    1.95f, 1.8f,  1.8f,  1.88f, 2.8f,  2.4f,  2.3f, 2.15f, 2.05f, 2.05f, 2.05f, 2.05f, 2.0f,  2.0f,
    2.0f,  2.1f,  2.1f,  2.1f,  2.05f, 1.9f,  1.9f, 2.02f, 2.9f,  2.55f, 2.4f,  2.3f,  2.15f, 2.1f,
    2.05f, 2.05f, 2.0f,  2.05f, 2.1f,  2.2f,  2.2f, 2.25f, 2.2f,  2.1f,  2.1f,  2.16f, 3.0f,  2.7f,
    2.5f,  2.48f, 2.47f, 2.45f, 2.43f, 2.42f, 2.4f, 2.38f, 2.37f, 2.35f, 2.33f, 2.32f, 2.3f,  2.28f,
    2.27f, 2.25f, 2.2f,  2.1f,  2.05f, 2.0f,  2.0f, 2.05f, 2.1f,  2.05f, 2.2f,  2.3f,  2.3f,  2.0f,
    2.0f,  2.0f,  2.0f,  2.0f,  2.0f,  2.4f,  2.0f, 2.3f,  2.0f,  2.0f,  2.0f,  2.0f,  2.0f,  2.0f,
    2.0f,  2.0f,  2.0f,  2.0f,  2.0f,  2.0f,  2.0f, 2.0f,  2.0f,  2.0f,  2.0f,  2.0f,  2.0f,  2.0f,
    2.0f,  2.0f,  2.0f,  2.0f,  2.0f,  2.0f};

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Vec3 {
    float x, y, z;
};
Vec3 sub(const float* a, const float* b) {
    return {a[0] - b[0], a[1] - b[1], a[2] - b[2]};
}
Vec3 cross(const Vec3& a, const Vec3& b) {
    return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}
float dot(const Vec3& a, const Vec3& b) {
    return a.x * b.x + a.y * b.y + a.z * b.z;
}
float norm(const Vec3& a) {
    return std::sqrt(dot(a, a));
}

// Integer rows of an index feature (K, E) as k-major E-wide rows; empty features give none.
std::vector<int64_t> index_rows(const Features& f, const std::string& name, int64_t K, int64_t& E) {
    E = 0;
    if (!f.has(name)) return {};
    const Tensor t = f.at(name).to_f32();
    if (t.numel() == 0) return {};
    BI_CHECK(t.ndim() == 2 && t.size(0) == K, "boltz2 potentials", name, ": expected (", K,
             ", E), got ", shape_str(t.shape()));
    E = t.size(1);
    std::vector<int64_t> out(size_t(K * E));
    // host-side: a small index table read once per target
    for (int64_t i = 0; i < K * E; ++i) out[size_t(i)] = int64_t(std::lrint(t.f32()[i]));
    return out;
}

std::vector<float> values(const Features& f, const std::string& name) {
    if (!f.has(name)) return {};
    const Tensor t = f.at(name).to_f32();
    // host-side: a small per-constraint table read once per target
    return std::vector<float>(t.f32(), t.f32() + t.numel());
}

// Each atom's token from atom_to_token (A, N); rows of zeros (padding) give token 0, as the
// reference's product with the token indices does.
std::vector<int64_t> atom_tokens(const Features& f) {
    const Tensor a2t = f.at("atom_to_token").to_f32();
    const int64_t A = a2t.size(0), N = a2t.size(1);
    std::vector<int64_t> out(static_cast<size_t>(A), 0);
    // host-side: an index table read once per target from the one-hot map
    for (int64_t a = 0; a < A; ++a)
        for (int64_t n = 0; n < N; ++n)
            if (a2t.f32()[a * N + n] != 0.0f) out[size_t(a)] = n;
    return out;
}

// Dihedral terms from an index feature (4, E) and a per-term flag feature: bounds `on` (lower,
// upper) where the flag is set, `off` where not.
FlatBottomTerms oriented_dihedrals(const Features& f, const std::string& index,
                                   const std::string& flag, FlatBottomTerms::Variable variable,
                                   std::array<float, 2> on, std::array<float, 2> off) {
    FlatBottomTerms t;
    int64_t E = 0;
    t.variable = variable;
    t.arity = 4;
    t.index = index_rows(f, index, 4, E);
    const std::vector<float> flags = values(f, flag);
    for (int64_t e = 0; e < E; ++e) {
        const std::array<float, 2>& b = flags[size_t(e)] != 0.f ? on : off;
        t.lower.push_back(b[0]);
        t.upper.push_back(b[1]);
    }
    return t;
}

}  // namespace

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
    const Tensor rep = f.at("token_to_rep_atom").to_f32();
    const int64_t A = rep.size(1);
    t.rep_atom.assign(size_t(N), 0);
    // host-side: an index table read once per target from the one-hot map
    for (int64_t n = 0; n < N; ++n)
        for (int64_t a = 0; a < A; ++a)
            if (rep.f32()[n * A + a] != 0.0f) t.rep_atom[size_t(n)] = a;
    t.atom_token = atom_tokens(f);
    return t;
}

std::vector<double> template_potential(const TemplateTerms& t, const Tensor& x, float scale,
                                       Tensor* grad) {
    const int64_t S = x.size(0), A = x.size(1), N = t.tokens, F = int64_t(t.ref.size());
    std::vector<double> energy(static_cast<size_t>(S), 0.0);
    if (F == 0) return energy;
    // host-side: one gather of N representative atoms per sample
    std::vector<float> p(size_t(S * N * 3));
    for (int64_t s = 0; s < S; ++s)
        for (int64_t n = 0; n < N; ++n)
            for (int k = 0; k < 3; ++k)
                p[size_t((s * N + n) * 3 + k)] = x.f32()[(s * A + t.rep_atom[size_t(n)]) * 3 + k];
    const Tensor P = Tensor::of(p, {S, N, 3});
    std::vector<float> de(size_t(S * N), 0.f), rhat0(size_t(S * N * 3), 0.f), e32(size_t(S), 0.f);
    for (int64_t f = 0; f < F; ++f) {
        // host-side: per template, N token distances and their flat-bottom derivative
        const float* m = t.mask[size_t(f)].f32();
        if (std::all_of(m, m + N, [](float v) { return v == 0.0f; })) continue;
        const Tensor ref = ops::contiguous(t.ref[size_t(f)].reshape({1, N, 3}).expand({S, N, 3}));
        const Tensor aligned = nn::rigid_align(ref, P, t.mask[size_t(f)]);
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
                if (m[n] != 0.0f && d > t.threshold[size_t(f)]) {
                    de[size_t(s * N + n)] += 1.f;
                    e32[size_t(s)] += d - t.threshold[size_t(f)];
                }
                if (f == 0 && d > 0.f)
                    for (int k = 0; k < 3; ++k)
                        rhat0[size_t((s * N + n) * 3 + k)] = r[k] / d * m[n];
            }
    }
    for (int64_t s = 0; s < S; ++s) energy[size_t(s)] = e32[size_t(s)];
    if (!grad) return energy;
    // host-side: every atom takes its token's gradient (a gather over A atoms)
    float* g = grad->f32();
    for (int64_t s = 0; s < S; ++s)
        for (int64_t a = 0; a < A; ++a) {
            const int64_t n = t.atom_token[size_t(a)];
            for (int k = 0; k < 3; ++k)
                g[(s * A + a) * 3 + k] +=
                    scale * de[size_t(s * N + n)] * rhat0[size_t((s * N + n) * 3 + k)];
        }
    return energy;
}

double contact_energy(const ContactTerms& c, const float* x, double t) {
    // host-side: a few hundred atom pairs per forced constraint
    const size_t E = c.i.size();
    const float lambda = float(contact_union_lambda(t));
    std::vector<float> energy(E), neg(E), z(size_t(c.groups), 0.f);
    for (size_t e = 0; e < E; ++e) {
        float n2 = 0;
        for (int k = 0; k < 3; ++k) {
            const float r = x[c.i[e] * 3 + k] - x[c.j[e] * 3 + k];
            n2 += r * r;
        }
        const float d = std::sqrt(n2);
        energy[e] = d > c.threshold[e] ? d - c.threshold[e] : 0.f;
        neg[e] = std::exp(-lambda * energy[e]);
        z[size_t(c.group[e])] += neg[e];
    }
    float total = 0.f;
    for (size_t e = 0; e < E; ++e) {
        const float zg = z[size_t(c.group[e])];
        total += energy[e] * (zg == 0.f ? 0.f : neg[e] / zg);
    }
    return total;
}

SteeringTerms SteeringTerms::from(const Features& f, bool physical) {
    SteeringTerms s;
    s.contacts = ContactTerms::from(f);
    s.templates = TemplateTerms::from(f);
    s.physical = physical;
    if (physical) s.potentials = PhysicalTerms::from(f);
    return s;
}

namespace {

// boltz's physical potentials in get_potentials' order with their guidance and resampling weights
// at steering time t (a PiecewiseStepFunction takes the value after the thresholds t exceeds) and
// their guidance intervals.
struct PotentialSchedule {
    const char* name;
    float guidance, resampling;
    int interval;
};
std::vector<PotentialSchedule> physical_schedule(double t) {
    return {{"com", 0.5f, 0.5f, 4},
            {"vdw", t > 0.4 ? 0.0f : 0.125f, t > 0.6 ? 0.0f : 0.01f, 5},
            {"connections", 0.15f, 1.0f, 1},
            {"posebusters", 0.01f, 0.1f, 1},
            {"chiral", 0.1f, 1.0f, 1},
            {"stereo", 0.05f, 1.0f, 1},
            {"planar", 0.05f, 1.0f, 1}};
}

}  // namespace

std::vector<double> steering_energy(const SteeringTerms& terms, double t, const Tensor& denoised) {
    const int64_t S = denoised.size(0), A = denoised.size(1);
    const Tensor x = denoised.to_f32();
    std::vector<float> e(static_cast<size_t>(S), 0.f);
    for (int64_t s = 0; s < S; ++s) {
        // host-side: per-sample potentials over the denoised coordinates
        const float* xs = x.f32() + s * A * 3;
        if (terms.physical)
            for (const PotentialSchedule& p : physical_schedule(t))
                if (p.resampling > 0)
                    e[size_t(s)] += p.resampling * float(terms.potentials.evaluate(p.name, xs, t));
        if (!terms.contacts.empty())
            e[size_t(s)] += 1.0f * float(contact_energy(terms.contacts, xs, t));
    }
    if (!terms.templates.empty()) {
        const std::vector<double> te = template_potential(terms.templates, x);
        for (int64_t s = 0; s < S; ++s) e[size_t(s)] += 1.0f * float(te[size_t(s)]);
    }
    return std::vector<double>(e.begin(), e.end());
}

void apply_guidance(const SteeringTerms& terms, double t, Tensor& denoised) {
    if (terms.empty()) return;
    const double contact_weight = terms.contacts.empty() ? 0.0 : contact_guidance_weight(t);
    constexpr float kTemplateWeight = 0.1f;
    const std::vector<PotentialSchedule> physical =
        terms.physical ? physical_schedule(t) : std::vector<PotentialSchedule>();
    // num_gd_steps; the contact and template potentials' guidance_interval
    constexpr int kSteps = 20, kContactInterval = 4, kTemplateInterval = 2;
    BI_CHECK(denoised.ndim() == 3 && denoised.shape()[2] == 3, "boltz2 guidance",
             "expected denoised (S, A, 3), got ", shape_str(denoised.shape()));
    const int64_t S = denoised.shape()[0], A = denoised.shape()[1];
    Tensor update = Tensor::zeros({S, A, 3}), at = Tensor::empty({S, A, 3}),
           grad = Tensor::empty({S, A, 3});
    for (int g = 0; g < kSteps; ++g) {
        bool any = false;
        for (const PotentialSchedule& p : physical) any |= p.guidance > 0 && g % p.interval == 0;
        const bool contact = contact_weight > 0 && g % kContactInterval == 0;
        const bool tmpl = !terms.templates.empty() && g % kTemplateInterval == 0;
        if (!any && !contact && !tmpl) continue;
        ops::add(denoised, update, at);
        ops::scale(at, 0.0f, grad);
        for (int64_t s = 0; s < S; ++s) {
            // host-side: the potentials touch the atoms of their terms
            const float* xs = at.f32() + s * A * 3;
            float* gs = grad.f32() + s * A * 3;
            for (const PotentialSchedule& p : physical)
                if (p.guidance > 0 && g % p.interval == 0)
                    terms.potentials.evaluate(p.name, xs, t, gs, p.guidance);
            if (contact) contact_gradient(terms.contacts, xs, t, float(contact_weight), gs);
        }
        if (tmpl) template_potential(terms.templates, at, kTemplateWeight, &grad);
        ops::axpy(-1.0f, grad, update);
    }
    ops::add_into(update, denoised);
}

// ---- physical potentials ------------------------------------------------------------------

namespace {

// One flat-bottom term over the points p (arity of them): its energy; with out, d energy / d p[k]
// times scale added into out[k].
float flat_bottom_term(FlatBottomTerms::Variable variable, int arity, const float* const* p,
                       float lower, float upper, float* const* out, float scale) {
    float v = 0.f;
    Vec3 g[4] = {};
    if (variable == FlatBottomTerms::Variable::Distance) {
        const Vec3 r = sub(p[0], p[1]);
        v = norm(r);
        g[0] = {r.x / v, r.y / v, r.z / v};
        g[1] = {-g[0].x, -g[0].y, -g[0].z};
    } else {
        const Vec3 r_ij = sub(p[0], p[1]), r_kj = sub(p[2], p[1]), r_kl = sub(p[2], p[3]);
        const Vec3 n_ijk = cross(r_ij, r_kj), n_jkl = cross(r_kj, r_kl);
        const float r_kj_n = norm(r_kj), n_ijk_n = norm(n_ijk), n_jkl_n = norm(n_jkl);
        const float sd = dot(r_kj, cross(n_ijk, n_jkl));
        const float sign = sd > 0.f ? 1.f : (sd < 0.f ? -1.f : 0.f);
        const float c =
            std::clamp(dot(n_ijk, n_jkl) / (n_ijk_n * n_jkl_n), -1.0f + 1e-8f, 1.0f - 1e-8f);
        v = sign * std::acos(c);
        if (out) {
            const float a = dot(r_ij, r_kj) / (r_kj_n * r_kj_n);
            const float b = dot(r_kl, r_kj) / (r_kj_n * r_kj_n);
            const float gi = r_kj_n / (n_ijk_n * n_ijk_n), gl = r_kj_n / (n_jkl_n * n_jkl_n);
            g[0] = {n_ijk.x * gi, n_ijk.y * gi, n_ijk.z * gi};
            g[3] = {-n_jkl.x * gl, -n_jkl.y * gl, -n_jkl.z * gl};
            g[1] = {(a - 1) * g[0].x - b * g[3].x, (a - 1) * g[0].y - b * g[3].y,
                    (a - 1) * g[0].z - b * g[3].z};
            g[2] = {(b - 1) * g[3].x - a * g[0].x, (b - 1) * g[3].y - a * g[0].y,
                    (b - 1) * g[3].z - a * g[0].z};
        }
        if (variable == FlatBottomTerms::Variable::AbsDihedral && v < 0.f) {
            v = -v;
            for (Vec3& q : g) q = {-q.x, -q.y, -q.z};
        }
    }
    float energy = 0.f, de = 0.f;
    if (v < lower) {
        energy = lower - v;
        de = -1.f;
    } else if (v > upper) {
        energy = v - upper;
        de = 1.f;
    }
    if (out && de != 0.f)
        for (int k = 0; k < arity; ++k) {
            out[k][0] += scale * de * g[k].x;
            out[k][1] += scale * de * g[k].y;
            out[k][2] += scale * de * g[k].z;
        }
    return energy;
}

}  // namespace

double FlatBottomTerms::evaluate(const float* x, float* grad, float scale) const {
    const int64_t E = size();
    double total = 0.0;
    for (int64_t e = 0; e < E; ++e) {
        const float* p[4] = {};
        float* o[4] = {};
        for (int k = 0; k < arity; ++k) {
            p[k] = x + 3 * index[size_t(k * E + e)];
            if (grad) o[k] = grad + 3 * index[size_t(k * E + e)];
        }
        total += double(flat_bottom_term(variable, arity, p, lower[size_t(e)], upper[size_t(e)],
                                         grad ? o : nullptr, scale));
    }
    return total;
}

PhysicalTerms PhysicalTerms::from(const Features& f) {
    PhysicalTerms p;
    const int64_t A = f.num_atoms();
    // per atom: chain (its token's asym_id; padding: token 0's), real, vdW radius
    const Tensor asym = f.at("asym_id").to_f32();
    const Tensor pad = f.at("atom_pad_mask").to_f32(), elem = f.at("ref_element").to_f32();
    const int64_t n_elem = elem.size(1);
    const std::vector<int64_t> token = atom_tokens(f);
    p.atom_chain.assign(size_t(A), 0);
    p.atom_real.assign(size_t(A), 0);
    p.vdw_radius.assign(size_t(A), 0.f);
    std::vector<float>& vdw = p.vdw_radius;
    // host-side: per-atom tables read once per target from the features
    for (int64_t a = 0; a < A; ++a) {
        p.atom_chain[size_t(a)] = int64_t(std::lrint(asym.f32()[token[size_t(a)]]));
        p.atom_real[size_t(a)] = pad.f32()[a] != 0.f;
        // host-side: (as above) the element one-hot
        for (int64_t k = 1; k < std::min<int64_t>(n_elem, 119); ++k)
            if (elem.f32()[a * n_elem + k] != 0.f) vdw[size_t(a)] = kVdwRadii[k - 1];
    }
    for (int64_t a = 0; a < A; ++a) p.chains = std::max(p.chains, p.atom_chain[size_t(a)] + 1);
    std::vector<int64_t> chain_size(size_t(p.chains), 0);
    for (int64_t a = 0; a < A; ++a)
        if (p.atom_real[size_t(a)]) ++chain_size[size_t(p.atom_chain[size_t(a)])];
    const auto multi = [&](int64_t c) { return chain_size[size_t(c)] > 1; };

    // SymmetricChainCOM: copies' centres of mass at least buffer(t) apart
    {
        int64_t E = 0;
        const std::vector<int64_t> idx = index_rows(f, "symmetric_chain_index", 2, E);
        p.com.variable = FlatBottomTerms::Variable::Distance;
        std::vector<int64_t> a, b;
        for (int64_t e = 0; e < E; ++e)
            if (multi(idx[size_t(e)]) && multi(idx[size_t(E + e)])) {
                a.push_back(idx[size_t(e)]);
                b.push_back(idx[size_t(E + e)]);
            }
        p.com.index = a;
        p.com.index.insert(p.com.index.end(), b.begin(), b.end());
        p.com.lower.assign(a.size(), 0.f);  // the buffer at steering time t, set when evaluated
        p.com.upper.assign(a.size(), kInf);
    }
    // VDWOverlap: atom pairs (i < j) of different, unconnected chains of more than one atom;
    // the pairs (quadratic in the atoms) are enumerated when evaluated
    p.vdw_pair.assign(size_t(p.chains * p.chains), 1);
    for (int64_t c = 0; c < p.chains; ++c) p.vdw_pair[size_t(c * p.chains + c)] = 0;
    {
        int64_t E = 0;
        const std::vector<int64_t> cc = index_rows(f, "connected_chain_index", 2, E);
        for (int64_t e = 0; e < E; ++e) {
            const int64_t x = cc[size_t(e)], y = cc[size_t(E + e)];
            p.vdw_pair[size_t(x * p.chains + y)] = p.vdw_pair[size_t(y * p.chains + x)] = 0;
        }
        for (int64_t c = 0; c < p.chains; ++c)
            if (!multi(c))
                for (int64_t d = 0; d < p.chains; ++d)
                    p.vdw_pair[size_t(c * p.chains + d)] = p.vdw_pair[size_t(d * p.chains + c)] = 0;
    }
    // Connections: covalently connected atoms of different chains within 2 A
    {
        int64_t E = 0;
        p.connections.index = index_rows(f, "connected_atom_index", 2, E);
        p.connections.lower.assign(size_t(E), -kInf);
        p.connections.upper.assign(size_t(E), 2.0f);
    }
    // PoseBusters: RDKit's bounds with buffers, clashes below the vdW cutoff
    {
        int64_t E = 0;
        p.posebusters.index = index_rows(f, "rdkit_bounds_index", 2, E);
        std::vector<float> lo = values(f, "rdkit_lower_bounds"),
                           up = values(f, "rdkit_upper_bounds");
        const std::vector<float> bond = values(f, "rdkit_bounds_bond_mask"),
                                 angle = values(f, "rdkit_bounds_angle_mask");
        constexpr double kBond = 0.125, kAngle = 0.125, kClash = 0.10;
        for (int64_t e = 0; e < E; ++e) {
            const bool bo = bond[size_t(e)] != 0.f, an = angle[size_t(e)] != 0.f;
            float& l = lo[size_t(e)];
            float& u = up[size_t(e)];
            if (bo && !an) {
                l *= float(1.0 - kBond);
                u *= float(1.0 + kBond);
            } else if (!bo && an) {
                l *= float(1.0 - kAngle);
                u *= float(1.0 + kAngle);
            } else if (bo && an) {
                l *= float(1.0 - std::min(kBond, kAngle));
                u *= float(1.0 + std::min(kBond, kAngle));
            } else {
                l *= float(1.0 - kClash);
                u = kInf;
            }
            const float cutoff = 0.35f + (vdw[size_t(p.posebusters.index[size_t(e)])] +
                                          vdw[size_t(p.posebusters.index[size_t(E + e)])]) /
                                             2.0f;
            if (!bo) l = std::max(l, cutoff);
            if (bo) u = std::min(u, cutoff);
        }
        p.posebusters.lower = lo;
        p.posebusters.upper = up;
    }
    constexpr double kChiral = 0.52360, kStereo = 0.52360, kPlanar = 0.26180;
    // ChiralAtom: the signed dihedral beyond +buffer (R) or below -buffer (S)
    p.chiral = oriented_dihedrals(f, "chiral_atom_index", "chiral_atom_orientations",
                                  FlatBottomTerms::Variable::Dihedral, {float(kChiral), kInf},
                                  {-kInf, float(-kChiral)});
    // StereoBond: |dihedral| above pi - buffer (E) or below buffer (Z)
    p.stereo = oriented_dihedrals(f, "stereo_bond_index", "stereo_bond_orientations",
                                  FlatBottomTerms::Variable::AbsDihedral,
                                  {float(M_PI - kStereo), kInf}, {-kInf, float(kStereo)});
    // PlanarBond: per double bond (b0..b5) the impropers (b1, b2, b3, b0) and (b4, b5, b0, b3),
    // interleaved, |dihedral| within buffer
    {
        int64_t E = 0;
        const std::vector<int64_t> idx = index_rows(f, "planar_bond_index", 6, E);
        p.planar.variable = FlatBottomTerms::Variable::AbsDihedral;
        p.planar.arity = 4;
        constexpr int kImproper[2][4] = {{1, 2, 3, 0}, {4, 5, 0, 3}};
        p.planar.index.assign(size_t(4 * 2 * E), 0);
        for (int64_t e = 0; e < E; ++e)
            for (int m = 0; m < 2; ++m)
                for (int k = 0; k < 4; ++k)
                    p.planar.index[size_t(k * 2 * E + e * 2 + m)] =
                        idx[size_t(kImproper[m][k] * E + e)];
        p.planar.lower.assign(size_t(2 * E), -kInf);
        p.planar.upper.assign(size_t(2 * E), float(kPlanar));
    }
    return p;
}

double PhysicalTerms::evaluate(const std::string& potential, const float* x, double t, float* grad,
                               float scale) const {
    if (potential == "com") {
        if (com.size() == 0) return 0.0;
        // the buffer: ExponentialInterpolation(start 1, end 5, alpha -2) at t
        FlatBottomTerms terms = com;
        terms.lower.assign(
            terms.lower.size(),
            float(1.0 + (5.0 - 1.0) * (std::exp(-2.0 * t) - 1.0) / (std::exp(-2.0) - 1.0)));
        const int64_t A = int64_t(atom_chain.size());
        // boltz's scatter mean over real atoms into zeros counts the zero start: sum / (n + 1)
        std::vector<float> centre(size_t(chains * 3), 0.f), count(size_t(chains), 1.f);
        for (int64_t a = 0; a < A; ++a) {
            if (!atom_real[size_t(a)]) continue;
            const int64_t c = atom_chain[size_t(a)];
            for (int k = 0; k < 3; ++k) centre[size_t(c * 3 + k)] += x[a * 3 + k];
            count[size_t(c)] += 1.f;
        }
        for (int64_t c = 0; c < chains; ++c)
            for (int k = 0; k < 3; ++k) centre[size_t(c * 3 + k)] /= count[size_t(c)];
        std::vector<float> g(size_t(chains * 3), 0.f);
        const double e = terms.evaluate(centre.data(), grad ? g.data() : nullptr, scale);
        if (grad)  // every atom (padding: chain 0) takes its chain's centre's gradient
            for (int64_t a = 0; a < A; ++a)
                for (int k = 0; k < 3; ++k)
                    grad[a * 3 + k] += g[size_t(atom_chain[size_t(a)] * 3 + k)];
        return e;
    }
    if (potential == "vdw") {
        // lower bound 0.775 x the vdW radii sum, pairs in the reference's (i < j) order
        const int64_t A = int64_t(atom_chain.size());
        const float keep = float(1.0 - 0.225);
        double total = 0.0;
        for (int64_t i = 0; i < A; ++i) {
            if (!atom_real[size_t(i)]) continue;
            const int64_t ci = atom_chain[size_t(i)];
            for (int64_t j = i + 1; j < A; ++j) {
                if (!atom_real[size_t(j)] || !vdw_pair[size_t(ci * chains + atom_chain[size_t(j)])])
                    continue;
                const float* pts[2] = {x + 3 * i, x + 3 * j};
                float* out[2] = {grad ? grad + 3 * i : nullptr, grad ? grad + 3 * j : nullptr};
                total += double(flat_bottom_term(
                    FlatBottomTerms::Variable::Distance, 2, pts,
                    (vdw_radius[size_t(i)] + vdw_radius[size_t(j)]) * keep, kInf,
                    grad ? out : nullptr, scale));
            }
        }
        return total;
    }
    const FlatBottomTerms* terms = potential == "connections" ? &connections
                                   : potential == "posebusters" ? &posebusters
                                   : potential == "chiral"      ? &chiral
                                   : potential == "stereo"      ? &stereo
                                   : potential == "planar"      ? &planar
                                                                : nullptr;
    BI_CHECK(terms, "boltz2 potentials", "unknown potential '", potential, "'");
    return terms->evaluate(x, grad, scale);
}

}  // namespace bioinfer::boltz2
