// Boltz-2's InputEmbedder and DiffusionConditioning: see embedder.h.
#include "models/boltz2/embedder.h"

#include <algorithm>
#include <string>
#include <vector>

#include "bioinfer/error.h"
#include "nn/triangle.h"
#include "ops/ops.h"

namespace bioinfer::boltz2 {
namespace {

constexpr const char* kWhere = "boltz2 embedder";

// Integer ids of a token feature stored as exact fp32 values (N).
std::vector<int32_t> ids_of(const Features& f, const char* name) {
    const Tensor t = f.at(name).to(kHost).to_f32();
    std::vector<int32_t> ids(size_t(t.numel()));
    // host-side: feature ids read once per input
    for (int64_t i = 0; i < t.numel(); ++i) ids[size_t(i)] = int32_t(t.f32()[i]);
    return ids;
}

}  // namespace

// ---- InputEmbedder -----------------------------------------------------------------------------

InputEmbedder InputEmbedder::load(const io::ModelDir& m, const Config& cfg) {
    const std::string p = "input_embedder";
    InputEmbedder e;
    e.window_q = cfg.window_queries;
    e.window_k = cfg.window_keys;
    e.atom_encoder = AtomEncoder::load(m, p + ".atom_encoder", cfg, false);
    e.atom_enc_proj_z = PairBiasProjection::load(m, p + ".atom_enc_proj_z", cfg.atom_z, 0,
                                                 cfg.embedder_atom_depth * cfg.embedder_atom_heads);
    e.atom_attention = AtomAttentionEncoder::load(m, p + ".atom_attention_encoder", cfg, false,
                                                  cfg.embedder_atom_depth, cfg.embedder_atom_heads);
    e.res_type = nn::Linear::load(m, p + ".res_type_encoding", 33, cfg.token_s, false);
    e.msa_profile = nn::Linear::load(m, p + ".msa_profile_encoding", 34, cfg.token_s, false);
    const auto table = [&](const std::string& name, int64_t rows, bool on) {
        return on ? m.get_f32(p + "." + name + ".weight", {rows, cfg.token_s}) : Tensor();
    };
    e.method = table("method_conditioning_init", 12, cfg.add_method_conditioning);
    e.modified = table("modified_conditioning_init", 2, cfg.add_modified_flag);
    e.mol_type = table("mol_type_conditioning_init", 4, cfg.add_mol_type_feat);
    if (cfg.add_cyclic_flag)
        e.cyclic = nn::Linear::load(m, p + ".cyclic_conditioning_init", 1, cfg.token_s, false);
    return e;
}

Tensor InputEmbedder::forward(const Features& f, Trace* trace) const {
    const AtomLayout lay = AtomLayout::make(f, window_q, window_k);
    const int64_t N = lay.tokens;
    AtomEncoderOut atoms = atom_encoder.forward(f, lay);
    const Tensor bias = atom_enc_proj_z(atoms.p);  // (K, W, H, depth * heads)
    const Tensor a = atom_attention.forward(lay, atoms.q, atoms.c, atom_attention.prepare(bias, lay));

    // s = a + res_type_encoding + msa_profile_encoding, then the conditionings, in boltz's order
    Tensor s = a.clone();
    res_type(f.at("res_type").reshape({N, 33}).to_f32(), s, {.accumulate = true});
    Tensor prof = Tensor::empty({N, 34});
    Tensor p0 = prof.slice(1, 0, 33), p1 = prof.slice(1, 33, 34);
    ops::copy(f.at("profile").reshape({N, 33}).to_f32(), p0);
    ops::copy(f.at("deletion_mean").reshape({N, 1}).to_f32(), p1);
    msa_profile(prof, s, {.accumulate = true});
    if (method.defined()) ops::embedding(ids_of(f, "method_feature"), method, s, true);
    if (modified.defined()) ops::embedding(ids_of(f, "modified"), modified, s, true);
    if (cyclic.w.defined()) {
        Tensor cyc = f.at("cyclic_period").reshape({N, 1}).to(kHost).to_f32().clone();
        // host-side: boltz's cyclic_period.clamp(max=1), a feature read once per input
        for (int64_t i = 0; i < N; ++i) cyc.f32()[i] = std::min(cyc.f32()[i], 1.0f);
        cyclic(cyc.to(s.device()), s, {.accumulate = true});
    }
    if (mol_type.defined()) ops::embedding(ids_of(f, "mol_type"), mol_type, s, true);
    if (trace) {
        trace->atoms = std::move(atoms);
        trace->a = a;
    }
    return s;
}

// ---- DiffusionConditioning ---------------------------------------------------------------------

PairwiseConditioner PairwiseConditioner::load(const io::ModelDir& m, const std::string& p,
                                              int64_t tz, int64_t num_transitions) {
    PairwiseConditioner c;
    c.init_ln = nn::LayerNorm::load(m, p + ".dim_pairwise_init_proj.0", 2 * tz, 1e-5f);
    c.init = nn::Linear::load(m, p + ".dim_pairwise_init_proj.1", 2 * tz, tz, false);
    for (int64_t i = 0; i < num_transitions; ++i)
        c.transitions.push_back(nn::ResidueMlp::load(m, p + ".transitions." + std::to_string(i),
                                                     tz, 2 * tz, nn::ResidueMlpNames::boltz2()));
    return c;
}

Tensor PairwiseConditioner::operator()(const Tensor& a, const Tensor& b) const {
    const int64_t tz = init.out_features();
    BI_CHECK(a.ndim() == 3 && a.size(0) == a.size(1) && a.size(2) == tz && b.shape() == a.shape(),
             kWhere, "pairwise conditioning: expected two (N, N, ", tz, ") pairs, got ",
             shape_str(a.shape()), " and ", shape_str(b.shape()));
    const int64_t N = a.size(0);
    Tensor z = Tensor::empty({N * N, tz});
    const Tensor za = a.reshape({N * N, tz}), zb = b.reshape({N * N, tz});
    const int64_t rows = N * nn::default_pair_chunk(N, 2 * tz);
    for (int64_t r0 = 0; r0 < N * N; r0 += rows) {
        const int64_t r1 = std::min(N * N, r0 + rows), n = r1 - r0;
        Tensor zc = Tensor::empty({n, 2 * tz}), zn = Tensor::empty({n, 2 * tz});
        Tensor z0 = zc.slice(1, 0, tz), z1 = zc.slice(1, tz, 2 * tz), zo = z.narrow0(r0, r1);
        ops::copy(za.narrow0(r0, r1), z0);
        ops::copy(zb.narrow0(r0, r1), z1);
        init_ln(zc, zn);
        init(zn, zo);
    }
    for (const auto& t : transitions) t.add_to(z);
    return z.reshape({N, N, tz});
}

DiffusionConditioning DiffusionConditioning::load(const io::ModelDir& m, const Config& cfg) {
    const std::string p = "diffusion_conditioning";
    const int64_t tz = cfg.token_z;
    DiffusionConditioning d;
    d.window_q = cfg.window_queries;
    d.window_k = cfg.window_keys;
    d.pairwise = PairwiseConditioner::load(m, p + ".pairwise_conditioner", tz,
                                           cfg.conditioning_transition_layers);
    d.atom_encoder = AtomEncoder::load(m, p + ".atom_encoder", cfg, true);
    d.atom_enc_proj_z = PairBiasProjection::load(m, p + ".atom_enc_proj_z", cfg.atom_z,
                                                 cfg.atom_encoder_depth, cfg.atom_encoder_heads);
    d.atom_dec_proj_z = PairBiasProjection::load(m, p + ".atom_dec_proj_z", cfg.atom_z,
                                                 cfg.atom_decoder_depth, cfg.atom_decoder_heads);
    d.token_trans_proj_z = PairBiasProjection::load(m, p + ".token_trans_proj_z", tz,
                                                    cfg.token_transformer_depth,
                                                    cfg.token_transformer_heads);
    return d;
}

DiffusionConditioningOut DiffusionConditioning::forward(const Tensor& s_trunk,
                                                        const Tensor& z_trunk,
                                                        const Tensor& relpos,
                                                        const Features& f,
                                                        bool token_bias) const {
    const int64_t N = f.num_tokens(), tz = pairwise.init.out_features();
    BI_CHECK(z_trunk.numel() == N * N * tz && relpos.numel() == N * N * tz &&
                 s_trunk.numel() % N == 0,
             kWhere, "diffusion conditioning: expected z_trunk and relpos (", N, ", ", N, ", ", tz,
             "), got ", shape_str(z_trunk.shape()), " and ", shape_str(relpos.shape()));
    DiffusionConditioningOut out;
    out.layout = AtomLayout::make(f, window_q, window_k);

    out.z = pairwise(z_trunk, relpos);

    AtomEncoderOut atoms = atom_encoder.forward(f, out.layout, &s_trunk, &out.z);
    out.q = atoms.q;
    out.c = atoms.c;
    out.atom_enc_bias = atom_enc_proj_z(atoms.p);
    out.atom_dec_bias = atom_dec_proj_z(atoms.p);
    if (token_bias) out.token_trans_bias = token_trans_proj_z(out.z);
    return out;
}

std::vector<Tensor> DiffusionConditioning::token_bias_layers(const Tensor& z) const {
    BI_CHECK(z.ndim() == 3 && z.size(0) == z.size(1) && z.size(2) == pairwise.init.out_features(),
             kWhere, "token bias: expected z (N, N, ", pairwise.init.out_features(), "), got ",
             shape_str(z.shape()));
    std::vector<Tensor> layers;
    for (size_t l = 0; l < token_trans_proj_z.proj.size(); ++l)
        layers.push_back(nn::pair_bias(z, token_trans_proj_z.ln[l], token_trans_proj_z.proj[l],
                                       /*chunk=*/0, /*transposed=*/false));
    return layers;
}

}  // namespace bioinfer::boltz2
