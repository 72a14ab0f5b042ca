// ESMFold2's trunk: see trunk.h.
#include "models/esmfold2/trunk.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "bioinfer/error.h"
#include "ops/ops.h"

namespace bioinfer::esmfold2 {
namespace {

constexpr const char* kWhere = "esmfold2 trunk";

Tensor f32_of(const std::vector<int32_t>& v) {
    std::vector<float> f(v.begin(), v.end());
    return Tensor::of(f, {int64_t(v.size())});
}

float softplus(float x) {
    return x > 20.f ? x : float(std::log1p(std::exp(double(x))));
}

}  // namespace

Tensor lm_hidden_states(esm::EsmcModel& lm, const Inputs& in) {
    const int64_t L = in.tokens, K = lm.num_layers() + 1, D = lm.hidden_size();
    std::vector<int32_t> chains(in.asym_id.begin(), in.asym_id.end());
    std::sort(chains.begin(), chains.end());
    chains.erase(std::unique(chains.begin(), chains.end()), chains.end());
    std::vector<std::vector<int32_t>> seqs;
    std::vector<std::vector<int64_t>> rows;  // per chain: its tokens in order
    for (int32_t c : chains) {
        std::vector<int32_t> ids{esm::kCls};
        std::vector<int64_t> r;
        for (int64_t i = 0; i < L; ++i)
            if (in.asym_id[size_t(i)] == c && in.mol_type[size_t(i)] == 0) {
                ids.push_back(in.input_ids[size_t(i)]);
                r.push_back(i);
            }
        ids.push_back(esm::kEos);
        if (r.empty()) continue;
        seqs.push_back(std::move(ids));
        rows.push_back(std::move(r));
    }
    lm::Request req;
    for (int k = 0; k < int(K); ++k) req.layers.push_back(k);
    const lm::Output o = lm.forward(seqs, req);
    Tensor out = Tensor::zeros({L, K, D});
    const Tensor flat = out.reshape({L, K * D});
    for (size_t s = 0; s < seqs.size(); ++s) {
        const int64_t n = int64_t(rows[s].size()), first = rows[s].front();
        const bool block = rows[s].back() - first == n - 1;  // the chain's tokens are contiguous
        for (int64_t k = 0; k < K; ++k) {
            const Tensor& h = o.hidden.at(int(k));
            const Tensor col = flat.slice(1, k * D, (k + 1) * D);
            const int64_t src = o.offsets[s] + 1;
            if (block) {
                Tensor dst = col.slice(0, first, first + n);
                ops::copy(h.narrow0(src, src + n), dst);
            } else {
                for (int64_t t = 0; t < n; ++t) {
                    Tensor dst = col.slice(0, rows[s][size_t(t)], rows[s][size_t(t)] + 1);
                    ops::copy(h.narrow0(src + t, src + t + 1), dst);
                }
            }
        }
    }
    return out;
}

LmShim LmShim::load(const io::ModelDir& m, const std::string& p, int64_t d, int64_t layers,
                    int64_t c) {
    LmShim s;
    s.in_norm = nn::LayerNorm::load(m, p + ".pair_input_norm", d, 1e-5f);
    s.proj = nn::Linear::load(m, p + ".pair_proj", d, c, false);
    const Tensor w = m.get_f32(p + ".layer_weights", {layers + 1});
    // host-side: the layer mixture's softmax, once at load
    double mx = -1e300, sum = 0;
    for (int64_t k = 0; k <= layers; ++k) mx = std::max(mx, double(w.f32()[k]));
    std::vector<double> e(size_t(layers + 1));
    for (int64_t k = 0; k <= layers; ++k) sum += e[size_t(k)] = std::exp(double(w.f32()[k]) - mx);
    for (double x : e) s.weights.push_back(float(x / sum));
    s.down = nn::Linear::load(m, p + ".single_to_pair.downproject", c, c);
    s.fc1 = nn::Linear::load(m, p + ".single_to_pair.output_fc1", 2 * c, c);
    s.fc2 = nn::Linear::load(m, p + ".single_to_pair.output_fc2", c, c);
    s.out_norm = nn::LayerNorm::load(m, p + ".pair_output_norm", c, 1e-5f);
    return s;
}

Tensor LmShim::operator()(const Tensor& hidden) const {
    const int64_t L = hidden.size(0), K = hidden.size(1), D = hidden.size(2);
    const int64_t C = proj.out_features();
    BI_CHECK(K == int64_t(weights.size()), kWhere, "LM hidden states: ", K,
             " layers, the shim mixes ", weights.size());
    // sum_k w_k proj(LN(h_k)) = proj(sum_k w_k LN(h_k)): the mixture before the projection
    Tensor hn = Tensor::empty({L * K, D});
    in_norm(ops::contiguous(hidden).reshape({L * K, D}), hn);
    std::vector<float> wl;
    wl.reserve(size_t(L * K));
    for (int64_t i = 0; i < L; ++i) wl.insert(wl.end(), weights.begin(), weights.end());
    Tensor mixed = Tensor::empty({L, 1, D});
    ops::bmm(Tensor::of(wl, {L, 1, K}), hn.reshape({L, K, D}), mixed);
    Tensor x = Tensor::empty({L, C});
    proj(mixed.reshape({L, D}), x);
    // single to pair: [x_i * x_j, x_i - x_j] from qk = [-x' | -x'] (outer_product_difference
    // makes [q_j * k_i, q_j - k_i])
    Tensor xd = Tensor::empty({L, C});
    down(x, xd);
    ops::scale(xd, -1.0f, xd);
    Tensor qk = Tensor::empty({L, 2 * C});
    Tensor q_half = qk.slice(1, 0, C), k_half = qk.slice(1, C, 2 * C);
    ops::copy(xd, q_half);
    ops::copy(xd, k_half);
    Tensor out = Tensor::empty({L, L, C});
    const int64_t chunk =
        std::max<int64_t>(1, (int64_t(64) << 20) / std::max<int64_t>(1, L * 3 * C * 4));
    for (int64_t r0 = 0; r0 < L; r0 += chunk) {
        const int64_t r1 = std::min(L, r0 + chunk), n = (r1 - r0) * L;
        Tensor feat = Tensor::empty({n, 2 * C}), h = Tensor::empty({n, C}),
               h2 = Tensor::empty({n, C});
        ops::outer_product_difference(qk, r0, r1, feat);
        fc1(feat, h, {.act = Act::Gelu});
        fc2(h, h2);
        Tensor o = out.narrow0(r0, r1).reshape({n, C});
        out_norm(h2, o);
    }
    return out;
}

MsaEncoder MsaEncoder::load(const io::ModelDir& m, const std::string& p, const Config& cfg) {
    MsaEncoder e;
    const auto& mc = cfg.msa;
    const int64_t c = cfg.c_z, cm = mc.hidden;
    e.embed = nn::Linear::load(m, p + ".embed", cfg.res_types + 2, cm, false);
    e.project = nn::Linear::load(m, p + ".project_inputs", cfg.c_inputs, cm, false);
    for (int64_t i = 0; i < mc.layers; ++i) {
        const std::string q = p + ".layers." + std::to_string(i);
        Layer l;
        l.opm = nn::OuterProductMean::load(m, q + ".outer_product_mean", cm, c, mc.outer,
                                           nn::OuterProductMeanNames::esmfold2());
        l.updates_msa = i != mc.layers - 1;
        if (l.updates_msa) {
            l.pwa = nn::PairWeightedAveraging::load(m, q + ".msa_pair_weighted_averaging", cm, c,
                                                    mc.head_dim, mc.heads,
                                                    nn::PairWeightedAveragingNames::esmfold2());
            l.transition = nn::ResidueMlp::load(m, q + ".msa_transition", cm, mc.intermediate,
                                                nn::ResidueMlpNames::esmfold2());
        }
        l.pair =
            nn::PairformerNoSeqLayer::load(m, q, c, cfg.pair_ff, nn::PairformerNames::esmfold2());
        e.layers.push_back(std::move(l));
    }
    return e;
}

Tensor MsaEncoder::operator()(Tensor z, const Tensor& s_inputs, const Inputs& in,
                              int64_t res_types) const {
    const int64_t S = in.msa_rows, L = in.tokens, cm = embed.out_features(), F = res_types + 2;
    std::vector<float> feat(size_t(S * L * F), 0.f);
    // host-side: the MSA's one-hot features, once per target
    for (int64_t s = 0; s < S; ++s)
        for (int64_t i = 0; i < L; ++i) {
            const size_t k = size_t(s * L + i);
            const int32_t r = in.msa[k];
            BI_CHECK(r >= 0 && r < res_types, kWhere, "MSA row ", s, ", column ", i,
                     ": residue class ", r, " out of range");
            float* row = feat.data() + k * size_t(F);
            row[r] = 1.f;
            row[res_types] = in.has_deletion[k];
            row[res_types + 1] = in.deletion_value[k];
        }
    Tensor msa = Tensor::empty({S, L, cm});
    Tensor m2 = msa.reshape({S * L, cm});
    embed(Tensor::of(feat, {S * L, F}), m2);
    Tensor proj = Tensor::empty({L, cm});
    project(s_inputs, proj);
    for (int64_t s = 0; s < S; ++s) {
        Tensor ms = msa.narrow0(s, s + 1).reshape({L, cm});
        ops::add(ms, proj, ms);
    }
    for (const Layer& l : layers) {
        l.opm.add_to(msa, z);
        if (l.updates_msa) {
            l.pwa.add_to(msa, z);
            l.transition.add_to(m2);
        }
        l.pair.run(z);
    }
    return z;
}

TrunkDraws TrunkDraws::seeded(uint64_t seed) {
    auto rng = std::make_shared<std::mt19937_64>(seed);
    TrunkDraws d;
    d.dropout_keep = [rng](int64_t, const Shape& shape, double p) {
        std::bernoulli_distribution keep(1.0 - p);
        std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
        for (float& x : v) x = keep(*rng) ? 1.f : 0.f;
        return Tensor::of(v, shape);
    };
    d.initial_pair = [rng](const Shape& shape) {
        const int64_t n = shape_numel(shape), C = shape.back();
        const double sd = std::sqrt(2.0 / (5.0 * double(C)));
        std::normal_distribution<double> normal(0.0, 1.0);
        std::vector<float> v(static_cast<size_t>(n));
        for (float& x : v) {
            double z;
            do z = normal(*rng);
            while (std::fabs(z) > 3.0);
            x = float(z * sd);
        }
        return Tensor::of(v, shape);
    };
    return d;
}

Trunk Trunk::load(const io::ModelDir& m, const Config& cfg) {
    Trunk t;
    t.cfg_ = cfg;
    const int64_t c = cfg.c_z;
    t.atoms_ = AtomStack::load(m, "input_embedder.atom_encoder", cfg.atom, cfg.window,
                               cfg.atom_features, true);
    t.pair_init_1_ = nn::Linear::load(m, "input_embedder.pair_init_1", cfg.c_inputs, c, false);
    t.pair_init_2_ = nn::Linear::load(m, "input_embedder.pair_init_2", cfg.c_inputs, c, false);
    t.token_bonds_ = nn::Linear::load(m, "input_embedder.token_bonds", 1, c, false);
    t.relpos_ = nn::ChainRelativePosition::load(m, "input_embedder.rel_pos.embed", c,
                                                nn::ChainRelativePosition::ChainBucket::SameChain,
                                                false, cfg.relpos_bins, cfg.chain_bins);
    const int64_t lm_hidden = io::config_get<int64_t>(cfg.esmc, "hidden_size", "esmc_config");
    const int64_t lm_layers = io::config_get<int64_t>(cfg.esmc, "num_hidden_layers", "esmc_config");
    t.lm_ = LmShim::load(m, "language_model", lm_hidden, lm_layers, c);
    const nn::PairformerNames pn = nn::PairformerNames::esmfold2();
    using Stack = nn::PairformerNoSeqStack;
    t.lm_encoder_ = Stack::load(m, "lm_encoder", cfg.lm.layers, c, cfg.pair_ff, pn);
    t.folding_trunk_ = Stack::load(m, "folding_trunk", cfg.trunk_layers, c, cfg.pair_ff, pn);
    t.coda_ = Stack::load(m, "parcae.output_stack", cfg.coda_layers, c, cfg.pair_ff, pn);
    t.has_msa_ = cfg.msa.enabled;
    if (t.has_msa_) t.msa_ = MsaEncoder::load(m, "msa_encoder", cfg);
    t.parcae_norm_ = nn::LayerNorm::load(m, "parcae.input_norm", c, 1e-5f);
    const Tensor log_a = m.get_f32("parcae.log_state_decay", {c});
    const Tensor log_delta = m.get_f32("parcae.log_delta", {c});
    const Tensor b_cont = m.get_f32("parcae.input_matrix_continuous", {c, c});
    std::vector<float> decay(static_cast<size_t>(c)), b(static_cast<size_t>(c * c));
    // host-side: the recurrence's discretisation, once at load (fp32, as the reference)
    for (int64_t i = 0; i < c; ++i) {
        const float delta = softplus(log_delta.f32()[i]);
        decay[size_t(i)] = std::exp(-delta * std::exp(log_a.f32()[i]));
        for (int64_t j = 0; j < c; ++j) b[size_t(i * c + j)] = delta * b_cont.f32()[i * c + j];
    }
    t.decay_ = Tensor::of(decay, {c});
    t.input_matrix_ = nn::Linear::from(Tensor::of(b, {c, c}), Tensor());
    t.readout_ = nn::Linear::load(m, "parcae.out_proj", c, c, false);
    t.distogram_ = nn::Linear::load(m, "distogram_head", c, cfg.sampler.distogram_bins);
    return t;
}

TrunkOutput Trunk::run(const Inputs& in, const Tensor& lm_hidden, TrunkDraws& draws,
                       int64_t num_loops, const Tap& tap) const {
    const Config& cfg = cfg_;
    const int64_t L = in.tokens, C = cfg.c_z, N = L;
    const auto emit = [&](const std::string& name, const Tensor& t) {
        if (tap) tap(name, t);
    };
    if (num_loops < 0) num_loops = cfg.num_loops;
    BI_CHECK(L > 0, kWhere, "no tokens");
    BI_CHECK(lm_hidden.ndim() == 3 && lm_hidden.size(0) == L, kWhere, "LM hidden states ",
             shape_str(lm_hidden.shape()), ": expected (", L, ", layers + 1, D)");
    TrunkOutput out;

    // ---- inputs embedder ----
    const Tensor embeds = embed_atoms(atoms_, in.atoms, cfg.elements, cfg.char_vocab);
    emit("embed.atom_embeds", embeds);
    const AtomContext actx = atom_context(atoms_, in.atoms, embeds);
    Tensor q = embeds.clone();
    run_atom_layers(atoms_, actx, q);
    const Tensor atom_tokens = atoms_to_tokens(atoms_, actx, q);
    const int64_t Da = cfg.atom.output_dim, R = cfg.res_types;
    std::vector<float> rest(size_t(N * (2 * R + 1)), 0.f);
    // host-side: residue one-hots, the MSA profile and deletion mean, once per target
    for (int64_t i = 0; i < N; ++i) {
        float* r = rest.data() + i * (2 * R + 1);
        const int32_t t = in.res_type[size_t(i)];
        BI_CHECK(t >= 0 && t < R, kWhere, "token ", i, ": residue class ", t, " out of range");
        r[t] = 1.f;
        if (in.msa_rows > 0) {
            for (int64_t s = 0; s < in.msa_rows; ++s) r[R + in.msa[size_t(s * N + i)]] += 1.f;
            for (int64_t k = 0; k < R; ++k) r[R + k] /= float(in.msa_rows);
        } else {
            r[R + t] = 1.f;
        }
        r[2 * R] = in.deletion_mean.empty() ? 0.f : in.deletion_mean[size_t(i)];
    }
    out.s_inputs = Tensor::empty({N, cfg.c_inputs});
    Tensor s_a = out.s_inputs.slice(1, 0, Da), s_b = out.s_inputs.slice(1, Da, cfg.c_inputs);
    ops::copy(atom_tokens, s_a);
    ops::copy(Tensor::of(rest, {N, 2 * R + 1}), s_b);
    emit("embed.single_inputs", out.s_inputs);

    Tensor p1 = Tensor::empty({N, C}), p2 = Tensor::empty({N, C});
    pair_init_1_(out.s_inputs, p1);
    pair_init_2_(out.s_inputs, p2);
    nn::ChainRelativePosition::Tokens tok;
    tok.asym_id = f32_of(in.asym_id);
    tok.residue_index = f32_of(in.residue_index);
    tok.entity_id = f32_of(in.entity_id);
    tok.token_index = f32_of(in.token_index);
    tok.sym_id = f32_of(in.sym_id);
    out.relpos = relpos_(tok);
    // protein tokens carry no covalent bonds: the bond encoding is zero
    out.bonds = Tensor::zeros({N, N, C});
    Tensor z_init = Tensor::empty({N, N, C});
    ops::copy(p1.reshape({N, 1, C}).expand({N, N, C}), z_init);
    ops::add_into(p2.reshape({1, N, C}).expand({N, N, C}), z_init);
    ops::add_into(out.relpos, z_init);
    emit("embed.z_init", z_init);

    // ---- language model shim, MSA encoder (loop-invariant) ----
    const Tensor lm_pair = lm_(lm_hidden);
    emit("lm.pair", lm_pair);
    const Tensor inject_base =
        has_msa_ && in.msa_rows > 0 ? msa_(z_init.clone(), out.s_inputs, in, R) : z_init;

    // ---- parcae loops ----
    Tensor z = draws.initial_pair({N, N, C});
    BI_CHECK(z.shape() == Shape({N, N, C}), kWhere, "initial pair state ", shape_str(z.shape()));
    z = z.clone();
    emit("trunk.init", z);
    const Tensor decay_rows = decay_.reshape({1, C}).expand({N * N, C});
    const float keep_scale = 1.0f / (1.0f - float(cfg.lm.dropout));
    const bool dropout = cfg.lm.per_loop && cfg.lm.dropout > 0;
    for (int64_t loop = 0; loop <= num_loops; ++loop) {
        Tensor lm = lm_pair.clone();
        if (dropout) {
            BI_CHECK(bool(draws.dropout_keep), kWhere, "no source for the LM dropout masks");
            const Tensor keep = draws.dropout_keep(loop, {N, N, C}, cfg.lm.dropout);
            BI_CHECK(keep.numel() == N * N * C, kWhere, "dropout mask ", shape_str(keep.shape()));
            Tensor noise = keep.to_f32().clone();
            ops::scale(noise, keep_scale, noise);
            ops::mul(lm, noise.reshape(lm.shape()), lm);
        }
        lm_encoder_.run(lm);
        emit("trunk.lm" + std::to_string(loop), lm);
        Tensor inject = Tensor::empty({N, N, C});
        ops::add(inject_base, lm, inject);
        emit("trunk.inject" + std::to_string(loop), inject);
        // z = decay * z + LN(inject) B^T
        Tensor inj2 = inject.reshape({N * N, C}), upd = Tensor::empty({N * N, C});
        parcae_norm_(inj2, inj2);
        input_matrix_(inj2, upd);
        Tensor z2 = z.reshape({N * N, C});
        ops::add_mul(decay_rows, z2, upd);
        z = upd.reshape({N, N, C});
        emit("trunk.state" + std::to_string(loop), z);
        folding_trunk_.run(z);
        emit("trunk.z" + std::to_string(loop), z);
    }
    // ---- readout, coda, distogram ----
    Tensor pair = Tensor::empty({N, N, C});
    Tensor pair2 = pair.reshape({N * N, C});
    readout_(z.reshape({N * N, C}), pair2);
    coda_.run(pair);
    out.pair = pair;
    emit("trunk.pair", pair);
    Tensor sym = Tensor::empty({N, N, C});
    ops::copy(pair.permute({1, 0, 2}), sym);
    ops::add(sym, pair, sym);
    out.distogram = Tensor::empty({N, N, cfg.sampler.distogram_bins});
    Tensor d2 = out.distogram.reshape({N * N, cfg.sampler.distogram_bins});
    distogram_(sym.reshape({N * N, C}), d2);
    emit("trunk.distogram", out.distogram);
    return out;
}

}  // namespace bioinfer::esmfold2
