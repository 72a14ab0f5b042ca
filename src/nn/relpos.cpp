// Relative-position classes of residue pairs.
#include "nn/relpos.h"

#include <algorithm>
#include <cmath>

#include "bioinfer/error.h"
#include "ops/ops.h"

namespace bioinfer::nn {

RelativePosition RelativePosition::load(const io::ModelDir& m, const std::string& prefix,
                                        int64_t bins, int64_t c) {
    RelativePosition r;
    r.bins = bins;
    r.table = m.get_f32(prefix + ".embedding.weight", {2 * bins + 2, c});
    return r;
}

Tensor RelativePosition::classes(const std::vector<int64_t>& residue_index) const {
    const int64_t L = int64_t(residue_index.size());
    // The input's residue numbers as an index tensor (they fit 32 bits: chains offset by 512).
    const Tensor index = Tensor::of(std::vector<int32_t>(residue_index.begin(), residue_index.end()));
    Tensor out = Tensor::empty({L, L}, DType::I32);
    ops::relpos_classes(index, bins, out);
    return out;
}

ChainRelativePosition ChainRelativePosition::load(const io::ModelDir& m, const std::string& prefix,
                                                  int64_t c, ChainBucket bucket, bool cyclic,
                                                  int64_t r_max, int64_t s_max) {
    ChainRelativePosition r;
    r.r_max = r_max;
    r.s_max = s_max;
    r.chain_bucket = bucket;
    r.cyclic = cyclic;
    const int64_t in = 4 * (r_max + 1) + 2 * (s_max + 1) + 1;
    const Tensor w = m.get_f32(prefix + ".weight", {c, in});
    r.table = Tensor::zeros({in + 1, c});
    Tensor rows = r.table.narrow0(0, in);
    ops::copy(w.permute({1, 0}), rows);
    return r;
}

Tensor ChainRelativePosition::operator()(const Tokens& t) const {
    const int64_t L = t.asym_id.numel();
    for (const Tensor* f : {&t.residue_index, &t.entity_id, &t.token_index, &t.sym_id})
        BI_CHECK(f->numel() == L, "relative_position", "token features: expected ", L,
                 " values, got ", f->numel());
    const int64_t n_pos = 2 * r_max + 2, n_chain = 2 * s_max + 2;
    const int32_t off_token = int32_t(n_pos), off_entity = int32_t(2 * n_pos),
                  off_chain = int32_t(2 * n_pos + 1), zero_row = int32_t(2 * n_pos + n_chain + 1);
    // host-side: the pair classes are integer bookkeeping over the token features (like the
    // featurizer's), L^2 small integers; the table lookups and sums run as ops.
    const float *asym = t.asym_id.f32(), *res = t.residue_index.f32(), *ent = t.entity_id.f32(),
                *tok = t.token_index.f32(), *sym = t.sym_id.f32();
    const float* period = t.cyclic_period.defined() ? t.cyclic_period.f32() : nullptr;
    bool wrap = false;
    if (cyclic && period)
        for (int64_t j = 0; j < L; ++j) wrap = wrap || period[j] > 0;
    std::vector<int32_t> c_pos(size_t(L * L)), c_tok(size_t(L * L)), c_ent(size_t(L * L)),
        c_chain(size_t(L * L));
    for (int64_t i = 0; i < L; ++i) {
        for (int64_t j = 0; j < L; ++j) {
            const size_t p = size_t(i * L + j);
            const bool same_chain = asym[i] == asym[j], same_res = res[i] == res[j],
                       same_ent = ent[i] == ent[j];
            int64_t d = int64_t(res[i]) - int64_t(res[j]);
            if (wrap) {
                // boltz: d - period * round(d / period) in fp32 (round half to even), to integer
                const float per = period[j] > 0 ? period[j] : 10000.0f;
                d = int64_t(float(d) - per * std::nearbyint(float(d) / per));
            }
            c_pos[p] = same_chain ? int32_t(std::clamp<int64_t>(d + r_max, 0, 2 * r_max))
                                  : int32_t(2 * r_max + 1);
            const int64_t dt = int64_t(tok[i]) - int64_t(tok[j]);
            c_tok[p] = off_token + ((same_chain && same_res)
                                        ? int32_t(std::clamp<int64_t>(dt + r_max, 0, 2 * r_max))
                                        : int32_t(2 * r_max + 1));
            c_ent[p] = same_ent ? off_entity : zero_row;
            const int64_t ds = int64_t(sym[i]) - int64_t(sym[j]);
            const bool bucket = chain_bucket == ChainBucket::DifferentEntity ? !same_ent : same_chain;
            c_chain[p] = off_chain + (bucket ? int32_t(2 * s_max + 1)
                                             : int32_t(std::clamp<int64_t>(ds + s_max, 0, 2 * s_max)));
        }
    }
    const int64_t C = table.size(1);
    Tensor out = Tensor::empty({L, L, C});
    Tensor flat = out.reshape({L * L, C});
    ops::embedding(Tensor::of(c_pos), table, flat);
    ops::embedding(Tensor::of(c_tok), table, flat, true);
    ops::embedding(Tensor::of(c_ent), table, flat, true);
    ops::embedding(Tensor::of(c_chain), table, flat, true);
    return out;
}

}  // namespace bioinfer::nn
