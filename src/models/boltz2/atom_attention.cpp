// Boltz-2's atom windows, AtomEncoder, AtomAttentionEncoder and AtomAttentionDecoder: see
// atom_attention.h.
#include "models/boltz2/atom_attention.h"

#include <algorithm>
#include <vector>

#include "bioinfer/error.h"
#include "nn/triangle.h"
#include "ops/ops.h"

namespace bioinfer::boltz2 {
namespace {

constexpr const char* kWhere = "boltz2 atoms";

int64_t rows_of(const Tensor& t) { return t.numel() / t.size(-1); }

Tensor relu(const Tensor& x) {
    Tensor y = Tensor::empty(x.shape());
    ops::activation(x, Act::Relu, y);
    return y;
}

Tensor linear(const nn::Linear& l, const Tensor& x) {
    Tensor y = Tensor::empty({rows_of(x), l.out_features()});
    l(x.reshape({rows_of(x), x.size(-1)}), y);
    return y;
}

Tensor layer_norm(const nn::LayerNorm& ln, const Tensor& x) {
    Tensor y = Tensor::empty(x.shape());
    ln(x, y);
    return y;
}

}  // namespace

// ---- AtomLayout --------------------------------------------------------------------------------

AtomLayout AtomLayout::make(const Features& f, int64_t W, int64_t H) {
    AtomLayout l;
    static_cast<nn::AtomWindows&>(l) = nn::AtomWindows::make(f.num_atoms(), W, H);
    const Tensor& a2t = f.at("atom_to_token");
    l.tokens = f.num_tokens();
    const int64_t A = l.atoms, N = l.tokens;
    BI_CHECK(a2t.shape() == (Shape{A, N}), kWhere, "atom_to_token: expected (", A, ", ", N,
             "), got ", shape_str(a2t.shape()));

    const Tensor a2t_host = a2t.to(kHost).to_f32();
    Tensor atom_token = Tensor::empty({A}, DType::I32);
    Tensor token_mean = Tensor::zeros({N, A});
    std::vector<float> count(size_t(N), 0.0f);
    // host-side: each atom's token from the one-hot rows, and boltz's mean-aggregation weights
    for (int64_t a = 0; a < A; ++a) {
        int32_t tok = -1;
        for (int64_t n = 0; n < N; ++n) {
            const float v = a2t_host.f32()[a * N + n];
            BI_CHECK(v == 0.0f || (v == 1.0f && tok < 0), kWhere,
                     "atom_to_token: expected one-hot rows, got row ", a);
            if (v == 1.0f) tok = int32_t(n);
        }
        // host-side: (the same per-input table)
        atom_token.i32()[a] = tok;
        if (tok >= 0) count[size_t(tok)] += 1.0f;
    }
    // host-side: boltz's mean weights 1 / (count + 1e-6), once per input
    for (int64_t a = 0; a < A; ++a) {
        const int32_t tok = atom_token.i32()[a];
        if (tok >= 0) token_mean.f32()[tok * A + a] = 1.0f / (count[size_t(tok)] + 1e-6f);
    }
    l.atom_token = nn::on_backend(atom_token);
    l.token_mean = nn::on_backend(token_mean);
    l.atom_mask = nn::on_backend(f.at("atom_pad_mask").reshape({A}).to_f32());
    return l;
}

void AtomLayout::add_token_rows(const Tensor& t, Tensor& x) const {
    const int64_t D = x.size(-1), S = rows_of(x) / atoms;
    BI_CHECK(S > 0 && rows_of(x) == S * atoms && rows_of(t) == S * tokens && t.size(-1) == D,
             kWhere, "token rows ", shape_str(t.shape()), " onto atoms ", shape_str(x.shape()),
             ": expected (", S * tokens, ", ", D, ")");
    Tensor xr = x.reshape({S * atoms, D});
    ops::embedding(nn::stacked_rows(atom_token.to(kHost), S, tokens), t.reshape({S * tokens, D}),
                   xr, /*accumulate=*/true);
}

Tensor AtomLayout::token_mean_of(const Tensor& x) const {
    const int64_t D = x.size(-1), S = rows_of(x) / atoms;
    BI_CHECK(S > 0 && rows_of(x) == S * atoms, kWhere, "token mean of ", shape_str(x.shape()),
             ": expected whole samples of ", atoms, " atoms");
    Tensor out = Tensor::empty({S, tokens, D});
    const Tensor m = token_mean.reshape({1, tokens, atoms});
    const Tensor xs = x.reshape({S, atoms, D});
    for (int64_t s = 0; s < S; ++s) {
        Tensor o = out.narrow0(s, s + 1);
        ops::bmm(m, xs.narrow0(s, s + 1), o);
    }
    return out;
}

// ---- AtomEncoder -------------------------------------------------------------------------------

AtomEncoder AtomEncoder::load(const io::ModelDir& m, const std::string& p, const Config& cfg,
                              bool structure_prediction) {
    AtomEncoder e;
    e.structure_prediction = structure_prediction;
    e.atom_s = cfg.atom_s;
    e.atom_z = cfg.atom_z;
    const int64_t S = cfg.atom_s, Z = cfg.atom_z;
    BI_CHECK(cfg.atom_feature_dim == 388, p, "atom features: expected 388 (ref_pos, charge, "
             "element, name chars), got ", cfg.atom_feature_dim);
    e.embed_atom_features = nn::Linear::load(m, p + ".embed_atom_features", 388, S);
    // the three geometry embeddings side by side: one (Z, 5) linear over [d | 1/(1+|d|^2) | v]
    const Tensor wd = m.get_f32(p + ".embed_atompair_ref_pos.weight", {Z, 3});
    const Tensor wr = m.get_f32(p + ".embed_atompair_ref_dist.weight", {Z, 1});
    const Tensor wv = m.get_f32(p + ".embed_atompair_mask.weight", {Z, 1});
    Tensor w5 = Tensor::empty({Z, 5});
    Tensor d0 = w5.slice(1, 0, 3), d1 = w5.slice(1, 3, 4), d2 = w5.slice(1, 4, 5);
    ops::copy(wd, d0);
    ops::copy(wr, d1);
    ops::copy(wv, d2);
    e.embed_pair = nn::Linear::from(w5, Tensor());
    if (structure_prediction) {
        e.s_to_c_ln = nn::LayerNorm::load(m, p + ".s_to_c_trans.0", cfg.token_s, 1e-5f);
        e.s_to_c = nn::Linear::load(m, p + ".s_to_c_trans.1", cfg.token_s, S, false);
        e.z_to_p_ln = nn::LayerNorm::load(m, p + ".z_to_p_trans.0", cfg.token_z, 1e-5f);
        e.z_to_p = nn::Linear::load(m, p + ".z_to_p_trans.1", cfg.token_z, Z, false);
    }
    e.c_to_p_q = nn::Linear::load(m, p + ".c_to_p_trans_q.1", S, Z, false);
    e.c_to_p_k = nn::Linear::load(m, p + ".c_to_p_trans_k.1", S, Z, false);
    for (int i = 0; i < 3; ++i)
        e.p_mlp[i] = nn::Linear::load(m, p + ".p_mlp." + std::to_string(2 * i + 1), Z, Z, false);
    return e;
}

Tensor AtomEncoder::atom_features(const Features& f) {
    const int64_t A = f.num_atoms();
    Tensor feats = Tensor::empty({A, 388});
    const std::pair<const char*, std::pair<int64_t, int64_t>> parts[] = {
        {"ref_pos", {0, 3}}, {"ref_charge", {3, 4}}, {"ref_element", {4, 132}},
        {"ref_atom_name_chars", {132, 388}}};
    for (const auto& [name, cols] : parts) {
        const Tensor& t = f.at(name);
        const int64_t w = cols.second - cols.first;
        BI_CHECK(t.numel() == A * w, kWhere, name, ": expected ", A, " x ", w, " values, got ",
                 shape_str(t.shape()));
        Tensor dst = feats.slice(1, cols.first, cols.second);
        ops::copy(t.reshape({A, w}).to_f32(), dst);
    }
    return feats;
}

Tensor AtomEncoder::pair_geometry(const Features& f, const AtomLayout& lay) {
    const int64_t A = lay.atoms;
    Tensor geom = Tensor::empty({lay.windows, lay.window_q, lay.window_k, 5});
    ops::atom_pair_geometry(f.at("ref_pos").reshape({A, 3}), lay.atom_mask,
                            f.at("ref_space_uid").reshape({A}).to_f32(), lay.key_atom, geom);
    return geom;
}

AtomEncoderOut AtomEncoder::forward(const Features& f, const AtomLayout& lay,
                                    const Tensor* s_trunk, const Tensor* z) const {
    return forward(atom_features(f), pair_geometry(f, lay), lay, s_trunk, z);
}

AtomEncoderOut AtomEncoder::forward(const Tensor& atom_feats, const Tensor& geometry,
                                    const AtomLayout& lay, const Tensor* s_trunk,
                                    const Tensor* z) const {
    const int64_t N = lay.tokens, K = lay.windows, W = lay.window_q, H = lay.window_k,
                  Z = atom_z, M = K * W * H;
    BI_CHECK(!structure_prediction || (s_trunk && z), kWhere,
             "the structure-prediction atom encoder needs s_trunk and z");
    AtomEncoderOut out;
    out.c = linear(embed_atom_features, atom_feats);  // (A, atom_s)
    out.q = out.c.clone();

    // p = (W_d d + W_r / (1 + |d|^2) + W_v v) * v over every (window, query, key)
    const Tensor g = geometry.reshape({M, 5});
    Tensor p = linear(embed_pair, g);  // (M, Z)
    const Tensor v = ops::contiguous(g.slice(1, 4, 5)).reshape({M});
    ops::scale_rows(p, v, p);

    if (structure_prediction) {
        // c += s_to_c(LN(s_trunk)) at each atom's token
        const Tensor s2c = linear(s_to_c, layer_norm(s_to_c_ln, s_trunk->reshape({N, s_trunk->size(-1)})));
        lay.add_token_rows(s2c, out.c);
        // p += z_to_p(LN(z))[token(query), token(key)]; nothing where either is absent
        // z2p (N * N, Z) = z_to_p(LN(z)), a block of pair rows at a time (no LN(z) copy)
        const int64_t Cz = z->size(-1);
        const Tensor zf = z->reshape({N * N, Cz});
        Tensor z2p = Tensor::empty({N * N, Z});
        const int64_t rows = N * nn::default_pair_chunk(N, Cz);
        for (int64_t r0 = 0; r0 < N * N; r0 += rows) {
            const int64_t r1 = std::min(N * N, r0 + rows);
            Tensor zn = Tensor::empty({r1 - r0, Cz}), dst = z2p.narrow0(r0, r1);
            z_to_p_ln(zf.narrow0(r0, r1), zn);
            z_to_p(zn, dst);
        }
        const Tensor tok = lay.atom_token.to(kHost), keys = lay.key_atom.to(kHost);
        Tensor idx = Tensor::empty({M}, DType::I32);
        // host-side: the pair index of every (window, query, key), made once per input
        for (int64_t k = 0; k < K; ++k)
            for (int64_t w = 0; w < W; ++w) {
                const int32_t tq = tok.i32()[k * W + w];
                for (int64_t h = 0; h < H; ++h) {
                    const int32_t ka = keys.i32()[k * H + h];
                    const int32_t tk = ka < 0 ? -1 : tok.i32()[ka];
                    // host-side: (the same per-input pair index)
                    idx.i32()[(k * W + w) * H + h] = tq < 0 || tk < 0 ? -1 : int32_t(tq * N + tk);
                }
            }
        ops::embedding(nn::on_backend(idx), z2p, p, /*accumulate=*/true);
    }

    // p += c_to_p_q(relu(c)) over the keys, + c_to_p_k(relu(c)) of each key over the queries
    const Tensor rc = relu(out.c);
    const Tensor cq = linear(c_to_p_q, rc);  // (A, Z)
    Tensor p3 = p.reshape({K * W, H, Z});
    ops::add_into(cq.reshape({K * W, 1, Z}).expand({K * W, H, Z}), p3);
    // relu and the bias-free linear give 0 for an absent (zero) key, as boltz's
    // c_to_p_trans_k(to_keys(c)) does
    const Tensor ck = lay.keys(linear(c_to_p_k, rc));  // (1, K, H, Z)
    Tensor p4 = p.reshape({K, W, H, Z});
    ops::add_into(ck.reshape({K, 1, H, Z}).expand({K, W, H, Z}), p4);

    // p += p_mlp(p)
    Tensor h = relu(p), h2 = Tensor::empty({M, Z});
    p_mlp[0](h, h2);
    ops::activation(h2, Act::Relu, h2);
    p_mlp[1](h2, h);
    ops::activation(h, Act::Relu, h);
    p_mlp[2](h, p, {.accumulate = true});
    out.p = p.reshape({K, W, H, Z});
    return out;
}

// ---- pair bias projections ---------------------------------------------------------------------

PairBiasProjection PairBiasProjection::load(const io::ModelDir& m, const std::string& p,
                                            int64_t dim, int64_t layers, int64_t heads) {
    PairBiasProjection b;
    if (layers == 0) {
        b.ln.push_back(nn::LayerNorm::load(m, p + ".0", dim, 1e-5f));
        b.proj.push_back(nn::Linear::load(m, p + ".1", dim, heads, false));
        return b;
    }
    for (int64_t l = 0; l < layers; ++l) {
        const std::string q = p + "." + std::to_string(l);
        b.ln.push_back(nn::LayerNorm::load(m, q + ".0", dim, 1e-5f));
        b.proj.push_back(nn::Linear::load(m, q + ".1", dim, heads, false));
    }
    return b;
}

int64_t PairBiasProjection::channels() const {
    int64_t c = 0;
    for (const auto& l : proj) c += l.out_features();
    return c;
}

Tensor PairBiasProjection::operator()(const Tensor& x) const {
    const int64_t R = rows_of(x), C = channels();
    const Tensor xr = x.reshape({R, x.size(-1)});
    Tensor out = Tensor::empty({R, C}), xn = Tensor::empty(xr.shape());
    int64_t c0 = 0;
    for (size_t l = 0; l < proj.size(); ++l) {
        const int64_t c = proj[l].out_features();
        ln[l](xr, xn);
        if (proj.size() == 1) {
            proj[l](xn, out);
        } else {
            Tensor part = Tensor::empty({R, c});
            proj[l](xn, part);
            Tensor dst = out.slice(1, c0, c0 + c);
            ops::copy(part, dst);
        }
        c0 += c;
    }
    Shape s = x.shape();
    s.back() = C;
    return out.reshape(s);
}

// ---- AtomAttentionEncoder ----------------------------------------------------------------------

AtomAttentionEncoder AtomAttentionEncoder::load(const io::ModelDir& m, const std::string& p,
                                                const Config& cfg, bool structure_prediction,
                                                int64_t depth, int64_t heads) {
    AtomAttentionEncoder e;
    e.structure_prediction = structure_prediction;
    if (structure_prediction) e.r_to_q = nn::Linear::load(m, p + ".r_to_q_trans", 3, cfg.atom_s, false);
    e.transformer = nn::AtomTransformer::load(m, p + ".atom_encoder", cfg.atom_s, depth, heads,
                                              cfg.window_queries, cfg.window_keys);
    e.to_token = nn::Linear::load(m, p + ".atom_to_token_trans.0", cfg.atom_s,
                                  structure_prediction ? 2 * cfg.token_s : cfg.token_s, false);
    return e;
}

nn::DitBias AtomAttentionEncoder::prepare(const Tensor& bias, const AtomLayout& lay) const {
    return transformer.prepare(bias, lay.atom_mask, lay);
}

Tensor AtomAttentionEncoder::forward(const AtomLayout& lay, const Tensor& q, const Tensor& c,
                                     const nn::DitBias& bias) const {
    const Tensor qo = transformer.forward(q, c, bias);
    Tensor qa = linear(to_token, qo);
    ops::activation(qa, Act::Relu, qa);
    const Tensor a = lay.token_mean_of(qa);  // (1, N, token_s)
    return a.reshape({lay.tokens, a.size(-1)});
}

AtomAttentionOut AtomAttentionEncoder::forward(const AtomLayout& lay, const Tensor& q,
                                               const Tensor& c, const nn::DitBias& bias,
                                               const Tensor& r_noisy) const {
    BI_CHECK(structure_prediction, kWhere, "r_noisy given to the input embedder's atom encoder");
    const int64_t A = lay.atoms, D = q.size(-1), S = rows_of(r_noisy) / A;
    BI_CHECK(S > 0 && r_noisy.numel() == S * A * 3, kWhere, "r_noisy: expected (S, ", A,
             ", 3), got ", shape_str(r_noisy.shape()));
    // q per sample: q + r_to_q(r)
    Tensor qs = Tensor::empty({S * A, D});
    Tensor qs3 = qs.reshape({S, A, D});
    ops::copy(q.reshape({1, A, D}).expand({S, A, D}), qs3);
    r_to_q(r_noisy.reshape({S * A, 3}), qs, {.accumulate = true});
    AtomAttentionOut out;
    const Tensor qo = transformer.forward(qs, c, bias);
    Tensor qa = linear(to_token, qo);
    ops::activation(qa, Act::Relu, qa);
    out.a = lay.token_mean_of(qa);
    out.q_skip = qo.reshape({S, A, D});
    out.c_skip = c;
    return out;
}

// ---- AtomAttentionDecoder ----------------------------------------------------------------------

AtomAttentionDecoder AtomAttentionDecoder::load(const io::ModelDir& m, const std::string& p,
                                                const Config& cfg) {
    AtomAttentionDecoder d;
    d.a_to_q = nn::Linear::load(m, p + ".a_to_q_trans", 2 * cfg.token_s, cfg.atom_s, false);
    d.transformer = nn::AtomTransformer::load(m, p + ".atom_decoder", cfg.atom_s,
                                              cfg.atom_decoder_depth, cfg.atom_decoder_heads,
                                              cfg.window_queries, cfg.window_keys);
    d.out_ln = nn::LayerNorm::load(m, p + ".atom_feat_to_atom_pos_update.0", cfg.atom_s, 1e-5f);
    d.out = nn::Linear::load(m, p + ".atom_feat_to_atom_pos_update.1", cfg.atom_s, 3, false);
    return d;
}

nn::DitBias AtomAttentionDecoder::prepare(const Tensor& bias, const AtomLayout& lay) const {
    return transformer.prepare(bias, lay.atom_mask, lay);
}

Tensor AtomAttentionDecoder::forward(const AtomLayout& lay, const Tensor& a, const Tensor& q_skip,
                                     const Tensor& c_skip, const nn::DitBias& bias) const {
    const int64_t A = lay.atoms, N = lay.tokens, D = q_skip.size(-1), S = rows_of(q_skip) / A;
    BI_CHECK(S > 0 && rows_of(q_skip) == S * A && rows_of(a) == S * N, kWhere,
             "decoder: expected a (S, ", N, ", C) and q_skip (S, ", A, ", D) of one S, got ",
             shape_str(a.shape()), " and ", shape_str(q_skip.shape()));
    Tensor q = q_skip.is_contiguous() ? q_skip.reshape({S * A, D}).clone()
                                      : ops::contiguous(q_skip).reshape({S * A, D});
    lay.add_token_rows(linear(a_to_q, a), q);  // q_skip + a_to_q(a) at each atom's token
    const Tensor qo = transformer.forward(q, c_skip, bias);
    Tensor r = linear(out, layer_norm(out_ln, qo));
    return r.reshape({S, A, 3});
}

}  // namespace bioinfer::boltz2
