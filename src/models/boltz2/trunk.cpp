// Boltz-2's trunk: pair input embedding, MSA module, pairformer, recycling and heads (trunk.h).
#include "models/boltz2/trunk.h"

#include <algorithm>
#include <cmath>

#include "bioinfer/error.h"
#include "models/boltz2/numpy_rng.h"
#include "ops/ops.h"

namespace bioinfer::boltz2 {
namespace {

constexpr int64_t kNumTokens = 33;  // boltz's const.num_tokens (the MSA one-hot width)

// The smallest element of t (through ops: the largest of -t).
float min_value(const Tensor& t) {
    Tensor neg = Tensor::empty(t.shape());
    ops::scale(t, -1.0f, neg);
    return -ops::max_value(neg);
}

// One target, no padding: the masks this port assumes are all ones.
void check_all_ones(const Features& f, const char* name, const char* where) {
    if (!f.has(name)) return;
    const Tensor& t = f.at(name);
    BI_CHECK(t.numel() == 0 || (min_value(t) == 1.0f && ops::max_value(t) == 1.0f), where,
             name, ": expected all ones (one target without padding)");
}

// An integer-valued F32 feature as I32 ids.
Tensor ids_of(const Tensor& t) {
    const int64_t n = t.numel();
    std::vector<int32_t> ids(static_cast<size_t>(n));
    // host-side: integer features (token / MSA / bond classes) read once per input
    const float* p = t.f32();
    for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = int32_t(std::lrint(p[i]));
    return Tensor::of(ids);
}

// z (L, L, C) = a (L, C) broadcast over columns + b (L, C) broadcast over rows: a_i + b_j.
void outer_sum(const Tensor& a, const Tensor& b, Tensor& z) {
    const int64_t L = a.size(0), C = a.size(1);
    ops::copy(a.reshape({L, 1, C}).expand({L, L, C}), z);
    ops::add_into(b.reshape({1, L, C}).expand({L, L, C}), z);
}

Tensor linear_out(const nn::Linear& lin, const Tensor& x) {
    Tensor y = Tensor::empty({x.size(0), lin.out_features()});
    lin(x, y);
    return y;
}

}  // namespace

nn::ChainRelativePosition::Tokens relpos_tokens(const Features& f) {
    nn::ChainRelativePosition::Tokens t;
    t.asym_id = f.at("asym_id");
    t.residue_index = f.at("residue_index");
    t.entity_id = f.at("entity_id");
    t.token_index = f.at("token_index");
    t.sym_id = f.at("sym_id");
    if (f.has("cyclic_period")) t.cyclic_period = f.at("cyclic_period");
    return t;
}

// ---- contact conditioning and the pair input terms ------------------------------------------

ContactConditioning ContactConditioning::load(const io::ModelDir& m, const std::string& p,
                                              int64_t c, const Config& cfg) {
    ContactConditioning cc;
    cc.fourier_w = m.get_f32(p + ".fourier_embedding.proj.weight", {c, 1}).reshape({c});
    cc.fourier_b = m.get_f32(p + ".fourier_embedding.proj.bias", {c});
    cc.encoder = nn::Linear::load(m, p + ".encoder", c + 4, c);
    cc.special = Tensor::empty({2, c});
    Tensor row0 = cc.special.narrow0(0, 1).reshape({c}), row1 = cc.special.narrow0(1, 2).reshape({c});
    ops::copy(m.get_f32(p + ".encoding_unspecified", {c}), row0);
    ops::copy(m.get_f32(p + ".encoding_unselected", {c}), row1);
    cc.cutoff_min = float(cfg.conditioning_cutoff_min);
    cc.cutoff_max = float(cfg.conditioning_cutoff_max);
    return cc;
}

Tensor ContactConditioning::operator()(const Features& f) const {
    const Tensor& cc = f.at("contact_conditioning");  // (L, L, 5)
    const Tensor& thr = f.at("contact_threshold");    // (L, L)
    const int64_t L = cc.size(0), C = special.size(1), P = L * L;
    BI_CHECK(cc.ndim() == 3 && cc.size(1) == L && cc.size(2) == 5 && thr.numel() == P,
             "contact_conditioning", "expected (L, L, 5) classes and (L, L) thresholds, got ",
             shape_str(cc.shape()), " and ", shape_str(thr.shape()));
    // The reference computes enc * (1 - c0 - c1) + unspecified * c0 + unselected * c1 for the
    // one-hot class c: an UNSPECIFIED (UNSELECTED) pair is exactly that vector, any other pair is
    // exactly enc. So each pair picks a row of [unspecified; unselected; enc(pairs specified)],
    // and the encoder runs only on the pairs that carry a constraint (none without constraints).
    std::vector<int32_t> row(static_cast<size_t>(P));
    std::vector<float> x;  // (specified pairs, C + 4) encoder inputs
    int64_t n = 0;
    {
        // host-side: the per-pair constraint classes and thresholds are input features (one-hot,
        // read once per input); only constrained pairs get an encoder row
        const float* c5 = cc.f32();
        const float* t = thr.f32();
        const float* w = fourier_w.f32();
        const float* b = fourier_b.f32();
        const float two_pi = float(2.0 * M_PI);
        for (int64_t p = 0; p < P; ++p) {
            const float c0 = c5[p * 5], c1 = c5[p * 5 + 1];
            if (c0 == 1.0f && c1 == 0.0f) { row[size_t(p)] = 0; continue; }
            if (c1 == 1.0f && c0 == 0.0f) { row[size_t(p)] = 1; continue; }
            BI_CHECK(c0 == 0.0f && c1 == 0.0f, "contact_conditioning",
                     "expected one-hot classes, got ", c0, " and ", c1, " at pair ", p);
            row[size_t(p)] = int32_t(2 + n++);
            const float tn = (t[p] - cutoff_min) / (cutoff_max - cutoff_min);
            x.insert(x.end(), {c5[p * 5 + 2], c5[p * 5 + 3], c5[p * 5 + 4], tn});
            for (int64_t k = 0; k < C; ++k) x.push_back(std::cos(two_pi * (tn * w[k] + b[k])));
        }
    }
    Tensor table = Tensor::empty({2 + n, C});
    Tensor head = table.narrow0(0, 2);
    ops::copy(special, head);
    if (n > 0) {
        Tensor enc = table.narrow0(2, 2 + n);
        encoder(Tensor::of(x, {n, C + 4}), enc);
    }
    Tensor out = Tensor::empty({L, L, C});
    Tensor flat = out.reshape({P, C});
    ops::embedding(Tensor::of(row), table, flat);
    return out;
}

PairInputEmbedding PairInputEmbedding::load(const io::ModelDir& m, const std::string& p,
                                            const Config& cfg) {
    PairInputEmbedding e;
    const int64_t c = cfg.token_z;
    e.rel_pos = nn::ChainRelativePosition::load(
        m, p + "rel_pos.linear_layer", c,
        cfg.fix_sym_check ? nn::ChainRelativePosition::ChainBucket::DifferentEntity
                          : nn::ChainRelativePosition::ChainBucket::SameChain,
        cfg.cyclic_pos_enc);
    e.token_bonds = nn::Linear::load(m, p + "token_bonds", 1, c, false);
    if (m.has(p + "token_bonds_type.weight"))
        e.token_bonds_type = m.get_f32(p + "token_bonds_type.weight", {7, c});
    e.contact = ContactConditioning::load(m, p + "contact_conditioning", c, cfg);
    return e;
}

Tensor PairInputEmbedding::relpos(const Features& f) const { return rel_pos(relpos_tokens(f)); }

void PairInputEmbedding::add_to(const Features& f, Tensor& z, const Tensor* rp) const {
    const int64_t L = z.size(0), C = z.size(2);
    Tensor flat = z.reshape({L * L, C});
    ops::add_into(rp ? *rp : relpos(f), z);
    // token_bonds (L, L, 1): a 1 -> C linear, one product per element, added to z
    token_bonds(f.at("token_bonds").reshape({L * L, 1}), flat, {.accumulate = true});
    if (token_bonds_type.defined())
        ops::embedding(ids_of(f.at("type_bonds")), token_bonds_type, flat, true);
    ops::add_into(contact(f), z);
}

// ---- MSA module -----------------------------------------------------------------------------

void MsaLayer::run(Tensor& z, Tensor& m) const {
    const int64_t S = m.size(0), L = m.size(1), Cm = m.size(2);
    pair_weighted_averaging.add_to(m, z);
    Tensor rows = m.reshape({S * L, Cm});
    msa_transition.add_to(rows);
    outer_product_mean.add_to(m, z);
    pairformer_layer.run(z);
}

MsaModule MsaModule::load(const io::ModelDir& m, const Config& cfg) {
    MsaModule mod;
    mod.msa_s = cfg.msa_s;
    mod.use_paired_feature = cfg.msa_use_paired_feature;
    const int64_t extra = 2 + (mod.use_paired_feature ? 1 : 0), cm = cfg.msa_s;
    const Tensor w = m.get_f32("msa_module.msa_proj.weight", {cm, kNumTokens + extra});
    mod.msa_table = ops::contiguous(w.slice(1, 0, kNumTokens).permute({1, 0}));
    mod.msa_extra = nn::Linear::from(ops::contiguous(w.slice(1, kNumTokens, kNumTokens + extra)),
                                     Tensor());
    mod.s_proj = nn::Linear::load(m, "msa_module.s_proj", cfg.token_s, cm, false);
    for (int64_t k = 0; k < cfg.msa_blocks; ++k) {
        const std::string p = "msa_module.layers." + std::to_string(k);
        MsaLayer l;
        l.pair_weighted_averaging =
            nn::PairWeightedAveraging::load(m, p + ".pair_weighted_averaging", cm, cfg.token_z);
        l.msa_transition = nn::ResidueMlp::load(m, p + ".msa_transition", cm, 4 * cm,
                                                nn::ResidueMlpNames::boltz2());
        l.outer_product_mean = nn::OuterProductMean::load(
            m, p + ".outer_product_mean", cm, cfg.token_z, 32, nn::OuterProductMeanNames::boltz2());
        l.pairformer_layer = nn::PairformerNoSeqLayer::load(
            m, p + ".pairformer_layer", cfg.token_z, 4 * cfg.token_z, nn::PairformerNames::boltz2(),
            cfg.pairwise_head_width, cfg.pairwise_num_heads);
        mod.layers.push_back(std::move(l));
    }
    return mod;
}

std::vector<int64_t> msa_subsample_rows(int64_t rows, int64_t keep, uint64_t seed, int pass) {
    BI_CHECK(rows >= 0 && keep > 0 && pass >= 0, "msa subsampling", "expected rows >= 0, keep > 0 ",
             "and pass >= 0, got ", rows, ", ", keep, ", ", pass);
    // one generator per (seed, pass): a fresh draw each pass, whatever ran before
    NumpyGenerator rng(seed ^ (uint64_t(pass) + 1) * 0x9E3779B97F4A7C15ull);
    std::vector<int64_t> perm(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) perm[size_t(i)] = i;
    for (int64_t i = rows - 1; i > 0; --i)
        std::swap(perm[size_t(i)], perm[size_t(rng.integers(i + 1))]);
    perm.resize(size_t(std::min(rows, keep)));
    return perm;
}

Tensor MsaModule::embed(const Features& f, const Tensor& s_inputs,
                        const std::vector<int64_t>* rows) const {
    // the rows kept (subsampling): each feature's rows gathered in that order
    const auto select = [&](const Tensor& t) {
        if (!rows) return t;
        const Tensor src = ops::contiguous(t);
        const int64_t width = src.numel() / src.size(0);
        Shape shape = src.shape();
        shape[0] = int64_t(rows->size());
        Tensor out = Tensor::empty(shape);
        for (size_t r = 0; r < rows->size(); ++r) {
            const int64_t i = (*rows)[r];
            BI_CHECK(i >= 0 && i < src.size(0), "msa_module", "row ", i, " of an MSA of ",
                     src.size(0), " rows");
            Tensor dst = out.narrow0(int64_t(r), int64_t(r) + 1);
            ops::copy(src.narrow0(i, i + 1), dst);
        }
        return out;
    };
    const Tensor msa = select(f.at("msa"));  // (S, L)
    const int64_t S = msa.size(0), L = msa.size(1), extra = msa_extra.w.size(1);
    Tensor m = Tensor::empty({S, L, msa_s});
    Tensor flat = m.reshape({S * L, msa_s});
    ops::embedding(ids_of(msa), msa_table, flat);  // the one-hot columns
    Tensor x = Tensor::empty({S * L, extra});
    const char* names[] = {"has_deletion", "deletion_value", "msa_paired"};
    for (int64_t k = 0; k < extra; ++k) {
        Tensor col = x.slice(1, k, k + 1);
        ops::copy(select(f.at(names[k])).reshape({S * L, 1}), col);
    }
    msa_extra(x, flat, {.accumulate = true});
    const Tensor sp = linear_out(s_proj, s_inputs);  // (L, msa_s)
    ops::add_into(sp.reshape({1, L, msa_s}).expand({S, L, msa_s}), m);
    return m;
}

void MsaModule::run(Tensor& z, const Tensor& s_inputs, const Features& f, const Tap& tap,
                    const std::vector<int64_t>* rows) const {
    // every row unmasked: so are the rows kept (boltz subsamples msa_mask with them)
    check_all_ones(f, "msa_mask", "msa_module");
    check_all_ones(f, "token_pad_mask", "msa_module");
    Tensor m = embed(f, s_inputs, rows);
    for (size_t k = 0; k < layers.size(); ++k) {
        layers[k].run(z, m);
        if (tap) {
            tap("msa.layer" + std::to_string(k) + ".z", z);
            tap("msa.layer" + std::to_string(k) + ".m", m);
        }
    }
}

// ---- template module --------------------------------------------------------------------------

TemplateModule TemplateModule::load(const io::ModelDir& m, const Config& cfg) {
    TemplateModule t;
    if (!cfg.use_templates) return t;
    BI_CHECK(cfg.use_templates_v2, "template_module",
             "the checkpoint's template module is Boltz-1's (use_templates_v2 false)");
    const int64_t cz = cfg.token_z, d = cfg.template_dim;
    t.dim = d;
    t.num_bins = cfg.template_num_bins;
    t.min_dist = float(cfg.template_min_dist);
    t.max_dist = float(cfg.template_max_dist);
    t.z_norm = nn::LayerNorm::load(m, "template_module.z_norm", cz, 1e-5f);
    t.v_norm = nn::LayerNorm::load(m, "template_module.v_norm", d, 1e-5f);
    t.z_proj = nn::Linear::load(m, "template_module.z_proj", cz, d, false);
    t.a_proj =
        nn::Linear::load(m, "template_module.a_proj", 2 * kNumTokens + t.num_bins + 5, d, false);
    t.u_proj = nn::Linear::load(m, "template_module.u_proj", d, cz, false);
    for (int64_t k = 0; k < cfg.template_blocks; ++k)
        t.layers.push_back(nn::PairformerNoSeqLayer::load(
            m, "template_module.pairformer.layers." + std::to_string(k), d, 4 * d,
            nn::PairformerNames::boltz2(), cfg.template_head_width, cfg.template_num_heads));
    return t;
}

bool TemplateModule::any_template(const Features& f) {
    return f.has("template_mask") && f.at("template_mask").numel() > 0 &&
           ops::max_value(f.at("template_mask")) != 0.0f;
}

namespace {

// torch.cdist(x, x) for x (N, 3) fp32 as its CPU kernel computes it: for N > 25 through the
// matrix product of [-2 x, |x|^2, 1] and [x, 1, |x|^2], clamped at 0, else directly.
std::vector<float> cdist_self(const float* x, int64_t n) {
    std::vector<float> d(static_cast<size_t>(n * n));
    if (n > 25) {
        std::vector<float> sq(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
            const float* p = x + 3 * i;
            sq[size_t(i)] = p[0] * p[0] + p[1] * p[1] + p[2] * p[2];
        }
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < n; ++j) {
                const float* a = x + 3 * i;
                const float* b = x + 3 * j;
                float r = (-2.0f * a[0]) * b[0];
                r += (-2.0f * a[1]) * b[1];
                r += (-2.0f * a[2]) * b[2];
                r += sq[size_t(i)];
                r += sq[size_t(j)];
                d[size_t(i * n + j)] = std::sqrt(std::max(r, 0.0f));
            }
    } else {
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < n; ++j) {
                float r = 0.0f;
                for (int c = 0; c < 3; ++c) {
                    const float e = x[3 * i + c] - x[3 * j + c];
                    r += e * e;
                }
                d[size_t(i * n + j)] = std::sqrt(r);
            }
    }
    return d;
}

}  // namespace

