// Boltz-2's confidence module: re-embedding, pairformer stack, heads and aggregates (confidence.h).
#include "models/boltz2/confidence.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "bioinfer/error.h"
#include "ops/ops.h"

namespace bioinfer::boltz2 {
namespace {

constexpr int kProtein = 0, kNonpolymer = 3;  // boltz's const.chain_type_ids
constexpr int64_t kContactBins = 20;          // distogram bins counted as contact (< ~8 A)

// Bin centres of boltz's compute_aggregated_metric: torch.arange(0.5 w, end, w), w = end / n
// (evaluated in double, stored as fp32, as torch's arange does on the CPU).
std::vector<float> bin_centres(int64_t n, double end) {
    const double w = end / double(n);
    std::vector<float> c(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) c[size_t(k)] = float(0.5 * w + w * double(k));
    return c;
}

// softmax(logits (R, K)) . values (K) -> (R), logits left as they are.
Tensor expectation(const Tensor& logits, const std::vector<float>& values) {
    const int64_t K = logits.size(-1), R = logits.numel() / K;
    Tensor p = ops::contiguous(logits).reshape({R, K});
    ops::softmax(p, nullptr, nullptr);
    Tensor out = Tensor::empty({R});
    ops::bin_expectation(p, Tensor::of(values), out);
    return out;
}

Tensor linear_rows(const nn::Linear& lin, const Tensor& x) {
    Tensor y = Tensor::empty({x.size(0), lin.out_features()});
    lin(x, y);
    return y;
}

// logits (L * L, bins) of a head pair: intra where the tokens share a chain, inter elsewhere.
void chain_split_head(const nn::Linear& intra, const nn::Linear& inter, const Tensor& x,
                      const Tensor& same, const Tensor& diff, Tensor& out) {
    Tensor a = linear_rows(intra, x), b = linear_rows(inter, x);
    ops::scale_rows(a, same, a);
    ops::scale_rows(b, diff, b);
    ops::add(b, a, out);  // inter + intra, the reference's order
}

}  // namespace

ConfidenceModule ConfidenceModule::load(const io::ModelDir& m, const Config& cfg) {
    ConfidenceModule c;
    c.cfg = cfg;
    const std::string p = "confidence_module.";
    const int64_t cs = cfg.token_s, cz = cfg.token_z;
    c.s_inputs_norm = nn::LayerNorm::load(m, p + "s_inputs_norm", cs, 1e-5f);
    BI_CHECK(m.has(p + "s_norm.weight"), p, "no_update_s is not supported (no s_norm)");
    c.s_norm = nn::LayerNorm::load(m, p + "s_norm", cs, 1e-5f);
    c.z_norm = nn::LayerNorm::load(m, p + "z_norm", cz, 1e-5f);
    if (cfg.add_s_input_to_s) c.s_input_to_s = nn::Linear::load(m, p + "s_input_to_s", cs, cs, false);
    c.add_z_input_to_z = cfg.add_z_input_to_z;
    if (c.add_z_input_to_z) {
        Config pc = cfg;  // the confidence module's bond-type embedding exists iff its tensor does
        c.pair_inputs = PairInputEmbedding::load(m, p, pc);
    }
    c.s_to_z = nn::Linear::load(m, p + "s_to_z", cs, cz, false);
    c.s_to_z_transpose = nn::Linear::load(m, p + "s_to_z_transpose", cs, cz, false);
    if (cfg.add_s_to_z_prod) {
        c.s_to_z_prod_in1 = nn::Linear::load(m, p + "s_to_z_prod_in1", cs, cz, false);
        c.s_to_z_prod_in2 = nn::Linear::load(m, p + "s_to_z_prod_in2", cs, cz, false);
        c.s_to_z_prod_out = nn::Linear::load(m, p + "s_to_z_prod_out", cz, cz, false);
    }
    const int64_t nb = cfg.confidence_dist_bins;
    c.dist_embed = m.get_f32(p + "dist_bin_pairwise_embed.weight", {nb, cz});
    // The boundaries buffer when the checkpoint stores it, else linspace(2, max_dist, nb - 1).
    const Tensor bounds =
        m.has(p + "boundaries")
            ? m.get_f32(p + "boundaries", {nb - 1})
            : Tensor::of(nn::torch_linspace(2.0f, float(cfg.confidence_max_dist), nb - 1));
    c.bounds_sq = Tensor::empty({nb - 1});
    ops::mul(bounds, bounds, c.bounds_sq);
    c.pairformer = nn::PairformerStack::load(m, p + "pairformer_stack", cfg.confidence_blocks, cs,
                                             cz, cfg.confidence_heads, cfg.pairwise_head_width,
                                             cfg.pairwise_num_heads);
    const std::string h = p + "confidence_heads.";
    BI_CHECK(cfg.use_separate_heads && cfg.token_level_confidence, h,
             "only separate intra/inter-chain heads with token-level confidence are supported");
    c.pae_intra = nn::Linear::load(m, h + "to_pae_intra_logits", cz, cfg.num_pae_bins, false);
    c.pae_inter = nn::Linear::load(m, h + "to_pae_inter_logits", cz, cfg.num_pae_bins, false);
    c.pde_intra = nn::Linear::load(m, h + "to_pde_intra_logits", cz, cfg.num_pde_bins, false);
    c.pde_inter = nn::Linear::load(m, h + "to_pde_inter_logits", cz, cfg.num_pde_bins, false);
    c.to_plddt = nn::Linear::load(m, h + "to_plddt_logits", cs, cfg.num_plddt_bins, false);
    c.to_resolved = nn::Linear::load(m, h + "to_resolved_logits", cs, 2, false);
    return c;
}

std::vector<float> frame_mask(const Features& f, const Tensor& x) {
    const int64_t L = f.num_tokens(), A = x.size(0);
    const Tensor& a2t = f.at("atom_to_token");  // (A, L)
    BI_CHECK(a2t.size(0) == A && a2t.size(1) == L, "confidence frames",
             "atom_to_token: expected (", A, ", ", L, "), got ", shape_str(a2t.shape()));
    std::vector<float> mask(static_cast<size_t>(L));
    // host-side: the frames are three atoms per token picked by index bookkeeping; the mask is
    // a few vector operations per token on one sample's coordinates
    const float* xp = x.f32();
    const float* fi = f.at("frames_idx").f32();  // (L, 3) atom indices
    const float* asym = f.at("asym_id").f32();
    const float* pad = f.at("token_pad_mask").f32();
    const float* apad = f.at("atom_pad_mask").f32();
    // host-side: the chain types and the atom-to-token map, read for the same bookkeeping
    const float* mol = f.at("mol_type").f32();
    const float* a2tp = a2t.f32();
    std::vector<int64_t> frames(static_cast<size_t>(L * 3));
    for (int64_t k = 0; k < L * 3; ++k) frames[size_t(k)] = int64_t(std::lrint(fi[k]));
    // Each atom's token (atom_to_token is one-hot per real atom).
    std::vector<int64_t> atom_token(static_cast<size_t>(A), -1);
    for (int64_t a = 0; a < A; ++a)
        for (int64_t t = 0; t < L; ++t)
            if (a2tp[a * L + t] > 0.5f) atom_token[size_t(a)] = t;
    // Nonpolymer chains: each atom's frame is (nearest other, itself, second nearest) by
    // distance within its chain, as boltz's compute_frame_pred(inference=True) sets it.
    std::set<float> chain_ids(asym, asym + L);
    int64_t token_idx = 0, atom_idx = 0;
    for (const float id : chain_ids) {
        int64_t n_tok = 0;
        std::vector<int64_t> atoms;
        for (int64_t t = 0; t < L; ++t) n_tok += (asym[t] == id && pad[t] > 0) ? 1 : 0;
        for (int64_t a = 0; a < A; ++a)
            if (atom_token[size_t(a)] >= 0 && asym[atom_token[size_t(a)]] == id && apad[a] > 0)
                atoms.push_back(a);
        const int64_t n_atom = int64_t(atoms.size());
        if (int(std::lrint(mol[token_idx])) == kNonpolymer && n_atom >= 3) {
            for (int64_t i = 0; i < n_atom; ++i) {
                std::vector<float> d(static_cast<size_t>(n_atom));
                for (int64_t j = 0; j < n_atom; ++j) {
                    float s = 0;
                    for (int c = 0; c < 3; ++c) {
                        const float v = xp[atoms[size_t(i)] * 3 + c] - xp[atoms[size_t(j)] * 3 + c];
                        s += v * v;
                    }
                    d[size_t(j)] = std::sqrt(s);
                }
                std::vector<int64_t> order(static_cast<size_t>(n_atom));
                std::iota(order.begin(), order.end(), 0);
                std::stable_sort(order.begin(), order.end(),
                                 [&](int64_t p, int64_t q) { return d[size_t(p)] < d[size_t(q)]; });
                int64_t* fr = frames.data() + (token_idx + i) * 3;
                fr[0] = order[1] + atom_idx;
                fr[1] = order[0] + atom_idx;
                fr[2] = order[2] + atom_idx;
            }
        }
        token_idx += n_tok;
        atom_idx += n_atom;
    }
    for (int64_t t = 0; t < L; ++t) {
        const int64_t* fr = frames.data() + t * 3;
        float v1[3], v2[3], n1 = 0, n2 = 0, dot = 0;
        for (int c = 0; c < 3; ++c) {
            v1[c] = xp[fr[1] * 3 + c] - xp[fr[0] * 3 + c];
            v2[c] = xp[fr[1] * 3 + c] - xp[fr[2] * 3 + c];
            n1 += v1[c] * v1[c];
            n2 += v2[c] * v2[c];
        }
        n1 = std::sqrt(n1);
        n2 = std::sqrt(n2);
        for (int c = 0; c < 3; ++c) dot += (v1[c] / (n1 + 1e-6f)) * (v2[c] / (n2 + 1e-6f));
        const bool ok = std::fabs(dot) < 0.9063f && n1 > 1e-2f && n2 > 1e-2f;
        mask[size_t(t)] = ok ? pad[t] : 0.0f;
    }
    return mask;
}

namespace {

// The trunk's s and z re-embedded with the input terms: shared by every sample but the distance
// term.
struct Reembedded {
    Tensor s, z;  // (L, token_s), (L, L, token_z)
};

Reembedded reembed(const ConfidenceModule& m, const Features& f, const Tensor& s_inputs,
                   const Tensor& s, const Tensor& z) {
    const int64_t L = f.num_tokens(), Cs = m.cfg.token_s, Cz = m.cfg.token_z, LL = L * L;
    Tensor sin = Tensor::empty({L, Cs}), s_e = Tensor::empty({L, Cs});
    m.s_inputs_norm(s_inputs, sin);
    m.s_norm(s, s_e);
    if (m.s_input_to_s.w.defined()) m.s_input_to_s(sin, s_e, {.accumulate = true});
    Tensor z_e = Tensor::empty({L, L, Cz});
    Tensor z_e2 = z_e.reshape({LL, Cz});
    m.z_norm(z.reshape({LL, Cz}), z_e2);
    if (m.add_z_input_to_z) m.pair_inputs.add_to(f, z_e);
    {
        const Tensor a = linear_rows(m.s_to_z, sin), b = linear_rows(m.s_to_z_transpose, sin);
        ops::add_into(a.reshape({L, 1, Cz}).expand({L, L, Cz}), z_e);
        ops::add_into(b.reshape({1, L, Cz}).expand({L, L, Cz}), z_e);
    }
    if (m.s_to_z_prod_out.w.defined()) {
        const Tensor a = linear_rows(m.s_to_z_prod_in1, sin),
                     b = linear_rows(m.s_to_z_prod_in2, sin);
        const int64_t chunk = nn::default_pair_chunk(L, Cz);
        for (int64_t r0 = 0; r0 < L; r0 += chunk) {
            const int64_t r1 = std::min(L, r0 + chunk), r = r1 - r0;
            Tensor x = Tensor::empty({r, L, Cz}), y = Tensor::empty({r, L, Cz});
            ops::copy(a.narrow0(r0, r1).reshape({r, 1, Cz}).expand({r, L, Cz}), x);
            ops::copy(b.reshape({1, L, Cz}).expand({r, L, Cz}), y);
            ops::mul(x, y, x);
            Tensor dst = z_e.narrow0(r0, r1).reshape({r * L, Cz});
            m.s_to_z_prod_out(x.reshape({r * L, Cz}), dst, {.accumulate = true});
        }
    }
    return {s_e, z_e};
}

// The per-token and per-pair masks of the heads and aggregates (host-side bookkeeping).
struct TokenMasks {
    std::vector<float> same, diff;      // (L * L): tokens i and j in one chain, in two
    std::vector<float> pad, asym, mol;  // (L): token_pad_mask, asym_id, mol_type
};

TokenMasks token_masks(const Features& f, int64_t L) {
    const int64_t LL = L * L;
    TokenMasks m;
    m.same.resize(static_cast<size_t>(LL));
    m.diff.resize(static_cast<size_t>(LL));
    m.pad.resize(static_cast<size_t>(L));
    m.asym.resize(static_cast<size_t>(L));
    m.mol.resize(static_cast<size_t>(L));
    {
        // host-side: token features, L values each
        const float* a = f.at("asym_id").f32();
        const float* p = f.at("token_pad_mask").f32();
        const float* mt = f.at("mol_type").f32();
        for (int64_t i = 0; i < L; ++i) {
            m.asym[size_t(i)] = a[i];
            m.pad[size_t(i)] = p[i];
            m.mol[size_t(i)] = mt[i];
        }
    }
    for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < L; ++j) {
            m.same[size_t(i * L + j)] = m.asym[size_t(i)] == m.asym[size_t(j)] ? 1.0f : 0.0f;
            m.diff[size_t(i * L + j)] = 1.0f - m.same[size_t(i * L + j)];
        }
    return m;
}

// TM-score terms of the PAE bins' centres for the number of real tokens (fp32 as boltz).
std::vector<float> tm_values(const std::vector<float>& pad, const std::vector<float>& pae_centres) {
    float n_res = 0;
    for (float p : pad) n_res += p;
    std::vector<float> tm(pae_centres.size());
    const float d0 = 1.24f * std::pow(std::max(n_res, 19.0f) - 15.0f, float(1.0 / 3.0)) - 1.8f;
    for (size_t k = 0; k < tm.size(); ++k) {
        const float r = pae_centres[k] / d0;
        tm[k] = 1.0f / (1.0f + r * r);
    }
    return tm;
}

// The outputs for S samples of L tokens, allocated, with the chains (asym ids, ascending).
ConfidenceOutput allocate_outputs(const Config& cfg, int64_t S, int64_t L,
                                  const std::vector<float>& chain_ids) {
    ConfidenceOutput out;
    out.pae_logits = Tensor::empty({S, L, L, cfg.num_pae_bins});
    out.pde_logits = Tensor::empty({S, L, L, cfg.num_pde_bins});
    out.plddt_logits = Tensor::empty({S, L, cfg.num_plddt_bins});
    out.resolved_logits = Tensor::empty({S, L, 2});
    out.pae = Tensor::empty({S, L, L});
    out.pde = Tensor::empty({S, L, L});
    out.plddt = Tensor::empty({S, L});
    for (float c : chain_ids) out.chains.push_back(int64_t(std::lrint(c)));
    return out;
}

// One sample's heads' results the aggregates read.
struct SampleHeads {
    Tensor rep;    // (1, L, 3) representative-atom coordinates
    Tensor plddt;  // (L) sample k of out.plddt
    Tensor pde;    // (L * L) sample k of out.pde
    Tensor tm;     // (L * L) expected TM term
};

// Sample k (of x_pred) through the module: its representative-atom distances binned and
// embedded into z, its own pairformer stack, the heads into out's sample k, and their
// expectations.
SampleHeads run_sample(const ConfidenceModule& m, const Features& f, const Reembedded& e,
                       const Tensor& x_pred, int64_t k, const Tensor& same_t, const Tensor& diff_t,
                       const std::vector<float>& pae_centres, const std::vector<float>& tm_terms,
                       const Tap& tap, ConfidenceOutput& out) {
    const int64_t L = f.num_tokens(), Cz = m.cfg.token_z, A = x_pred.size(1), LL = L * L;
    const int64_t Bpae = m.cfg.num_pae_bins, Bpde = m.cfg.num_pde_bins, Bpl = m.cfg.num_plddt_bins;
    const std::string pre = std::to_string(k) + ".";
    // Representative-atom distances, binned, embedded.
    const Tensor t2r = f.at("token_to_rep_atom").reshape({1, L, A});
    const Tensor xk = x_pred.narrow0(k, k + 1);  // (1, A, 3)
    SampleHeads h;
    h.rep = Tensor::empty({1, L, 3});
    ops::bmm(t2r, xk, h.rep);
    Tensor bins = Tensor::empty({L, L}, DType::I32);
    ops::distance_bins(h.rep.reshape({L, 3}), m.bounds_sq, bins);
    Tensor zk = e.z.clone(), sk = e.s.clone();
    Tensor zk2 = zk.reshape({LL, Cz});
    ops::embedding(bins.reshape({LL}), m.dist_embed, zk2, true);
    if (tap) {
        tap(pre + "s_embed", sk);
        tap(pre + "z_embed", zk);
    }
    m.pairformer.run(sk, zk);
    if (tap) {
        tap(pre + "s_stack", sk);
        tap(pre + "z_stack", zk);
    }
    // Heads.
    Tensor pae_l = out.pae_logits.narrow0(k, k + 1).reshape({LL, Bpae});
    chain_split_head(m.pae_intra, m.pae_inter, zk2, same_t, diff_t, pae_l);
    Tensor zz = Tensor::empty({L, L, Cz});
    ops::copy(zk, zz);
    ops::add_into(zk.permute({1, 0, 2}), zz);
    Tensor pde_l = out.pde_logits.narrow0(k, k + 1).reshape({LL, Bpde});
    chain_split_head(m.pde_intra, m.pde_inter, zz.reshape({LL, Cz}), same_t, diff_t, pde_l);
    Tensor pl = out.plddt_logits.narrow0(k, k + 1).reshape({L, Bpl});
    m.to_plddt(sk, pl);
    Tensor rl = out.resolved_logits.narrow0(k, k + 1).reshape({L, 2});
    m.to_resolved(sk, rl);
    // Expectations.
    Tensor pae_k = out.pae.narrow0(k, k + 1).reshape({LL});
    ops::copy(expectation(pae_l, pae_centres), pae_k);
    h.pde = out.pde.narrow0(k, k + 1).reshape({LL});
    ops::copy(expectation(pde_l, bin_centres(Bpde, 32.0)), h.pde);
    h.plddt = out.plddt.narrow0(k, k + 1).reshape({L});
    ops::copy(expectation(pl, bin_centres(Bpl, 1.0)), h.plddt);
    h.tm = expectation(pae_l, tm_terms);
    return h;
}

// The aggregates boltz reports, one value per sample each; pair_chains (n_chain, n_chain, S).
struct Aggregates {
    std::vector<float> complex_plddt, complex_iplddt, complex_pde, complex_ipde, ptm, iptm,
        ligand_iptm, protein_iptm, pair_chains;
};

// Sample k's aggregates: masked sums over L or L^2 values of this sample (maski: its pTM frame
// mask; prob_contact: the trunk distogram's contact probability).
void aggregate_sample(int64_t k, int64_t S, const TokenMasks& masks, const SampleHeads& h,
                      const Tensor& prob_contact, const std::vector<float>& maski,
                      const std::vector<float>& chain_ids, Aggregates& agg) {
    const int64_t L = int64_t(masks.pad.size()), NC = int64_t(chain_ids.size());
    const std::vector<float>& pad = masks.pad;
    const std::vector<float>& asym = masks.asym;
    const std::vector<float>& mol = masks.mol;
    const std::vector<float>& diff = masks.diff;
    // host-side: scalar reductions of the heads' (L, L) outputs and the rep-atom distances,
    // exactly as boltz's ConfidenceHeads / compute_ptms form them
    const float* pl_p = h.plddt.f32();
    const float* pde_p = h.pde.f32();
    const float* tm_p = h.tm.f32();
    const float* pc_p = prob_contact.f32();
    const float* rp = h.rep.f32();
    std::vector<float> lig(static_cast<size_t>(L)), prot(static_cast<size_t>(L));
    for (int64_t i = 0; i < L; ++i) {
        lig[size_t(i)] = int(std::lrint(mol[size_t(i)])) == kNonpolymer ? 1.0f : 0.0f;
        prot[size_t(i)] = int(std::lrint(mol[size_t(i)])) == kProtein ? 1.0f : 0.0f;
    }
    // complex pLDDT and interface-weighted pLDDT (contacts: rep-atom distance < 8 A)
    float num = 0, den = 0, inum = 0, iden = 0;
    for (int64_t i = 0; i < L; ++i) {
        float interface = 0;
        for (int64_t j = 0; j < L; ++j) {
            float d2 = 0;
            for (int c = 0; c < 3; ++c) {
                const float v = rp[i * 3 + c] - rp[j * 3 + c];
                d2 += v * v;
            }
            const float contact = std::sqrt(d2) < 8.0f ? 1.0f : 0.0f;
            interface =
                std::max(interface, contact * diff[size_t(i * L + j)] * (1 - lig[size_t(i)]));
        }
        const float non_interface = (1 - interface) * (1 - lig[size_t(i)]);
        const float w = lig[size_t(i)] * 20 + interface * 10 + non_interface * 1;
        num += pl_p[i] * pad[size_t(i)];
        den += pad[size_t(i)];
        inum += pl_p[i] * pad[size_t(i)] * w;
        iden += pad[size_t(i)] * w;
    }
    agg.complex_plddt.push_back(num / den);
    agg.complex_iplddt.push_back(inum / iden);
    // complex PDE weighted by the trunk's contact probability, off the diagonal
    float pnum = 0, pden = 0, ipnum = 0, ipden = 0;
    for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < L; ++j) {
            const size_t p = size_t(i * L + j);
            const float wgt = pad[size_t(i)] * pad[size_t(j)] * (i == j ? 0.0f : 1.0f) * pc_p[p];
            pnum += pde_p[p] * wgt;
            pden += wgt;
            ipnum += pde_p[p] * wgt * diff[p];
            ipden += wgt * diff[p];
        }
    agg.complex_pde.push_back(pnum / pden);
    agg.complex_ipde.push_back(ipnum / (ipden + 1e-5f));
    // pTM family: max over frames i of the masked mean over j of the TM term
    const auto best = [&](const auto& pair_mask) {
        float top = -INFINITY;
        for (int64_t i = 0; i < L; ++i) {
            float n = 0, d = 0;
            for (int64_t j = 0; j < L; ++j) {
                const float mk =
                    maski[size_t(i)] * pad[size_t(i)] * pad[size_t(j)] * pair_mask(i, j);
                n += tm_p[i * L + j] * mk;
                d += mk;
            }
            top = std::max(top, n / (d + 1e-5f));
        }
        return top;
    };
    agg.ptm.push_back(best([](int64_t, int64_t) { return 1.0f; }));
    agg.iptm.push_back(best([&](int64_t i, int64_t j) { return diff[size_t(i * L + j)]; }));
    agg.ligand_iptm.push_back(best([&](int64_t i, int64_t j) {
        return diff[size_t(i * L + j)] *
               (lig[size_t(i)] * prot[size_t(j)] + prot[size_t(i)] * lig[size_t(j)]);
    }));
    agg.protein_iptm.push_back(best([&](int64_t i, int64_t j) {
        return diff[size_t(i * L + j)] * prot[size_t(i)] * prot[size_t(j)];
    }));
    for (int64_t a = 0; a < NC; ++a)
        for (int64_t b = 0; b < NC; ++b)
            agg.pair_chains[size_t((a * NC + b) * S + k)] = best([&](int64_t i, int64_t j) {
                return (asym[size_t(j)] == chain_ids[size_t(a)] ? 1.0f : 0.0f) *
                       (asym[size_t(i)] == chain_ids[size_t(b)] ? 1.0f : 0.0f);
            });
}

}  // namespace

