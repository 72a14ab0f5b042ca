// The MSA-side blocks shared by Boltz-2 and ESMFold2: see msa_blocks.h.
#include "nn/msa_blocks.h"

#include <algorithm>

#include "nn/triangle.h"
#include "ops/ops.h"

namespace bioinfer::nn {

PairWeightedAveragingNames PairWeightedAveragingNames::esmfold2() {
    PairWeightedAveragingNames n;
    n.norm_m = "norm_single", n.norm_z = "bias_norm";
    n.proj_m = "v_proj", n.proj_g = "gate_proj", n.proj_z = "bias_proj", n.proj_o = "o_proj";
    return n;
}

PairWeightedAveraging PairWeightedAveraging::load(const io::ModelDir& m, const std::string& p,
                                                  int64_t c_m, int64_t c_z, int64_t head_dim,
                                                  int64_t heads,
                                                  const PairWeightedAveragingNames& n) {
    PairWeightedAveraging a;
    a.heads = heads;
    a.head_dim = head_dim;
    a.norm_m = LayerNorm::load(m, p + "." + n.norm_m, c_m, 1e-5f);
    a.norm_z = LayerNorm::load(m, p + "." + n.norm_z, c_z, 1e-5f);
    a.proj_m = Linear::load(m, p + "." + n.proj_m, c_m, heads * head_dim, false);
    a.proj_g = Linear::load(m, p + "." + n.proj_g, c_m, heads * head_dim, false);
    a.proj_z = Linear::load(m, p + "." + n.proj_z, c_z, heads, false);
    a.proj_o = Linear::load(m, p + "." + n.proj_o, heads * head_dim, c_m, false);
    return a;
}

void PairWeightedAveraging::add_to(Tensor& m, const Tensor& z) const {
    const int64_t S = m.size(0), L = m.size(1), Cm = m.size(2), H = heads, D = head_dim;
    // w (H, L, L) = softmax over j of proj_z(LN(z))[i, j, h]
    Tensor w = pair_bias(z, norm_z, proj_z, 0, false);
    Tensor w2 = w.reshape({H * L, L});
    ops::softmax(w2, nullptr, nullptr);
    // MSA rows a chunk at a time: about 64 MiB of (rows, L, H * D) temporaries each
    const int64_t chunk =
        std::clamp<int64_t>((int64_t(64) << 20) / std::max<int64_t>(1, L * H * D * 4 * 4), 1, S);
    for (int64_t s0 = 0; s0 < S; s0 += chunk) {
        const int64_t s1 = std::min(S, s0 + chunk), ns = s1 - s0, n = ns * L;
        Tensor mr = m.narrow0(s0, s1).reshape({n, Cm});
        Tensor mn = Tensor::empty({n, Cm}), v = Tensor::empty({n, H * D}),
               g = Tensor::empty({n, H * D});
        norm_m(mr, mn);
        proj_m(mn, v);
        proj_g(mn, g, {.act = Act::Sigmoid});
        // v (ns, L, H, D) -> head-major (H, L, ns * D) so o_h = w_h . v_h is one batched GEMM
        Tensor vh = Tensor::empty({H, L, ns, D});
        ops::copy(v.reshape({ns, L, H, D}).permute({2, 1, 0, 3}), vh);
        Tensor oh = Tensor::empty({H, L, ns * D});
        ops::bmm(w, vh.reshape({H, L, ns * D}), oh);
        Tensor o = Tensor::empty({ns, L, H, D});
        ops::copy(oh.reshape({H, L, ns, D}).permute({2, 1, 0, 3}), o);
        Tensor o2 = o.reshape({n, H * D});
        ops::mul(o2, g, o2);
        proj_o(o2, mr, {.accumulate = true});
    }
}

OuterProductMeanNames OuterProductMeanNames::esmfold2() {
    OuterProductMeanNames n;
    n.proj_ab = "input_proj", n.proj_o = "output_proj";
    n.divide_before_projection = false;
    return n;
}

OuterProductMean OuterProductMean::load(const io::ModelDir& m, const std::string& p, int64_t c_m,
                                        int64_t c_z, int64_t hidden,
                                        const OuterProductMeanNames& n) {
    OuterProductMean o;
    o.hidden = hidden;
    o.divide_before_projection = n.divide_before_projection;
    o.norm = LayerNorm::load(m, p + "." + n.norm, c_m, 1e-5f);
    if (!n.proj_ab.empty()) {
        const Tensor ab = m.get_f32(p + "." + n.proj_ab + ".weight", {2 * hidden, c_m});
        o.proj_a = Linear::from_rows(ab, 0, hidden);
        o.proj_b = Linear::from_rows(ab, hidden, 2 * hidden);
    } else {
        o.proj_a = Linear::load(m, p + "." + n.proj_a, c_m, hidden, false);
        o.proj_b = Linear::load(m, p + "." + n.proj_b, c_m, hidden, false);
    }
    o.proj_o = Linear::load(m, p + "." + n.proj_o, hidden * hidden, c_z);
    return o;
}

void OuterProductMean::add_to(const Tensor& m, Tensor& z, int64_t chunk) const {
    const int64_t S = m.size(0), L = m.size(1), Cm = m.size(2), H = hidden, C = z.size(2);
    Tensor mn = Tensor::empty({S * L, Cm}), a = Tensor::empty({S, L * H}),
           b = Tensor::empty({S, L * H});
    norm(m.reshape({S * L, Cm}), mn);
    Tensor a2 = a.reshape({S * L, H}), b2 = b.reshape({S * L, H});
    proj_a(mn, a2);
    proj_b(mn, b2);
    const float inv_count = 1.0f / float(S);  // msa_mask all ones: every row counts
    // pair rows i a chunk at a time: (rows * H, L * H) products, about 64 MiB by default
    if (chunk <= 0)
        chunk = std::max<int64_t>(1, (int64_t(64) << 20) / std::max<int64_t>(1, L * H * H * 4 * 3));
    chunk = std::min(chunk, L);
    for (int64_t r0 = 0; r0 < L; r0 += chunk) {
        const int64_t r1 = std::min(L, r0 + chunk), r = r1 - r0, n = r * L;
        Tensor ac = Tensor::empty({1, S, r * H});
        Tensor ac2 = ac.reshape({S, r * H});
        ops::copy(a.slice(1, r0 * H, r1 * H), ac2);
        // p[(i, c), (j, d)] = sum_s a[s, i, c] b[s, j, d]
        Tensor p = Tensor::empty({1, r * H, L * H});
        ops::bmm(ac, b.reshape({1, S, L * H}), p, /*trans_a=*/true);
        Tensor x = Tensor::empty({r, L, H, H});  // [(i, j), (c, d)]
        ops::copy(p.reshape({r, H, L, H}).permute({0, 2, 1, 3}), x);
        Tensor x2 = x.reshape({n, H * H});
        Tensor zr = z.narrow0(r0, r1).reshape({n, C});
        if (divide_before_projection) {
            ops::scale(x2, inv_count, x2);
            proj_o(x2, zr, {.accumulate = true});
        } else {
            Tensor y = Tensor::empty({n, C});
            proj_o(x2, y);
            ops::scale(y, inv_count, y);
            ops::add_into(y, zr);
        }
    }
}

}  // namespace bioinfer::nn