Tensor TemplateModule::run(const Tensor& z, const Features& f, const Tap& tap) const {
    const int64_t L = z.size(0), Cz = z.size(2), D = dim, nb = num_bins;
    const int64_t F = 2 * kNumTokens + nb + 5;
    const Tensor& restype = f.at("template_restype");
    const int64_t T = restype.size(0);
    const auto check = [&](const char* name, std::vector<int64_t> shape) {
        BI_CHECK(f.at(name).shape() == shape, "template_module", name, ": expected ",
                 shape_str(shape), ", got ", shape_str(f.at(name).shape()));
    };
    check("template_restype", {T, L, kNumTokens});
    check("template_frame_rot", {T, L, 3, 3});
    check("template_frame_t", {T, L, 3});
    check("template_cb", {T, L, 3});
    check("template_ca", {T, L, 3});
    check("template_mask_cb", {T, L});
    check("template_mask_frame", {T, L});
    check("template_mask", {T, L});
    check("visibility_ids", {T, L});
    const std::vector<float> bounds = nn::torch_linspace(min_dist, max_dist, nb - 1);

    // z_proj(z_norm(z)), shared by every template
    Tensor zp = Tensor::empty({L, L, D});
    {
        Tensor zn = Tensor::empty({L * L, Cz});
        z_norm(z.reshape({L * L, Cz}), zn);
        Tensor dst = zp.reshape({L * L, D});
        z_proj(zn, dst);
    }
    Tensor u = Tensor::zeros({L, L, D});
    int64_t present = 0;
    for (int64_t t = 0; t < T; ++t) {
        // host-side: the template's feature tables (host tensors of the featurizer)
        const float* tmask = f.at("template_mask").f32() + t * L;
        if (std::all_of(tmask, tmask + L, [](float v) { return v == 0.0f; })) continue;
        ++present;
        // host-side: the template's feature tables, read to build its pair features below
        const float* rt = restype.f32() + t * L * kNumTokens;
        const float* rot = f.at("template_frame_rot").f32() + t * L * 9;
        const float* ft = f.at("template_frame_t").f32() + t * L * 3;
        const float* cb = f.at("template_cb").f32() + t * L * 3;
        const float* ca = f.at("template_ca").f32() + t * L * 3;
        // host-side: (as above)
        const float* cbm = f.at("template_mask_cb").f32() + t * L;
        const float* frm = f.at("template_mask_frame").f32() + t * L;
        const float* vis = f.at("visibility_ids").f32() + t * L;
        const std::vector<float> dist = cdist_self(cb, L);
        // a[i, j] = [one-hot bin, cb pair, "unit vector", frame pair] * same group, restype i, j;
        // vector[i, j] = R_j^T (ca_i - t_j). v = z_proj(LN(z)) + a_proj(a), `rows` rows of a at
        // a time (a holds 2 * 33 + num_bins + 5 values per pair).
        Tensor v = zp.clone();
        const int64_t rows = std::max<int64_t>(1, (int64_t(8) << 20) / std::max<int64_t>(1, L * F));
        for (int64_t r0 = 0; r0 < L; r0 += rows) {
            const int64_t r1 = std::min(L, r0 + rows), n = (r1 - r0) * L;
            Tensor ac = Tensor::zeros({n, F});
            // host-side: the pair features are a gather and one-hot per pair (O(L^2) writes, no
            // arithmetic worth an op), then a_proj runs as a GEMM
            float* ap = ac.f32();
            for (int64_t i = r0; i < r1; ++i)
                for (int64_t j = 0; j < L; ++j) {
                    float* row = ap + ((i - r0) * L + j) * F;
                    if (vis[i] == vis[j]) {
                        const float d = dist[size_t(i * L + j)];
                        int64_t bin = 0;
                        for (float b : bounds) bin += d > b;
                        row[bin] = 1.0f;
                        row[nb] = cbm[i] * cbm[j];
                        const float* R = rot + 9 * j;
                        float e[3] = {ca[3 * i] - ft[3 * j], ca[3 * i + 1] - ft[3 * j + 1],
                                      ca[3 * i + 2] - ft[3 * j + 2]};
                        float vec[3];
                        for (int c = 0; c < 3; ++c)  // (R^T e)_c = sum_k R[k][c] e_k
                            vec[c] = R[0 * 3 + c] * e[0] + R[1 * 3 + c] * e[1] + R[2 * 3 + c] * e[2];
                        // The reference normalises over the matmul's trailing unit dimension, so
                        // each component is divided by its own magnitude: its sign, or 0.
                        for (int c = 0; c < 3; ++c)
                            row[nb + 1 + c] = vec[c] > 0.0f ? 1.0f : (vec[c] < 0.0f ? -1.0f : 0.0f);
                        row[nb + 4] = frm[i] * frm[j];
                    }
                    std::copy(rt + i * kNumTokens, rt + (i + 1) * kNumTokens, row + nb + 5);
                    std::copy(rt + j * kNumTokens, rt + (j + 1) * kNumTokens,
                              row + nb + 5 + kNumTokens);
                }
            Tensor dst = v.narrow0(r0, r1).reshape({n, D});
            a_proj(ac, dst, {.accumulate = true});
        }
        // v += pairformer(v) (= v + its updates); LN
        Tensor w = v.clone();
        for (const nn::PairformerNoSeqLayer& layer : layers) layer.run(w);
        ops::add_into(w, v);
        w = Tensor();
        Tensor vn = Tensor::empty({L * L, D});
        v_norm(v.reshape({L * L, D}), vn);
        if (tap) tap("template.v" + std::to_string(t), vn.reshape({L, L, D}));
        ops::add_into(vn.reshape({L, L, D}), u);
    }
    // u_proj(relu(u / max(count, 1)))
    Tensor r = Tensor::empty({L * L, D});
    ops::scale(u.reshape({L * L, D}), 1.0f / float(std::max<int64_t>(present, 1)), r);
    ops::activation(r, Act::Relu, r);
    Tensor out = Tensor::empty({L, L, Cz});
    Tensor dst = out.reshape({L * L, Cz});
    u_proj(r, dst);
    return out;
}