ConfidenceOutput ConfidenceModule::run(const Features& f, const Tensor& s_inputs, const Tensor& s,
                                       const Tensor& z, const Tensor& x_pred,
                                       const Tensor& pdistogram, const Tap& tap) const {
    const int64_t L = f.num_tokens();
    const int64_t S = x_pred.size(0), A = x_pred.size(1), LL = L * L;
    BI_CHECK(x_pred.ndim() == 3 && x_pred.size(2) == 3 && A == f.num_atoms(), "boltz2 confidence",
             "x_pred: expected (samples, ", f.num_atoms(), ", 3), got ", shape_str(x_pred.shape()));
    BI_CHECK(s.size(0) == L && z.size(0) == L && s_inputs.size(0) == L, "boltz2 confidence",
             "s, z and s_inputs must cover the ", L, " tokens");
    BI_CHECK(pdistogram.numel() == LL * cfg.num_bins, "boltz2 confidence", "pdistogram: expected (",
             L, ", ", L, ", ", cfg.num_bins, "), got ", shape_str(pdistogram.shape()));
    const Reembedded e = reembed(*this, f, s_inputs, s, z);
    const TokenMasks masks = token_masks(f, L);
    const Tensor same_t = Tensor::of(masks.same), diff_t = Tensor::of(masks.diff);
    // The trunk distogram's contact probability (the first 20 bins).
    std::vector<float> first_bins(static_cast<size_t>(cfg.num_bins), 0.0f);
    std::fill_n(first_bins.begin(), std::min<int64_t>(kContactBins, cfg.num_bins), 1.0f);
    const Tensor prob_contact = expectation(pdistogram.reshape({LL, cfg.num_bins}), first_bins);

    std::set<float> chain_set(masks.asym.begin(), masks.asym.end());
    const std::vector<float> chain_ids(chain_set.begin(), chain_set.end());
    ConfidenceOutput out = allocate_outputs(cfg, S, L, chain_ids);
    const int64_t NC = int64_t(chain_ids.size());
    Aggregates agg;
    agg.pair_chains.resize(static_cast<size_t>(NC * NC * S));
    const std::vector<float> pae_centres = bin_centres(cfg.num_pae_bins, 32.0);
    const std::vector<float> tm_terms = tm_values(masks.pad, pae_centres);
    for (int64_t k = 0; k < S; ++k) {
        const SampleHeads h =
            run_sample(*this, f, e, x_pred, k, same_t, diff_t, pae_centres, tm_terms, tap, out);
        const std::vector<float> maski = frame_mask(f, x_pred.narrow0(k, k + 1).reshape({A, 3}));
        aggregate_sample(k, S, masks, h, prob_contact, maski, chain_ids, agg);
    }
    out.complex_plddt = Tensor::of(agg.complex_plddt);
    out.complex_iplddt = Tensor::of(agg.complex_iplddt);
    out.complex_pde = Tensor::of(agg.complex_pde);
    out.complex_ipde = Tensor::of(agg.complex_ipde);
    out.ptm = Tensor::of(agg.ptm);
    out.iptm = Tensor::of(agg.iptm);
    out.ligand_iptm = Tensor::of(agg.ligand_iptm);
    out.protein_iptm = Tensor::of(agg.protein_iptm);
    out.pair_chains_iptm = Tensor::of(agg.pair_chains, {NC, NC, S});
    return out;
}

}  // namespace bioinfer::boltz2
