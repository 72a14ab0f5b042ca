// The EDM reverse-diffusion sampler: see edm_sampler.h.
#include "nn/edm_sampler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "bioinfer/error.h"
#include "ops/ops.h"

namespace bioinfer::nn {

namespace {

using Mat3 = std::array<std::array<double, 3>, 3>;

// Eigenvectors of a symmetric 3x3 matrix (cyclic Jacobi, double): columns of v, eigenvalues in w,
// sorted by decreasing eigenvalue.
void symmetric_eigen(Mat3 a, Mat3& v, std::array<double, 3>& w) {
    v = Mat3{{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}};
    for (int sweep = 0; sweep < 64; ++sweep) {
        const double off = a[0][1] * a[0][1] + a[0][2] * a[0][2] + a[1][2] * a[1][2];
        const double diag = a[0][0] * a[0][0] + a[1][1] * a[1][1] + a[2][2] * a[2][2];
        if (off <= 1e-30 * diag || off == 0.0) break;
        for (int p = 0; p < 2; ++p)
            for (int q = p + 1; q < 3; ++q) {
                if (a[p][q] == 0.0) continue;
                const double theta = (a[q][q] - a[p][p]) / (2.0 * a[p][q]);
                const double t = (theta >= 0 ? 1.0 : -1.0) /
                                 (std::abs(theta) + std::sqrt(theta * theta + 1.0));
                const double c = 1.0 / std::sqrt(t * t + 1.0), s = t * c;
                for (int k = 0; k < 3; ++k) {  // a <- J^T a J
                    const double akp = a[k][p], akq = a[k][q];
                    a[k][p] = c * akp - s * akq;
                    a[k][q] = s * akp + c * akq;
                }
                for (int k = 0; k < 3; ++k) {
                    const double apk = a[p][k], aqk = a[q][k];
                    a[p][k] = c * apk - s * aqk;
                    a[q][k] = s * apk + c * aqk;
                }
                for (int k = 0; k < 3; ++k) {
                    const double vkp = v[k][p], vkq = v[k][q];
                    v[k][p] = c * vkp - s * vkq;
                    v[k][q] = s * vkp + c * vkq;
                }
            }
    }
    std::array<int, 3> idx{0, 1, 2};
    std::sort(idx.begin(), idx.end(), [&](int i, int j) { return a[i][i] > a[j][j]; });
    Mat3 vs;
    for (int c = 0; c < 3; ++c) {
        w[size_t(c)] = a[size_t(idx[size_t(c)])][size_t(idx[size_t(c)])];
        for (int r = 0; r < 3; ++r) vs[size_t(r)][size_t(c)] = v[size_t(r)][size_t(idx[size_t(c)])];
    }
    v = vs;
}

// The proper rotation R minimising sum |R t_n - p_n|^2 for cov = sum p_n t_n^T: with the SVD
// cov = U S V^T, boltz's R = U diag(1, 1, det(U V^T)) V^T, which equals
// u1 v1^T + u2 v2^T + (u1 x u2)(v1 x v2)^T for the two leading singular pairs (independent of
// the signs any SVD picks).
Mat3 kabsch_rotation(const Mat3& cov) {
    Mat3 m{};
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            for (int k = 0; k < 3; ++k) m[i][j] += cov[k][i] * cov[k][j];
    Mat3 v;
    std::array<double, 3> w;
    symmetric_eigen(m, v, w);
    std::array<std::array<double, 3>, 2> u{}, vv{};
    for (int c = 0; c < 2; ++c) {
        double n = 0;
        for (int r = 0; r < 3; ++r) {
            vv[c][r] = v[r][c];
            for (int k = 0; k < 3; ++k) u[c][r] += cov[r][k] * v[k][c];
            n += u[c][r] * u[c][r];
        }
        n = std::sqrt(n);
        for (int r = 0; r < 3; ++r) u[c][r] = n > 0 ? u[c][r] / n : 0.0;
    }
    const auto cross = [](const std::array<double, 3>& a, const std::array<double, 3>& b) {
        return std::array<double, 3>{a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2],
                                     a[0] * b[1] - a[1] * b[0]};
    };
    const auto u3 = cross(u[0], u[1]), v3 = cross(vv[0], vv[1]);
    Mat3 r{};
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            r[i][j] = u[0][i] * vv[0][j] + u[1][i] * vv[1][j] + u3[i] * v3[j];
    return r;
}

// Per-sample weighted centroids (S, 1, 3) = sum_a w[a] x[s, a] / sum_a w[a].
Tensor centroids(const Tensor& x, const Tensor& w_row, float inv_total) {
    const int64_t S = x.size(0), A = x.size(1);
    const Tensor w = ops::contiguous(w_row.reshape({1, 1, A}).expand({S, 1, A}));
    Tensor c = Tensor::empty({S, 1, 3});
    ops::bmm(w, x, c);
    ops::scale(c, inv_total, c);
    return c;
}

// x (S, A, 3) -= c (S, 1, 3) per sample.
void subtract_rows(Tensor& x, const Tensor& c) {
    Tensor neg = Tensor::empty(c.shape());
    ops::scale(c, -1.0f, neg);
    ops::add_into(neg.expand(x.shape()), x);
}

// Rows of every sample: (S * A) copies of mask (A).
Tensor tile_rows(const Tensor& mask, int64_t S) {
    const int64_t A = mask.numel();
    return ops::contiguous(mask.reshape({1, A}).expand({S, A})).reshape({S * A});
}

}  // namespace