// ---- trunk ----------------------------------------------------------------------------------

Trunk Trunk::load(const io::ModelDir& m, const Config& cfg) {
    Trunk t;
    t.cfg = cfg;
    const int64_t cs = cfg.token_s, cz = cfg.token_z;
    t.s_init = nn::Linear::load(m, "s_init", cs, cs, false);
    t.z_init_1 = nn::Linear::load(m, "z_init_1", cs, cz, false);
    t.z_init_2 = nn::Linear::load(m, "z_init_2", cs, cz, false);
    t.pair_inputs = PairInputEmbedding::load(m, "", cfg);
    t.s_norm = nn::LayerNorm::load(m, "s_norm", cs, 1e-5f);
    t.z_norm = nn::LayerNorm::load(m, "z_norm", cz, 1e-5f);
    t.s_recycle = nn::Linear::load(m, "s_recycle", cs, cs, false);
    t.z_recycle = nn::Linear::load(m, "z_recycle", cz, cz, false);
    t.templates = TemplateModule::load(m, cfg);
    t.msa = MsaModule::load(m, cfg);
    t.pairformer = nn::PairformerStack::load(m, "pairformer_module", cfg.pairformer_blocks, cs, cz,
                                             cfg.pairformer_heads, cfg.pairwise_head_width,
                                             cfg.pairwise_num_heads);
    t.distogram = nn::DistogramHead::load(m, "distogram_module.distogram", cz, cfg.num_bins,
                                          /*sum_pairs=*/true);
    if (cfg.predict_bfactor)
        t.bfactor = nn::Linear::load(m, "bfactor_module.bfactor", cs, cfg.num_bins);
    return t;
}

