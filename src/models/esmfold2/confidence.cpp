// ESMFold2's confidence head: see confidence.h.
#include "models/esmfold2/confidence.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "bioinfer/error.h"
#include "nn/heads.h"
#include "ops/ops.h"

namespace bioinfer::esmfold2 {
namespace {

constexpr const char* kWhere = "esmfold2 confidence";

// Midpoints of torch.linspace(start, end, bins + 1) (fp32), the categorical means' values.
std::vector<float> bin_centers(float start, float end, int64_t bins) {
    const std::vector<float> e = nn::torch_linspace(start, end, bins + 1);
    std::vector<float> c(static_cast<size_t>(bins));
    for (int64_t k = 0; k < bins; ++k) c[size_t(k)] = (e[size_t(k)] + e[size_t(k + 1)]) / 2;
    return c;
}

// Expected value over bins of softmax(logits (R, K)) -> (R).
Tensor expectation(const Tensor& logits, const std::vector<float>& centers) {
    const int64_t K = logits.size(-1), R = logits.numel() / K;
    Tensor p = logits.to_f32().clone().reshape({R, K});
    ops::softmax(p, nullptr, nullptr);
    Tensor e = Tensor::empty({R});
    ops::bin_expectation(p, Tensor::of(centers, {K}), e);
    return e;
}

// Each atom's index within its token (atoms of a token are contiguous; padding atoms count on
// from token 0's), clamped to max - 1: transformers' _compute_intra_token_idx.
std::vector<int32_t> intra_token_index(const std::vector<int32_t>& atom_token, int64_t max) {
    std::vector<int32_t> out(atom_token.size());
    int64_t start = 0;
    for (size_t a = 0; a < atom_token.size(); ++a) {
        if (a == 0 || atom_token[a] != atom_token[a - 1]) start = int64_t(a);
        out[a] = int32_t(std::min<int64_t>(int64_t(a) - start, max - 1));
    }
    return out;
}

}  // namespace

ConfidenceHead ConfidenceHead::load(const io::ModelDir& m, const Config& cfg) {
    ConfidenceHead h;
    h.cfg = cfg;
    const auto& k = cfg.confidence;
    const int64_t C = cfg.c_z, Cs = cfg.c_s, Ci = cfg.c_inputs, T = cfg.max_atoms_per_token;
    const std::string p = "confidence_head";
    const Tensor b = m.get_f32(p + ".boundaries", {k.distogram_bins - 1});
    // host-side: the bin boundaries, read once at load
    h.boundaries.assign(b.f32(), b.f32() + b.numel());
    h.dist_embed = m.get_f32(p + ".dist_bin_pairwise_embed.weight", {k.distogram_bins, C});
    const std::string e = p + ".input_embedder";
    h.s_norm = nn::LayerNorm::load(m, e + ".single_inputs_norm", Ci, 1e-5f);
    h.z_norm = nn::LayerNorm::load(m, e + ".pair_norm", C, 1e-5f);
    h.s_to_z = nn::Linear::load(m, e + ".single_to_pair", Ci, C, false);
    h.s_to_z_t = nn::Linear::load(m, e + ".single_to_pair_transpose", Ci, C, false);
    h.prod_in1 = nn::Linear::load(m, e + ".single_to_pair_prod_in1", Ci, C, false);
    h.prod_in2 = nn::Linear::load(m, e + ".single_to_pair_prod_in2", Ci, C, false);
    h.prod_out = nn::Linear::load(m, e + ".single_to_pair_prod_out", C, C, false);
    h.stack = nn::PairformerNoSeqStack::load(m, p + ".folding_trunk", k.layers, C, cfg.pair_ff,
                                             nn::PairformerNames::esmfold2());
    h.pool_score = nn::Linear::load(m, p + ".row_attention_pooling.attn_proj", C, 1, false);
    h.pool_out = nn::Linear::load(m, p + ".row_attention_pooling.out_proj", C, Cs, false);
    h.plddt_ln = nn::LayerNorm::load(m, p + ".plddt_layernorm", Cs, 1e-5f);
    h.resolved_ln = nn::LayerNorm::load(m, p + ".resolved_layernorm", Cs, 1e-5f);
    h.pae_ln = nn::LayerNorm::load(m, p + ".pae_layernorm", C, 1e-5f);
    h.pde_ln = nn::LayerNorm::load(m, p + ".pde_layernorm", C, 1e-5f);
    // the per-position weights (T, c_s, K) as one linear c_s -> T * K, packed once: logits for
    // every position, then each atom's own
    const auto position_linear = [&](const std::string& name, int64_t K) {
        const Tensor w = m.get_f32(p + "." + name, {T, Cs, K});
        Tensor wt = Tensor::empty({T, K, Cs});
        ops::copy(w.permute({0, 2, 1}), wt);
        return nn::Linear::from(wt.reshape({T * K, Cs}), Tensor());
    };
    h.plddt_lin = position_linear("plddt_weight", k.plddt_bins);
    h.resolved_lin = position_linear("resolved_weight", 2);
    h.pae_head = nn::Linear::load(m, p + ".pae_head", C, k.pae_bins, false);
    h.pde_head = nn::Linear::load(m, p + ".pde_head", C, k.pde_bins, false);
    return h;
}

namespace {

// The sample-independent pair: LN(z) + relpos + bonds + a_i + b_j + prod_out(in1_i * in2_j),
// (N, N, C).
Tensor sample_independent_pair(const ConfidenceHead& h, const TrunkOutput& trunk, int64_t N) {
    const int64_t C = h.cfg.c_z;
    Tensor base = Tensor::empty({N, N, C});
    Tensor base2 = base.reshape({N * N, C});
    h.z_norm(trunk.pair.reshape({N * N, C}), base2);
    ops::add(base2, trunk.relpos.reshape({N * N, C}), base2);
    ops::add(base2, trunk.bonds.reshape({N * N, C}), base2);
    Tensor sn = Tensor::empty({N, h.cfg.c_inputs});
    h.s_norm(trunk.s_inputs, sn);
    Tensor a = Tensor::empty({N, C}), bt = Tensor::empty({N, C}), p1 = Tensor::empty({N, C}),
           p2 = Tensor::empty({N, C});
    h.s_to_z(sn, a);
    h.s_to_z_t(sn, bt);
    h.prod_in1(sn, p1);
    h.prod_in2(sn, p2);
    ops::add_into(a.reshape({N, 1, C}).expand({N, N, C}), base);
    ops::add_into(bt.reshape({1, N, C}).expand({N, N, C}), base);
    Tensor x = Tensor::empty({N, C});
    for (int64_t i = 0; i < N; ++i) {
        ops::mul(p2, p1.narrow0(i, i + 1).expand({N, C}), x);
        Tensor rows = base2.narrow0(i * N, (i + 1) * N);
        h.prod_out(x, rows, {.accumulate = true});
    }
    return base;
}

// Each atom's token (padding atoms: token 0) and the row a * T + intra[a] of (A * T, bins) that
// holds its position's logits.
struct AtomRows {
    std::vector<int32_t> atom_token;
    Tensor atom_token_t, pick;
};
AtomRows atom_rows(const Inputs& in, int64_t A, int64_t T) {
    AtomRows r;
    r.atom_token.assign(in.atoms.atom_to_token.begin(), in.atoms.atom_to_token.end());
    for (int64_t at = in.atoms.real_atoms; at < A; ++at) r.atom_token[size_t(at)] = 0;
    const std::vector<int32_t> intra = intra_token_index(r.atom_token, T);
    std::vector<int32_t> pick(static_cast<size_t>(A));
    for (int64_t at = 0; at < A; ++at) pick[size_t(at)] = int32_t(at * T + intra[size_t(at)]);
    r.pick = Tensor::of(pick, {A});
    r.atom_token_t = Tensor::of(r.atom_token, {A});
    return r;
}

// host-side: the representative atoms' N^2 distances (exact, as torch.cdist without the matmul
// form) and their distance bins, for one sample's coordinates xs (A, 3).
void rep_distances(const ConfidenceHead& h, const Inputs& in, const float* xs, int64_t N,
                   std::vector<float>& dist, std::vector<int32_t>& bins) {
    dist.assign(static_cast<size_t>(N * N), 0.f);
    bins.assign(static_cast<size_t>(N * N), 0);
    for (int64_t i = 0; i < N; ++i)
        for (int64_t j = 0; j < N; ++j) {
            const float* xi = xs + in.rep_atom[size_t(i)] * 3;
            const float* xj = xs + in.rep_atom[size_t(j)] * 3;
            float d2 = 0.f;
            for (int e = 0; e < 3; ++e) d2 += (xi[e] - xj[e]) * (xi[e] - xj[e]);
            const float d = std::sqrt(d2);
            dist[size_t(i * N + j)] = d;
            int32_t k = 0;
            for (float bd : h.boundaries) k += d > bd ? 1 : 0;
            bins[size_t(i * N + j)] = k;
        }
}

// One sample's pair (the base with its distance bins embedded, then the stack's update added)
// and its single by row attention pooling: single_i = out_proj(sum_j softmax_j(score_ij) pair_ij).
void sample_pair_and_single(const ConfidenceHead& h, const Tensor& base,
                            const std::vector<int32_t>& bins, int64_t N, Tensor& pair,
                            Tensor& single) {
    const int64_t C = h.cfg.c_z;
    pair = base.clone();
    Tensor pair2 = pair.reshape({N * N, C});
    ops::embedding(Tensor::of(bins, {N * N}), h.dist_embed, pair2, /*accumulate=*/true);
    Tensor upd = pair.clone();
    h.stack.run(upd);
    ops::add(pair2, upd.reshape({N * N, C}), pair2);
    Tensor score = Tensor::empty({N * N, 1});
    h.pool_score(pair2, score);
    Tensor w = score.reshape({N, N});
    ops::softmax(w, nullptr, nullptr);
    Tensor pooled = Tensor::empty({N, 1, C});
    ops::bmm(w.reshape({N, 1, N}), pair, pooled);
    single = Tensor::empty({N, h.cfg.c_s});
    h.pool_out(pooled.reshape({N, C}), single);
}

// host-side: sample s's per-token pLDDT (mean over its real atoms; at its representative atom)
// and the complex pLDDT and interface pLDDT from the A per-atom values p.
void token_plddt(const Inputs& in, const std::vector<int32_t>& atom_token,
                 const std::vector<float>& dist, const float* p, int64_t s, int64_t N, int64_t A,
                 float eps, ConfidenceOutput& out) {
    std::vector<float> sum(static_cast<size_t>(N), 0.f), cnt(static_cast<size_t>(N), 0.f);
    std::vector<float> lig(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i) lig[size_t(i)] = in.mol_type[size_t(i)] == 3 ? 1.f : 0.f;
    std::vector<float> iface(static_cast<size_t>(N), 0.f);
    for (int64_t i = 0; i < N; ++i)
        for (int64_t j = 0; j < N; ++j) {
            const float v = (dist[size_t(i * N + j)] < 8.f ? 1.f : 0.f) *
                            (in.asym_id[size_t(i)] != in.asym_id[size_t(j)] ? 1.f : 0.f) *
                            (1.f - lig[size_t(i)]);
            iface[size_t(i)] = std::max(iface[size_t(i)], v);
        }
    float isum = 0.f, iw = 0.f, csum = 0.f, cw = 0.f;
    for (int64_t at = 0; at < A; ++at) {
        const float m = at < in.atoms.real_atoms ? 1.f : 0.f;
        const int32_t t = atom_token[size_t(at)];
        sum[size_t(t)] += p[at] * m;
        cnt[size_t(t)] += m;
        csum += p[at] * m;
        cw += m;
        const float wgt = m * (lig[size_t(t)] != 0.f ? 2.f : iface[size_t(t)]);
        isum += p[at] * wgt;
        iw += wgt;
    }
    // host-side: the per-token values into the output tables
    for (int64_t i = 0; i < N; ++i) {
        out.plddt.f32()[s * N + i] = sum[size_t(i)] / std::max(cnt[size_t(i)], 1e-6f);
        out.plddt_ca.f32()[s * N + i] = p[in.rep_atom[size_t(i)]];
    }
    out.complex_plddt.push_back(csum / (cw + eps));
    out.complex_iplddt.push_back(isum / (iw + eps));
}

// Sample s's pTM, ipTM and chain-pair ipTM from its PAE logits (N * N, bins).
void tm_scores(const Inputs& in, const Tensor& pae_l, int64_t s, int64_t N, int32_t chains,
               float eps, ConfidenceOutput& out) {
    const int64_t Kp = pae_l.size(1);
    const float width = 32.0f / float(Kp);
    const float d0 = 1.24f * std::cbrt(float(std::max<int64_t>(N, 19)) - 15.f) - 1.8f;
    std::vector<float> tm_bin(static_cast<size_t>(Kp));
    for (int64_t k = 0; k < Kp; ++k) {
        const float c = float(0.5 * width + double(k) * width);
        tm_bin[size_t(k)] = 1.f / (1.f + (c / d0) * (c / d0));
    }
    const Tensor tm = expectation(pae_l, tm_bin);
    // host-side: N^2 row means of the expected TM term
    const float* tv = tm.f32();
    float ptm = -std::numeric_limits<float>::infinity(), iptm = ptm;
    for (int64_t i = 0; i < N; ++i) {
        float r = 0, rn = 0, ri = 0, rin = 0;
        for (int64_t j = 0; j < N; ++j) {
            r += tv[i * N + j];
            rn += 1.f;
            if (in.asym_id[size_t(i)] != in.asym_id[size_t(j)]) {
                ri += tv[i * N + j];
                rin += 1.f;
            }
        }
        ptm = std::max(ptm, r / (rn + eps));
        iptm = std::max(iptm, ri / (rin + eps));
    }
    out.ptm.push_back(ptm);
    out.iptm.push_back(iptm);
    for (int32_t c1 = 0; c1 < chains; ++c1) {
        float n1c = 0;
        for (int32_t v : in.asym_id) n1c += v == c1 ? 1.f : 0.f;
        if (n1c == 0) continue;
        std::vector<float> avg(static_cast<size_t>(N));
        for (int64_t i = 0; i < N; ++i) {
            float r = 0;
            for (int64_t j = 0; j < N; ++j)
                if (in.asym_id[size_t(j)] == c1) r += tv[i * N + j];
            avg[size_t(i)] = r / (n1c + eps);
        }
        // host-side: the chain pair's best row mean
        for (int32_t c2 = 0; c2 < chains; ++c2) {
            float best = -std::numeric_limits<float>::infinity();
            for (int64_t i = 0; i < N; ++i)
                if (in.asym_id[size_t(i)] == c2) best = std::max(best, avg[size_t(i)]);
            out.pair_chains_iptm.f32()[(s * chains + c1) * chains + c2] = std::max(best, 0.f);
        }
    }
}

}  // namespace

ConfidenceOutput ConfidenceHead::run(const Inputs& in, const TrunkOutput& trunk,
                                     const Tensor& coords_in, const Tap& tap) const {
    const auto& kc = cfg.confidence;
    const int64_t N = in.tokens, C = cfg.c_z, Cs = cfg.c_s, A = in.atoms.atoms;
    const int64_t S = coords_in.size(0), T = cfg.max_atoms_per_token;
    BI_CHECK(coords_in.shape() == (Shape{S, A, 3}), kWhere, "coordinates ",
             shape_str(coords_in.shape()), ": expected (S, ", A, ", 3)");
    const Tensor coords = coords_in.to_f32();
    const float eps = float(kc.eps);
    const Tensor base = sample_independent_pair(*this, trunk, N);

    const std::vector<float> plddt_c = bin_centers(0.f, 1.f, kc.plddt_bins);
    const std::vector<float> pae_c = bin_centers(0.f, 32.f, kc.pae_bins);
    const std::vector<float> pde_c = bin_centers(0.f, 32.f, kc.pde_bins);
    const AtomRows rows = atom_rows(in, A, T);
    int32_t chains = 0;
    for (int32_t v : in.asym_id) chains = std::max(chains, v + 1);

    ConfidenceOutput out;
    const int64_t Bp = kc.plddt_bins;
    out.plddt_logits = Tensor::empty({S, A, Bp});
    out.resolved_logits = Tensor::empty({S, A, 2});
    out.plddt_per_atom = Tensor::empty({S, A});
    out.plddt = Tensor::empty({S, N});
    out.plddt_ca = Tensor::empty({S, N});
    out.pae_logits = Tensor::empty({S, N, N, kc.pae_bins});
    out.pde_logits = Tensor::empty({S, N, N, kc.pde_bins});
    out.pae = Tensor::empty({S, N, N});
    out.pde = Tensor::empty({S, N, N});
    out.pair_chains_iptm = Tensor::zeros({S, chains, chains});
    std::vector<float> dist;
    std::vector<int32_t> bins;
    for (int64_t s = 0; s < S; ++s) {
        // host-side: the sample's N^2 representative distances and bins (rep_distances)
        rep_distances(*this, in, coords.f32() + s * A * 3, N, dist, bins);
        Tensor pair, single;
        sample_pair_and_single(*this, base, bins, N, pair, single);
        const Tensor pair2 = pair.reshape({N * N, C});
        if (tap) tap("conf.pair." + std::to_string(s), pair);
        if (tap) tap("conf.single." + std::to_string(s), single);

        // per-atom logits from the atom's token's single and its position's weights
        Tensor at_single = Tensor::empty({A, Cs});
        ops::embedding(rows.atom_token_t, single, at_single);
        const auto atom_logits = [&](const nn::LayerNorm& ln, const nn::Linear& lin, int64_t K,
                                     Tensor& dst) {
            Tensor n = Tensor::empty({A, Cs}), all = Tensor::empty({A, T * K});
            ln(at_single, n);
            lin(n, all);
            ops::embedding(rows.pick, all.reshape({A * T, K}), dst);
        };
        Tensor pl = out.plddt_logits.narrow0(s, s + 1).reshape({A, Bp});
        atom_logits(plddt_ln, plddt_lin, Bp, pl);
        Tensor rl = out.resolved_logits.narrow0(s, s + 1).reshape({A, 2});
        atom_logits(resolved_ln, resolved_lin, 2, rl);
        const Tensor pa = expectation(pl, plddt_c);
        Tensor pa_dst = out.plddt_per_atom.narrow0(s, s + 1).reshape({A});
        ops::copy(pa, pa_dst);
        // host-side: per-token and complex summaries of the A per-atom values (token_plddt)
        token_plddt(in, rows.atom_token, dist, pa.f32(), s, N, A, eps, out);

        // PAE and PDE
        Tensor pae_l = out.pae_logits.narrow0(s, s + 1).reshape({N * N, kc.pae_bins});
        Tensor pde_l = out.pde_logits.narrow0(s, s + 1).reshape({N * N, kc.pde_bins});
        Tensor n1 = Tensor::empty({N * N, C});
        pae_ln(pair2, n1);
        pae_head(n1, pae_l);
        pde_ln(pair2, n1);
        pde_head(n1, pde_l);
        Tensor pae_dst = out.pae.narrow0(s, s + 1).reshape({N * N});
        Tensor pde_dst = out.pde.narrow0(s, s + 1).reshape({N * N});
        ops::copy(expectation(pae_l, pae_c), pae_dst);
        ops::copy(expectation(pde_l, pde_c), pde_dst);
        tm_scores(in, pae_l, s, N, chains, eps, out);
    }
    return out;
}

}  // namespace bioinfer::esmfold2