Tensor SeededNormal::normal(const Shape& shape) {
    std::vector<float> v(size_t(shape_numel(shape)));
    for (auto& x : v) x = dist_(gen_);
    return Tensor::of(v, shape);
}

std::vector<int64_t> SeededNormal::multinomial(const std::vector<float>& weights, int64_t groups,
                                               int64_t k, int64_t n) {
    std::vector<int64_t> out;
    for (int64_t g = 0; g < groups; ++g) {
        std::discrete_distribution<int64_t> pick(weights.begin() + g * k,
                                                 weights.begin() + (g + 1) * k);
        for (int64_t i = 0; i < n; ++i) out.push_back(pick(gen_));
    }
    return out;
}

std::vector<int64_t> ReplayNormal::multinomial(const std::vector<float>& weights, int64_t groups,
                                               int64_t k, int64_t n) {
    BI_CHECK(next_pick_ < picks_.size(), "nn::ReplayNormal", "resampling ", next_pick_,
             " asked for, but only ", picks_.size(), " were recorded");
    const Tensor t = picks_[next_pick_++].to_f32();
    BI_CHECK(t.numel() == groups * n, "nn::ReplayNormal", "resampling: expected ", groups * n,
             " draws, recorded ", t.numel());
    weights_.push_back(weights);
    std::vector<int64_t> out;
    // host-side: a handful of recorded indices
    for (int64_t i = 0; i < t.numel(); ++i) {
        out.push_back(int64_t(std::lrint(t.f32()[i])));
        BI_CHECK(out.back() >= 0 && out.back() < k, "nn::ReplayNormal", "resampling index ",
                 out.back(), " outside [0, ", k, ")");
    }
    return out;
}

Tensor ReplayNormal::normal(const Shape& shape) {
    BI_CHECK(next_ < draws_.size(), "nn::ReplayNormal", "draw ", next_, " of shape ",
             shape_str(shape), " asked for, but only ", draws_.size(), " were recorded");
    const Tensor& t = draws_[next_];
    BI_CHECK(t.numel() == shape_numel(shape), "nn::ReplayNormal", "draw ", next_,
             ": expected ", shape_str(shape), ", recorded ", shape_str(t.shape()));
    ++next_;
    return t.reshape(shape).clone();
}

std::vector<float> sample_schedule(const SamplerParams& p) {
    BI_CHECK(p.steps >= 2, "nn::sample_schedule", "expected at least 2 steps, got ", p.steps);
    const double inv_rho = 1.0 / p.rho;
    const float hi = float(std::pow(p.sigma_max, inv_rho));
    const float span = float(std::pow(p.sigma_min, inv_rho) - std::pow(p.sigma_max, inv_rho));
    std::vector<float> s(size_t(p.steps + 1), 0.0f);
    for (int64_t k = 0; k < p.steps; ++k) {
        const float frac = float(k) / float(p.steps - 1);
        s[size_t(k)] = std::pow(hi + frac * span, float(p.rho)) * float(p.sigma_data);
    }
    if (p.sigma_cap > 0) {
        const float cap = float(p.sigma_cap);
        std::vector<float> kept{cap};
        for (float v : s)
            if (v <= cap) kept.push_back(v);
        s = std::move(kept);
    }
    return s;
}

