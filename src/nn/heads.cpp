// Distogram, pLDDT and aligned-error heads.
#include "nn/heads.h"

#include <algorithm>
#include <cmath>

#include "ops/ops.h"

namespace bioinfer::nn {

namespace {
constexpr int64_t kAlignedErrorBins = 64;
}  // namespace

DistogramHead DistogramHead::load(const io::ModelDir& m, const std::string& prefix, int64_t c, int64_t bins) {
    DistogramHead h;
    h.proj = Linear::load(m, prefix, c, bins);
    h.bins = bins;
    return h;
}

Tensor DistogramHead::operator()(const Tensor& z) const {
    const int64_t L = z.size(0), cz = z.size(2);
    Tensor logits = Tensor::empty({L * L, bins});
    proj(z.reshape({L * L, cz}), logits);
    Tensor out = Tensor::empty({L, L, bins});
    const float* x = logits.f32();
    float* d = out.f32();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < L; ++j)
            for (int64_t k = 0; k < bins; ++k)
                d[(i * L + j) * bins + k] =
                    (x[(i * L + j) * bins + k] + x[(j * L + i) * bins + k]) / 2;
    return out;
}

PlddtHead PlddtHead::load(const io::ModelDir& m, const std::string& prefix, int64_t c_s, int64_t hidden,
                          int64_t atoms, int64_t bins) {
    PlddtHead h;
    h.ln = LayerNorm::load(m, prefix + ".0", c_s, 1e-5f);
    h.l1 = Linear::load(m, prefix + ".1", c_s, hidden);
    h.l2 = Linear::load(m, prefix + ".2", hidden, hidden);
    h.l3 = Linear::load(m, prefix + ".3", hidden, atoms * bins);
    h.atoms = atoms;
    h.bins = bins;
    return h;
}

Tensor PlddtHead::operator()(const Tensor& st) const {
    const int64_t L = st.size(0), c_s = st.size(1), hidden = l1.out_features();
    Tensor a = Tensor::empty({L, c_s}), h1 = Tensor::empty({L, hidden}), h2 = Tensor::empty({L, hidden}),
           logits = Tensor::empty({L * atoms, bins});
    ln(st, a);
    l1(a, h1);
    l2(h1, h2);
    Tensor l2v = logits.reshape({L, atoms * bins});
    l3(h2, l2v);
    ops::softmax(logits, nullptr, nullptr);
    Tensor plddt = Tensor::empty({L, atoms});
    for (int64_t r = 0; r < L * atoms; ++r) {
        float e = 0;
        for (int64_t k = 0; k < bins; ++k)
            e += logits.f32()[r * bins + k] * ((float(k) + 0.5f) / float(bins));
        plddt.f32()[r] = e;
    }
    return plddt;
}

AlignedError aligned_error_from_logits(Tensor& probs, int64_t L) {
    AlignedError out;
    ops::softmax(probs, nullptr, nullptr);
    const double n = double(std::max<int64_t>(L, 19));
    const double d0 = 1.24 * std::cbrt(n - 15.0) - 1.8;
    float centre[kAlignedErrorBins], tm[kAlignedErrorBins];
    for (int64_t k = 0; k < kAlignedErrorBins; ++k) {
        centre[k] = 0.25f + 0.5f * float(k);
        tm[k] = float(1.0 / (1.0 + double(centre[k]) * centre[k] / (d0 * d0)));
    }
    out.pae = Tensor::empty({L, L});
    const float w = 1.0f / (1e-8f + float(L));
    float best = -INFINITY;
    for (int64_t i = 0; i < L; ++i) {
        float aligned = 0;
        for (int64_t j = 0; j < L; ++j) {
            const float* p = probs.f32() + (i * L + j) * kAlignedErrorBins;
            float e = 0, t = 0;
            for (int64_t k = 0; k < kAlignedErrorBins; ++k) {
                e += p[k] * centre[k];
                t += p[k] * tm[k];
            }
            out.pae.f32()[i * L + j] = e;
            aligned += t * w;
        }
        best = std::max(best, aligned);
    }
    out.ptm = best;
    return out;
}

AlignedErrorHead AlignedErrorHead::load(const io::ModelDir& m, const std::string& prefix, int64_t c) {
    AlignedErrorHead h;
    h.proj = Linear::load(m, prefix, c, kAlignedErrorBins);
    return h;
}

AlignedError AlignedErrorHead::operator()(const Tensor& z) const {
    const int64_t L = z.size(0), cz = z.size(2);
    Tensor probs = Tensor::empty({L * L, kAlignedErrorBins});
    proj(z.reshape({L * L, cz}), probs);
    return aligned_error_from_logits(probs, L);
}

}  // namespace bioinfer::nn
