// Invariant point attention: the projections, then the attention core as one op (ops::ipa).
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
    // host-side: one weight per head, once at load
    std::vector<float> hw(static_cast<size_t>(heads));
    for (int64_t h = 0; h < heads; ++h) {
        const float x = w.f32()[h];
        const float softplus = x > 20.0f ? x : std::log1p(std::exp(x));  // torch's threshold
        hw[size_t(h)] = softplus * point_scale;
    }
    a.head_weights = Tensor::of(hw);
    return a;
}

void InvariantPointAttention::operator()(const Tensor& s, const Tensor& z, const Tensor& frames,
                                         Tensor& update) const {
    const int64_t L = s.size(0), H = heads, C = dim, Pq = qk_points, Pv = v_points,
                  Pkv = Pq + Pv, Cz = z.size(2);
    BI_CHECK(z.ndim() == 3 && z.size(0) == L && z.size(1) == L && frames.numel() == L * 7,
             "ipa", "expected z (", L, ", ", L, ", c_z) and ", L, " frames, got ",
             shape_str(z.shape()), " and ", shape_str(frames.shape()));
    Tensor tq = Tensor::empty({L, H * C}), tkv = Tensor::empty({L, 2 * H * C}),
           tqp = Tensor::empty({L, 3 * H * Pq}), tkvp = Tensor::empty({L, 3 * H * Pkv}),
           tb = Tensor::empty({L * L, H});
    q(s, tq);
    kv(s, tkv);
    q_points(s, tqp);
    kv_points(s, tkvp);
    b(z.reshape({L * L, Cz}), tb);
    Tensor feats = Tensor::empty({L, H * (C + 4 * Pv + Cz)});
    ops::ipa({&tq, &tkv, &tqp, &tkvp, &tb, &z, &frames, &head_weights, H, Pq, Pv, eps}, feats);
    out(feats, update);
}

}  // namespace bioinfer::nn