Tensor rotations_from_normal(const Tensor& quat_draws) {
    const int64_t S = quat_draws.numel() / 4;
    const Tensor q = quat_draws.to_f32();
    std::vector<float> out(size_t(S * 9));
    // host-side: S quaternions (4 floats each) to 3x3 matrices, fp32 as boltz's random_rotations
    const float* qv = q.f32();
    for (int64_t i = 0; i < S; ++i) {
        const float* o = qv + 4 * i;
        const float ss = (o[0] * o[0] + o[1] * o[1]) + (o[2] * o[2] + o[3] * o[3]);
        const float norm = std::copysign(std::sqrt(ss), o[0] < 0 ? -1.0f : 1.0f);
        const float r = o[0] / norm, a = o[1] / norm, b = o[2] / norm, c = o[3] / norm;
        const float two_s = 2.0f / ((r * r + a * a) + (b * b + c * c));
        float* m = out.data() + 9 * i;
        m[0] = 1 - two_s * (b * b + c * c);
        m[1] = two_s * (a * b - c * r);
        m[2] = two_s * (a * c + b * r);
        m[3] = two_s * (a * b + c * r);
        m[4] = 1 - two_s * (a * a + c * c);
        m[5] = two_s * (b * c - a * r);
        m[6] = two_s * (a * c - b * r);
        m[7] = two_s * (b * c + a * r);
        m[8] = 1 - two_s * (a * a + b * b);
    }
    return Tensor::of(out, {S, 3, 3});
}

Tensor rigid_align(const Tensor& mobile, const Tensor& target, const Tensor& mask) {
    BI_CHECK(mobile.ndim() == 3 && mobile.size(2) == 3 && target.shape() == mobile.shape() &&
                 mask.numel() == mobile.size(1),
             "nn::rigid_align", "expected mobile and target (S, A, 3) and mask (A), got ",
             shape_str(mobile.shape()), " ", shape_str(target.shape()), " ",
             shape_str(mask.shape()));
    const int64_t S = mobile.size(0), A = mobile.size(1);
    const Tensor m = mask.to_f32().reshape({A});
    double total = 0;
    // host-side: the number of real atoms, from the mask
    for (int64_t a = 0; a < A; ++a) total += m.f32()[a];
    BI_CHECK(total > 0, "nn::rigid_align", "no atom is masked in");
    const float inv = float(1.0 / total);
    Tensor mc = mobile.clone(), tc = target.clone();
    const Tensor mob_c = centroids(mobile, m, inv), tgt_c = centroids(target, m, inv);
    subtract_rows(mc, mob_c);
    subtract_rows(tc, tgt_c);
    // cov[s] (3, 3) = sum_a w_a target_c[a] mobile_c[a]^T
    Tensor wt = Tensor::empty({S * A, 3});
    ops::scale_rows(tc.reshape({S * A, 3}), tile_rows(m, S), wt);
    Tensor cov = Tensor::empty({S, 3, 3});
    ops::bmm(wt.reshape({S, A, 3}), mc, cov, true, false);
    std::vector<float> rot(size_t(S * 9));
    // host-side: one 3x3 Kabsch rotation per sample
    const float* cv = cov.f32();
    for (int64_t s = 0; s < S; ++s) {
        Mat3 c;
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) c[i][j] = cv[s * 9 + i * 3 + j];
        const Mat3 r = kabsch_rotation(c);
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) rot[size_t(s * 9 + i * 3 + j)] = float(r[i][j]);
    }
    // aligned[s, a] = R[s] mobile_c[s, a] + target centroid
    Tensor out = Tensor::empty({S, A, 3});
    ops::bmm(mc, Tensor::of(rot, {S, 3, 3}), out, false, true);
    ops::add_into(tgt_c.expand({S, A, 3}), out);
    return out;
}

