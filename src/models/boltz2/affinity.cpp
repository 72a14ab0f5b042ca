// Boltz-2's affinity module: see affinity.h.
#include "models/boltz2/affinity.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "bioinfer/error.h"
#include "ops/ops.h"

namespace bioinfer::boltz2 {
namespace {

constexpr const char* kWhere = "boltz2 affinity";
constexpr int kProtein = 0;  // const.chain_type_ids["PROTEIN"]

int64_t rows_of(const io::ModelDir& m, const std::string& name) {
    return m.get_raw(name).size(0);
}

}  // namespace

std::vector<int64_t> affinity_crop(const std::vector<CropToken>& tokens, const CropLimits& lim) {
    const int64_t n = int64_t(tokens.size());
    BI_CHECK(n > 0, kWhere, "crop: no tokens");
    std::vector<int64_t> binders;
    for (int64_t i = 0; i < n; ++i)
        if (tokens[size_t(i)].binder) binders.push_back(i);
    BI_CHECK(!binders.empty(), kWhere, "crop: no binder token");
    // float32 as numpy computes it on the float32 coordinates: sum of squares, sqrt, min
    std::vector<float> dist(size_t(n), INFINITY);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t b : binders) {
            float s = 0;
            for (int c = 0; c < 3; ++c) {
                const float v = tokens[size_t(i)].center[c] - tokens[size_t(b)].center[c];
                s += v * v;
            }
            dist[size_t(i)] = std::min(dist[size_t(i)], std::sqrt(s));
        }
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return dist[size_t(a)] < dist[size_t(b)]; });
    const int nonpolymer = 3;  // const.chain_type_ids["NONPOLYMER"]
    std::set<int64_t> cropped, receptor;
    int64_t atoms = 0;
    for (int64_t idx : order) {
        const CropToken& t = tokens[size_t(idx)];
        std::vector<int64_t> chain;
        for (int64_t i = 0; i < n; ++i)
            if (tokens[size_t(i)].asym_id == t.asym_id) chain.push_back(i);
        std::vector<int64_t> hood;
        if (int64_t(chain.size()) <= lim.neighborhood) {
            hood = chain;
        } else {
            // the residues [r - k, r + k] for the smallest k giving `neighborhood` tokens, k <= the
            // neighbourhood itself
            for (int64_t k = 0; k <= lim.neighborhood; ++k) {
                hood.clear();
                for (int64_t i : chain) {
                    const int r = tokens[size_t(i)].res_idx;
                    if (r >= t.res_idx - k && r <= t.res_idx + k) hood.push_back(i);
                }
                if (int64_t(hood.size()) >= lim.neighborhood) break;
            }
        }
        std::vector<int64_t> fresh;
        int64_t fresh_atoms = 0, fresh_receptor = 0;
        for (int64_t i : hood)
            if (!cropped.count(i)) {
                fresh.push_back(i);
                fresh_atoms += tokens[size_t(i)].atoms;
                if (tokens[size_t(i)].mol_type != nonpolymer && !receptor.count(i)) ++fresh_receptor;
            }
        if (int64_t(fresh.size()) > lim.max_tokens - int64_t(cropped.size()) ||
            atoms + fresh_atoms > lim.max_atoms ||
            int64_t(receptor.size()) + fresh_receptor > lim.max_receptor)
            break;
        for (int64_t i : fresh) {
            cropped.insert(i);
            if (tokens[size_t(i)].mol_type != nonpolymer) receptor.insert(i);
        }
        atoms += fresh_atoms;
    }
    return std::vector<int64_t>(cropped.begin(), cropped.end());
}

