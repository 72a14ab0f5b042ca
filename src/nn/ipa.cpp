// Invariant point attention, one query residue per task: scores over all keys, softmax, then the
// scalar, point and pair outputs.
#include "nn/ipa.h"

#include <algorithm>
#include <cmath>

#include "bioinfer/error.h"
#include "ops/ops.h"

namespace bioinfer::nn {

constexpr int64_t kMaxValuePoints = 64;  // value points per head kept on the stack

InvariantPointAttention InvariantPointAttention::load(const io::ModelDir& m, const std::string& p,
                                                      int64_t c_s, int64_t c_z, int64_t dim,
                                                      int64_t heads, int64_t qk_points,
                                                      int64_t v_points, float eps,
                                                      const InvariantPointAttentionNames& n) {
    BI_CHECK(v_points > 0 && v_points <= kMaxValuePoints, p, "num_v_points ", v_points,
             " outside [1, ", kMaxValuePoints, "]");
    InvariantPointAttention a;
    a.heads = heads;
    a.dim = dim;
    a.qk_points = qk_points;
    a.v_points = v_points;
    a.eps = eps;
    a.q = Linear::load(m, p + "." + n.q, c_s, heads * dim);
    a.kv = Linear::load(m, p + "." + n.kv, c_s, 2 * heads * dim);
    a.q_points = Linear::load(m, p + "." + n.q_points, c_s, heads * qk_points * 3);
    a.kv_points = Linear::load(m, p + "." + n.kv_points, c_s, heads * (qk_points + v_points) * 3);
    a.b = Linear::load(m, p + "." + n.b, c_z, heads);
    a.out = Linear::load(m, p + "." + n.out, heads * (c_z + dim + v_points * 4), c_s);
    const Tensor w = m.get_f32(p + "." + n.head_weights, {heads});
    const float point_scale = std::sqrt(1.0f / (3.0f * (float(qk_points) * 9.0f / 2.0f)));
    for (int64_t h = 0; h < heads; ++h) {
        const float x = w.f32()[h];
        const float softplus = x > 20.0f ? x : std::log1p(std::exp(x));  // torch's threshold
        a.head_weights.push_back(softplus * point_scale);
    }
    return a;
}

namespace {

// Points of every residue in the global frame: raw (L, 3 * H * P) holds x for all H * P points,
// then y, then z (the reference's split); out (L, H * P) points.
std::vector<Vec3> to_global(const Tensor& raw, const std::vector<Rigid>& frames, int64_t hp) {
    const int64_t L = raw.size(0);
    std::vector<Vec3> out(size_t(L * hp));
    for (int64_t i = 0; i < L; ++i) {
        const float* r = raw.f32() + i * 3 * hp;
        for (int64_t k = 0; k < hp; ++k)
            out[size_t(i * hp + k)] = frames[size_t(i)].apply({r[k], r[hp + k], r[2 * hp + k]});
    }
    return out;
}

}  // namespace

void InvariantPointAttention::operator()(const Tensor& s, const Tensor& z,
                                         const std::vector<Rigid>& frames, Tensor& update) const {
    const int64_t L = s.size(0), H = heads, C = dim, Pq = qk_points, Pv = v_points,
                  Pkv = Pq + Pv, Cz = z.size(2);
    BI_CHECK(z.ndim() == 3 && z.size(0) == L && z.size(1) == L && int64_t(frames.size()) == L,
             "ipa", "expected z (", L, ", ", L, ", c_z) and ", L, " frames, got ",
             shape_str(z.shape()), " and ", frames.size());
    Tensor tq = Tensor::empty({L, H * C}), tkv = Tensor::empty({L, 2 * H * C}),
           tqp = Tensor::empty({L, 3 * H * Pq}), tkvp = Tensor::empty({L, 3 * H * Pkv}),
           tb = Tensor::empty({L * L, H});
    q(s, tq);
    kv(s, tkv);
    q_points(s, tqp);
    kv_points(s, tkvp);
    b(z.reshape({L * L, Cz}), tb);
    const std::vector<Vec3> qg = to_global(tqp, frames, H * Pq), kvg = to_global(tkvp, frames, H * Pkv);

    const int64_t F = H * (C + 4 * Pv + Cz);  // output features per residue
    Tensor feats = Tensor::empty({L, F});
    const float scalar_scale = std::sqrt(1.0f / (3.0f * float(C))), bias_scale = std::sqrt(1.0f / 3.0f);
#pragma omp parallel
    {
        std::vector<float> a(static_cast<size_t>(L));
#pragma omp for schedule(dynamic, 4)
        for (int64_t i = 0; i < L; ++i) {
            float* f = feats.f32() + i * F;
            std::fill(f, f + F, 0.0f);
            const Rigid& fr = frames[size_t(i)];
            for (int64_t h = 0; h < H; ++h) {
                const float* qi = tq.f32() + i * H * C + h * C;
                float mx = -INFINITY;
                for (int64_t j = 0; j < L; ++j) {
                    const float* kj = tkv.f32() + j * 2 * H * C + h * 2 * C;
                    float dot = 0.0f;
                    for (int64_t c = 0; c < C; ++c) dot += qi[c] * kj[c];
                    float d2 = 0.0f;
                    for (int64_t p = 0; p < Pq; ++p) {
                        const Vec3& x = qg[size_t(i * H * Pq + h * Pq + p)];
                        const Vec3& y = kvg[size_t(j * H * Pkv + h * Pkv + p)];
                        const float dx = x[0] - y[0], dy = x[1] - y[1], dz = x[2] - y[2];
                        d2 += dx * dx + dy * dy + dz * dz;
                    }
                    a[size_t(j)] = dot * scalar_scale + bias_scale * tb.f32()[(i * L + j) * H + h] +
                                   d2 * head_weights[size_t(h)] * -0.5f;
                    mx = std::max(mx, a[size_t(j)]);
                }
                float sum = 0.0f;
                for (int64_t j = 0; j < L; ++j) sum += a[size_t(j)] = std::exp(a[size_t(j)] - mx);
                const float inv = 1.0f / sum;
                // outputs: scalar values, value points (global), pair features
                float* o = f + h * C;
                float* opair = f + H * (C + 4 * Pv) + h * Cz;
                Vec3 pts[kMaxValuePoints] = {};
                for (int64_t j = 0; j < L; ++j) {
                    const float w = a[size_t(j)] * inv;
                    const float* vj = tkv.f32() + j * 2 * H * C + h * 2 * C + C;
                    for (int64_t c = 0; c < C; ++c) o[c] += w * vj[c];
                    for (int64_t p = 0; p < Pv; ++p) {
                        const Vec3& v = kvg[size_t(j * H * Pkv + h * Pkv + Pq + p)];
                        for (int e = 0; e < 3; ++e) pts[p][size_t(e)] += w * v[size_t(e)];
                    }
                    const float* zij = z.f32() + (i * L + j) * Cz;
                    for (int64_t c = 0; c < Cz; ++c) opair[c] += w * zij[c];
                }
                for (int64_t p = 0; p < Pv; ++p) {
                    const Vec3 local = fr.invert_apply(pts[p]);
                    const int64_t k = h * Pv + p;
                    f[H * C + k] = local[0];
                    f[H * C + H * Pv + k] = local[1];
                    f[H * C + 2 * H * Pv + k] = local[2];
                    f[H * C + 3 * H * Pv + k] =
                        std::sqrt(local[0] * local[0] + local[1] * local[1] + local[2] * local[2] + eps);
                }
            }
        }
    }
    out(feats, update);
}

}  // namespace bioinfer::nn