namespace {

// rows[i] = t[idx[i]] along dim 0
Tensor gather_rows(const Tensor& t, const std::vector<int64_t>& idx) {
    Shape shape = t.shape();
    shape[0] = int64_t(idx.size());
    Tensor out = Tensor::empty(shape);
    for (size_t i = 0; i < idx.size(); ++i) {
        Tensor dst = out.narrow0(int64_t(i), int64_t(i) + 1);
        ops::copy(t.narrow0(idx[i], idx[i] + 1), dst);
    }
    return out;
}

}  // namespace

Tensor sample(const Denoiser& denoise, const Tensor& atom_mask, const SamplerParams& p,
              NormalSource& rng, const std::function<void(const SamplerStep&)>& on_step,
              const Guidance& guide, const SteeringEnergy& energy_of) {
    int64_t S = p.samples;
    const int64_t A = atom_mask.numel();
    BI_CHECK(S >= 1 && p.max_parallel_samples >= 1, "nn::sample", "expected samples >= 1 and ",
             "max_parallel_samples >= 1, got ", S, " and ", p.max_parallel_samples);
    const int64_t K = p.fk_particles;
    const bool fk = K > 1;
    BI_CHECK(!fk || (S % K == 0 && energy_of && p.fk_interval > 0), "nn::sample", "steering with ",
             K, " particles needs a multiple of them as samples (", S,
             "), an energy and a resampling interval (", p.fk_interval, ")");
    const Tensor mask = atom_mask.to_f32().reshape({A});
    const std::vector<float> sigmas = sample_schedule(p);
    const float gamma0 = float(p.gamma_0);  // boltz's gammas are a float32 tensor
    // centering weights: every atom (boltz's x.mean(dim=-2)), or the masked ones
    Tensor center_w = mask;
    double center_total = double(A);
    if (p.masked_centering) {
        center_total = 0;
        // host-side: the number of real atoms, from the mask
        for (int64_t a = 0; a < A; ++a) center_total += mask.f32()[a];
    } else {
        center_w = Tensor::of(std::vector<float>(size_t(A), 1.0f));
    }

    const int64_t steps = int64_t(sigmas.size()) - 1;
    Tensor x = rng.normal({S, A, 3});
    ops::scale(x, sigmas[0], x);
    // Feynman-Kac state: each particle's energy trajectory and its scaled guidance update
    std::vector<std::vector<double>> traj(static_cast<size_t>(S));
    Tensor sgu = Tensor::zeros({S, A, 3});
    for (int64_t step = 0; step < steps; ++step) {
        const Tensor rot = rotations_from_normal(rng.normal({S, 4}));
        const Tensor tr = rng.normal({S, 1, 3});
        subtract_rows(x, centroids(x, center_w, float(1.0 / center_total)));
        Tensor xr = Tensor::empty({S, A, 3});
        ops::bmm(x, rot, xr);  // x[s, a, :] . R[s]
        ops::add_into(tr.expand({S, A, 3}), xr);
        if (fk) {
            Tensor rs = Tensor::empty({S, A, 3});
            ops::bmm(sgu, rot, rs);
            sgu = rs;
        }

        const double sigma_tm = sigmas[size_t(step)], sigma_t = sigmas[size_t(step + 1)];
        const double gamma = sigmas[size_t(step + 1)] > float(p.gamma_min) ? double(gamma0) : 0.0;
        const double t_hat = sigma_tm * (1.0 + gamma);
        const double noise_var = p.noise_scale * p.noise_scale * (t_hat * t_hat - sigma_tm * sigma_tm);
        Tensor eps = rng.normal({S, A, 3});
        ops::scale(eps, float(std::sqrt(noise_var)), eps);
        Tensor noisy = Tensor::empty({S, A, 3});
        ops::add(xr, eps, noisy);

        Tensor den = Tensor::empty({S, A, 3});
        for (int64_t s0 = 0; s0 < S; s0 += p.max_parallel_samples) {
            const int64_t s1 = std::min(S, s0 + p.max_parallel_samples);
            const Tensor d = denoise(noisy.narrow0(s0, s1).clone(), float(t_hat));
            BI_CHECK(d.shape() == (Shape{s1 - s0, A, 3}), "nn::sample", "denoiser returned ",
                     shape_str(d.shape()), ", expected ", shape_str({s1 - s0, A, 3}));
            Tensor dst = den.narrow0(s0, s1);
            ops::copy(d, dst);
        }
        const bool last = step == steps - 1;
        const bool resample = fk && ((step % p.fk_interval == 0 && noise_var > 0) || last);
        std::vector<float> weights;
        if (resample) {
            // the denoised coordinates' energy (before this step's guidance); log G the energy
            // decrease since the last resampling (minus the energy at the first step)
            const std::vector<double> e = energy_of(step, den);
            BI_CHECK(int64_t(e.size()) == S, "nn::sample", "energy of ", e.size(),
                     " particles, expected ", S);
            std::vector<double> score(static_cast<size_t>(S));
            const Tensor e32 = eps.to_f32(), g32 = sgu.to_f32();
            for (int64_t s = 0; s < S; ++s) {
                auto& tr_s = traj[size_t(s)];
                tr_s.push_back(double(float(e[size_t(s)])));
                const double log_g = step == 0 ? -tr_s.back() : tr_s[tr_s.size() - 2] - tr_s.back();
                double ll = 0;
                if (noise_var > 0) {
                    // host-side: the guided / unguided transition log-likelihood ratio
                    const float* ep = e32.f32() + s * A * 3;
                    const float* gp = g32.f32() + s * A * 3;
                    float acc = 0.f;
                    for (int64_t i = 0; i < A * 3; ++i) {
                        const float moved = ep[i] + gp[i];
                        acc += ep[i] * ep[i] - moved * moved;
                    }
                    ll = double(acc) / (2.0 * noise_var);
                }
                score[size_t(s)] = ll + p.fk_lambda * log_g;
            }
            weights.resize(size_t(S));
            for (int64_t g = 0; g < S / K; ++g) {  // softmax within each group of particles
                double top = -std::numeric_limits<double>::infinity(), z = 0;
                for (int64_t k = 0; k < K; ++k) top = std::max(top, score[size_t(g * K + k)]);
                for (int64_t k = 0; k < K; ++k) z += std::exp(score[size_t(g * K + k)] - top);
                for (int64_t k = 0; k < K; ++k)
                    weights[size_t(g * K + k)] =
                        float(std::exp(score[size_t(g * K + k)] - top) / z);
            }
        }
        // Steering moves the denoised coordinates the step continues from; the record keeps
        // the denoiser's own output.
        Tensor net = den;
        if (!last && (guide || fk)) {
            net = den.clone();
            if (guide) guide(step, den);
            if (fk) {  // scaled_guidance_update = -(den - net) step_scale (sigma_t - t_hat) / t_hat
                Tensor u = den.clone();
                ops::axpy(-1.0f, net, u);
                ops::scale(u, float(-p.step_scale * (sigma_t - t_hat) / t_hat), sgu);
            }
        }
        if (resample) {
            const int64_t G = S / K, n = last ? 1 : K;
            const std::vector<int64_t> pick = rng.multinomial(weights, G, K, n);
            std::vector<int64_t> idx;
            for (int64_t g = 0; g < G; ++g)
                for (int64_t i = 0; i < n; ++i) idx.push_back(g * K + pick[size_t(g * n + i)]);
            noisy = gather_rows(noisy, idx);
            den = gather_rows(den, idx);
            net = gather_rows(net, idx);
            sgu = gather_rows(sgu, idx);
            std::vector<std::vector<double>> kept;
            for (int64_t i : idx) kept.push_back(traj[size_t(i)]);
            traj = std::move(kept);
            S = int64_t(idx.size());
        }
        const Tensor aligned = p.alignment_reverse_diff ? rigid_align(noisy, den, mask) : noisy;
        // next = aligned + step_scale (sigma_t - t_hat) (aligned - den) / t_hat
        Tensor d = aligned.clone();
        ops::axpy(-1.0f, den, d);
        ops::scale(d, float(1.0 / t_hat), d);
        Tensor next = aligned.clone();
        ops::axpy(float(p.step_scale * (sigma_t - t_hat)), d, next);
        if (on_step) on_step({step, float(t_hat), noisy, net, aligned, next});
        x = next;
    }
    return x;
}

}  // namespace bioinfer::nn