Tensor Trunk::z_init(const Features& f, const Tensor& s_inputs, const Tensor* rp) const {
    const int64_t L = s_inputs.size(0), C = cfg.token_z;
    Tensor z = Tensor::empty({L, L, C});
    outer_sum(linear_out(z_init_1, s_inputs), linear_out(z_init_2, s_inputs), z);
    pair_inputs.add_to(f, z, rp);
    return z;
}

TrunkOutput Trunk::run(const Features& f, const Tensor& s_inputs, int recycling_steps, const Tap& tap,
                       const std::function<void(int pass, int passes)>& on_pass,
                       const MsaSubsample& subsample) const {
    const int64_t L = s_inputs.size(0), Cs = cfg.token_s, Cz = cfg.token_z;
    BI_CHECK(s_inputs.ndim() == 2 && s_inputs.size(1) == Cs && L == f.num_tokens(), "boltz2 trunk",
             "s_inputs: expected (", f.num_tokens(), ", ", Cs, "), got ", shape_str(s_inputs.shape()));
    check_all_ones(f, "token_pad_mask", "boltz2 trunk");
    // Without templates (template_mask all 0) the template module adds exactly 0: skipped.
    const bool with_templates = TemplateModule::any_template(f);
    BI_CHECK(!with_templates || templates.defined(), "boltz2 trunk",
             "templates are given but the checkpoint has no template module");
    TrunkOutput out;
    out.relpos = relpos(f);
    const Tensor s0 = linear_out(s_init, s_inputs);  // (L, Cs)
    const Tensor z0 = z_init(f, s_inputs, &out.relpos);
    if (tap) {
        tap("s_init", s0);
        tap("z_init", z0);
    }
    Tensor s = Tensor::zeros({L, Cs}), z = Tensor::zeros({L, L, Cz});
    const int64_t chunk = nn::default_pair_chunk(L, Cz);
    for (int pass = 0; pass <= recycling_steps; ++pass) {
        if (on_pass) on_pass(pass, recycling_steps + 1);
        const std::string pre = "pass" + std::to_string(pass) + ".";
        // s = s_init + s_recycle(s_norm(s)); z likewise, `chunk` pair rows at a time
        Tensor sn = Tensor::empty({L, Cs}), s_new = s0.clone();
        s_norm(s, sn);
        s_recycle(sn, s_new, {.accumulate = true});
        Tensor z_new = z0.clone();
        for (int64_t r0 = 0; r0 < L; r0 += chunk) {
            const int64_t r1 = std::min(L, r0 + chunk), n = (r1 - r0) * L;
            Tensor zn = Tensor::empty({n, Cz}), dst = z_new.narrow0(r0, r1).reshape({n, Cz});
            z_norm(z.narrow0(r0, r1).reshape({n, Cz}), zn);
            z_recycle(zn, dst, {.accumulate = true});
        }
        s = std::move(s_new);
        z = std::move(z_new);
        if (tap) {
            tap(pre + "s", s);
            tap(pre + "z", z);
        }
        // z = z + TemplateModule(z)
        if (with_templates) {
            const Tap tt =
                tap ? Tap([&](const std::string& n, const Tensor& x) { tap(pre + n, x); }) : Tap();
            const Tensor zt = templates.run(z, f, tt);
            if (tap) tap(pre + "template_out", zt);
            ops::add_into(zt, z);
        }
        // z = z + MSAModule(z)
        Tensor zm = z.clone();
        const Tap msa_tap = tap ? Tap([&](const std::string& n, const Tensor& t) { tap(pre + n, t); })
                                : Tap();
        std::vector<int64_t> rows;  // --subsample_msa: a fresh draw each pass
        if (subsample.rows > 0)
            rows = msa_subsample_rows(f.at("msa").size(0), subsample.rows, subsample.seed, pass);
        msa.run(zm, s_inputs, f, msa_tap, subsample.rows > 0 ? &rows : nullptr);
        if (tap) tap(pre + "msa_out", zm);
        ops::add_into(zm, z);
        zm = Tensor();
        pairformer.run(s, z, tap, pre + "pf.");
    }
    out.pdistogram = distogram(z);
    if (bfactor.w.defined()) out.pbfactor = linear_out(bfactor, s);
    out.s = std::move(s);
    out.z = std::move(z);
    return out;
}

}  // namespace bioinfer::boltz2
