// The pairformer's pair updates, full layers and stacks: see pairformer.h.
#include "nn/pairformer.h"

#include "bioinfer/error.h"
#include "ops/ops.h"

namespace bioinfer::nn {

PairformerNames PairformerNames::boltz2() {
    PairformerNames n;
    n.tri_mul = TriangleMultiplicationNames::boltz2();
    n.tri_att = TriangleAttentionNames::boltz2();
    n.transition_names = ResidueMlpNames::boltz2();
    return n;
}

PairformerNames PairformerNames::esmfold2() {
    PairformerNames n;
    n.tri_att_start.clear();
    n.tri_att_end.clear();
    n.transition = "pair_transition";
    n.tri_mul = TriangleMultiplicationNames::esmfold2();
    n.transition_names = ResidueMlpNames::esmfold2();
    return n;
}

PairformerNoSeqLayer PairformerNoSeqLayer::load(const io::ModelDir& m, const std::string& p,
                                                int64_t c_z, int64_t transition,
                                                const PairformerNames& n, int64_t tri_head_dim,
                                                int64_t tri_heads) {
    PairformerNoSeqLayer l;
    l.tri_mul_out = TriangleMultiplication::load(m, p + "." + n.tri_mul_out, c_z, true, n.tri_mul);
    l.tri_mul_in = TriangleMultiplication::load(m, p + "." + n.tri_mul_in, c_z, false, n.tri_mul);
    BI_CHECK(n.tri_att_start.empty() == n.tri_att_end.empty(), p,
             "triangle attention around one node only is not supported");
    BI_CHECK(n.tri_att_start.empty() || (tri_head_dim > 0 && tri_heads > 0), p,
             "triangle attention needs its head width and heads, got ", tri_head_dim, " and ",
             tri_heads);
    if (!n.tri_att_start.empty()) {
        l.tri_att_start = TriangleAttention::load(m, p + "." + n.tri_att_start, c_z, tri_head_dim,
                                                  tri_heads, true, n.tri_att);
        l.tri_att_end = TriangleAttention::load(m, p + "." + n.tri_att_end, c_z, tri_head_dim,
                                                tri_heads, false, n.tri_att);
    }
    l.transition_z =
        ResidueMlp::load(m, p + "." + n.transition, c_z, transition, n.transition_names);
    return l;
}

void PairformerNoSeqLayer::run(Tensor& z, const Tensor* pair_mask) const {
    const int64_t L = z.size(0), C = z.size(2);
    tri_mul_out.add_to(z, 0, pair_mask);
    tri_mul_in.add_to(z, 0, pair_mask);
    if (has_triangle_attention()) {
        tri_att_start.add_to(z, 0, pair_mask);
        tri_att_end.add_to(z, 0, pair_mask);
    }
    Tensor rows = z.reshape({L * L, C});
    transition_z.add_to(rows);
}

PairformerNoSeqStack PairformerNoSeqStack::load(const io::ModelDir& m, const std::string& p,
                                                int64_t blocks, int64_t c_z, int64_t transition,
                                                const PairformerNames& names,
                                                int64_t tri_head_dim, int64_t tri_heads) {
    PairformerNoSeqStack s;
    for (int64_t i = 0; i < blocks; ++i)
        s.layers.push_back(PairformerNoSeqLayer::load(m, p + ".layers." + std::to_string(i), c_z,
                                                      transition, names, tri_head_dim, tri_heads));
    return s;
}

void PairformerNoSeqStack::run(Tensor& z) const {
    for (const PairformerNoSeqLayer& l : layers) l.run(z);
}

PairformerLayer PairformerLayer::load(const io::ModelDir& m, const std::string& p, int64_t c_s,
                                      int64_t c_z, int64_t heads, int64_t tri_head_dim,
                                      int64_t tri_heads) {
    BI_CHECK(heads > 0 && c_s % heads == 0, p, "token_s ", c_s, " is not a multiple of the ",
             heads, " heads");
    PairformerLayer l;
    l.pair = PairformerNoSeqLayer::load(m, p, c_z, 4 * c_z, PairformerNames::boltz2(),
                                        tri_head_dim, tri_heads);
    l.pre_norm_s = LayerNorm::load(m, p + ".pre_norm_s", c_s, 1e-5f);
    l.bias_norm = LayerNorm::load(m, p + ".attention.proj_z.0", c_z, 1e-5f);
    l.bias_proj = Linear::load(m, p + ".attention.proj_z.1", c_z, heads, false);
    l.attention = GatedBiasedAttention::load(m, p + ".attention", c_s, c_s / heads,
                                             GatedBiasedAttentionNames::boltz2());
    l.transition_s =
        ResidueMlp::load(m, p + ".transition_s", c_s, 4 * c_s, ResidueMlpNames::boltz2());
    BI_CHECK(!m.has(p + ".s_post_norm.weight"), p, "post_layer_norm is not supported");
    return l;
}

Tensor PairformerLayer::attention_update(const Tensor& s_normed, const Tensor& z) const {
    const Tensor bias = pair_bias(z, bias_norm, bias_proj, 0, false);  // (H, L, L)
    Tensor out = Tensor::zeros(s_normed.shape());
    attention.add_to(s_normed, bias, out);
    return out;
}

void PairformerLayer::run(Tensor& s, Tensor& z) const {
    pair.run(z);
    Tensor sn = Tensor::empty(s.shape());
    pre_norm_s(s, sn);
    const Tensor bias = pair_bias(z, bias_norm, bias_proj, 0, false);  // (H, L, L)
    attention.add_to(sn, bias, s);
    transition_s.add_to(s);
}

PairformerStack PairformerStack::load(const io::ModelDir& m, const std::string& p, int64_t blocks,
                                      int64_t c_s, int64_t c_z, int64_t heads,
                                      int64_t tri_head_dim, int64_t tri_heads) {
    PairformerStack st;
    for (int64_t k = 0; k < blocks; ++k)
        st.layers.push_back(PairformerLayer::load(m, p + ".layers." + std::to_string(k), c_s, c_z,
                                                  heads, tri_head_dim, tri_heads));
    return st;
}

void PairformerStack::run(Tensor& s, Tensor& z,
                          const std::function<void(const std::string&, const Tensor&)>& tap,
                          const std::string& pre) const {
    for (size_t k = 0; k < layers.size(); ++k) {
        layers[k].run(s, z);
        if (tap) {
            tap(pre + "block" + std::to_string(k) + ".s", s);
            tap(pre + "block" + std::to_string(k) + ".z", z);
        }
    }
}

}  // namespace bioinfer::nn