Tensor affinity_pair_mask(const Features& f) {
    const int64_t N = f.num_tokens();
    const Tensor mol = f.at("mol_type").to_f32(), aff = f.at("affinity_token_mask").to_f32(),
                 pad = f.at("token_pad_mask").to_f32();
    // host-side: (N, N) 0/1 from two token masks
    std::vector<float> rec(static_cast<size_t>(N)), lig(static_cast<size_t>(N)),
        mask(static_cast<size_t>(N * N));
    for (int64_t i = 0; i < N; ++i) {
        rec[size_t(i)] = int(std::lrint(mol.f32()[i])) == kProtein && pad.f32()[i] > 0 ? 1.f : 0.f;
        lig[size_t(i)] = aff.f32()[i] != 0 && pad.f32()[i] > 0 ? 1.f : 0.f;
    }
    for (int64_t i = 0; i < N; ++i)
        for (int64_t j = 0; j < N; ++j)
            mask[size_t(i * N + j)] = lig[size_t(i)] * rec[size_t(j)] + rec[size_t(i)] * lig[size_t(j)] +
                                      lig[size_t(i)] * lig[size_t(j)];
    return Tensor::of(mask, {N, N});
}

AffinityModule AffinityModule::load(const io::ModelDir& m, const std::string& p, int64_t ts,
                                    int64_t tz) {
    AffinityModule a;
    a.z_norm = nn::LayerNorm::load(m, p + ".z_norm", tz, 1e-5f);
    a.z_linear = nn::Linear::load(m, p + ".z_linear", tz, tz, false);
    a.s_to_z_in1 = nn::Linear::load(m, p + ".s_to_z_prod_in1", ts, tz, false);
    a.s_to_z_in2 = nn::Linear::load(m, p + ".s_to_z_prod_in2", ts, tz, false);
    const int64_t bins = rows_of(m, p + ".dist_bin_pairwise_embed.weight");
    a.dist_embed = m.get_f32(p + ".dist_bin_pairwise_embed.weight", {bins, tz});
    const Tensor bounds = m.get_f32(p + ".boundaries", {bins - 1});
    a.boundaries_sq = Tensor::empty({bins - 1});
    ops::mul(bounds, bounds, a.boundaries_sq);
    a.conditioner = PairwiseConditioner::load(m, p + ".pairwise_conditioner", tz, 2);
    const std::string sp = p + ".pairformer_stack.layers.";
    const int64_t blocks = count_layers(m, sp);
    BI_CHECK(blocks > 0, kWhere, p, ": no pairformer_stack layers in the checkpoint");
    const int64_t heads = rows_of(m, sp + "0.tri_att_start.linear.weight");
    const int64_t head_dim = rows_of(m, sp + "0.tri_att_start.mha.linear_q.weight") / heads;
    for (int64_t b = 0; b < blocks; ++b)
        a.stack.push_back(nn::PairformerNoSeqLayer::load(
            m, sp + std::to_string(b), tz, 4 * tz, nn::PairformerNames::boltz2(), head_dim, heads));
    const std::string h = p + ".affinity_heads.";
    const int64_t T = rows_of(m, h + "affinity_out_mlp.2.weight");
    a.out1 = nn::Linear::load(m, h + "affinity_out_mlp.0", tz, tz, true);
    a.out2 = nn::Linear::load(m, h + "affinity_out_mlp.2", tz, T, true);
    a.v1 = nn::Linear::load(m, h + "to_affinity_pred_value.0", T, T, true);
    a.v2 = nn::Linear::load(m, h + "to_affinity_pred_value.2", T, T, true);
    a.v3 = nn::Linear::load(m, h + "to_affinity_pred_value.4", T, 1, true);
    a.p1 = nn::Linear::load(m, h + "to_affinity_pred_score.0", T, T, true);
    a.p2 = nn::Linear::load(m, h + "to_affinity_pred_score.2", T, T, true);
    a.p3 = nn::Linear::load(m, h + "to_affinity_pred_score.4", T, 1, true);
    a.to_logit = nn::Linear::load(m, h + "to_affinity_logits_binary", 1, 1, true);
    return a;
}

AffinityOutput AffinityModule::forward(const Tensor& s_inputs, const Tensor& z_in,
                                       const Tensor& coords, const Features& f,
                                       const Tap& tap) const {
    const int64_t N = f.num_tokens(), tz = z_linear.out_features(), NN = N * N;
    BI_CHECK(z_in.numel() == NN * tz && s_inputs.numel() % N == 0, kWhere,
             "expected z (", N, ", ", N, ", ", tz, ") and s_inputs (", N, ", C), got ",
             shape_str(z_in.shape()), " and ", shape_str(s_inputs.shape()));
    const auto tapped = [&](const char* n, const Tensor& t) {
        if (tap) tap(n, t);
    };
    // z = z_linear(z_norm(z)) + in1(s)[:, None] + in2(s)[None, :]
    Tensor zn = Tensor::empty({NN, tz}), z = Tensor::empty({N, N, tz});
    z_norm(z_in.reshape({NN, tz}), zn);
    Tensor z2 = z.reshape({NN, tz});
    z_linear(zn, z2);
    Tensor si = Tensor::empty({N, tz}), sj = Tensor::empty({N, tz});
    s_to_z_in1(s_inputs, si);
    s_to_z_in2(s_inputs, sj);
    ops::add_into(si.reshape({N, 1, tz}).expand({N, N, tz}), z);
    ops::add_into(sj.reshape({1, N, tz}).expand({N, N, tz}), z);
    tapped("z_in", z);

    // the representative atoms' distances, binned (d > boundary counts), embedded
    const int64_t A = coords.size(0);
    const Tensor t2r = f.at("token_to_rep_atom").reshape({N, f.at("token_to_rep_atom").numel() / N});
    BI_CHECK(t2r.size(1) == A, kWhere, "coords: expected (", t2r.size(1), ", 3), got ",
             shape_str(coords.shape()));
    Tensor rep = Tensor::empty({1, N, 3});
    ops::bmm(t2r.to_f32().reshape({1, N, A}), coords.reshape({1, A, 3}).clone(), rep);
    // binned as the confidence module bins its distances (squared distances against squared
    // boundaries). boltz takes torch.cdist, whose matrix-product form (above 25 points) rounds
    // differently by a few thousandths of an Angstrom: only a distance that close to a boundary
    // can bin apart.
    Tensor bins = Tensor::empty({N, N}, DType::I32);
    ops::distance_bins(rep.reshape({N, 3}), boundaries_sq, bins);
    Tensor dist = Tensor::empty({NN, tz});
    ops::embedding(bins.reshape({NN}), dist_embed, dist);
    const Tensor cond = conditioner(z, dist.reshape({N, N, tz}));  // z += PairwiseConditioning(z, d)
    ops::add(z, cond, z);
    tapped("z_cond", z);

    const Tensor mask = affinity_pair_mask(f);
    for (const auto& layer : stack) layer.run(z, &mask);
    tapped("z_stack", z);

    // heads: the mean of z over the masked pairs off the diagonal
    Tensor w = mask.clone();
    {
        // host-side: the diagonal out of the (N, N) mask, and its total
        for (int64_t i = 0; i < N; ++i) w.f32()[i * N + i] = 0.f;
    }
    double total = 0;
    for (int64_t p = 0; p < NN; ++p) total += w.f32()[p];  // host-side: a sum of 0/1 weights
    Tensor g = Tensor::empty({1, 1, tz});
    ops::bmm(w.reshape({1, 1, NN}), z.reshape({1, NN, tz}), g);
    g = g.reshape({1, tz});
    ops::scale(g, float(1.0 / (float(total) + 1e-7f)), g);
    tapped("g", g);
    const int64_t T = out2.out_features();
    Tensor h1 = Tensor::empty({1, tz}), h2 = Tensor::empty({1, T});
    out1(g, h1, {.act = Act::Relu});
    out2(h1, h2, {.act = Act::Relu});
    Tensor a1 = Tensor::empty({1, T}), a2 = Tensor::empty({1, T}), value = Tensor::empty({1, 1});
    v1(h2, a1, {.act = Act::Relu});
    v2(a1, a2, {.act = Act::Relu});
    v3(a2, value);
    Tensor b1 = Tensor::empty({1, T}), b2 = Tensor::empty({1, T}), score = Tensor::empty({1, 1}),
           logit = Tensor::empty({1, 1});
    p1(h2, b1, {.act = Act::Relu});
    p2(b1, b2, {.act = Act::Relu});
    p3(b2, score);
    to_logit(score, logit);
    // host-side: the two (1, 1) results
    return {value.f32()[0], logit.f32()[0]};
}

}  // namespace bioinfer::boltz2
