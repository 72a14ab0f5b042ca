// Distogram, pLDDT and aligned-error heads.
#include "nn/heads.h"

#include <algorithm>
#include <cmath>

#include "ops/ops.h"

namespace bioinfer::nn {

namespace {
constexpr int64_t kAlignedErrorBins = 64;
}  // namespace

std::vector<float> torch_linspace(float start, float end, int64_t steps) {
    std::vector<float> v(static_cast<size_t>(steps));
    const float step = (end - start) / float(steps - 1);
    const int64_t half = steps / 2;
    for (int64_t i = 0; i < steps; ++i)
        v[size_t(i)] = i < half ? start + step * float(i) : end - step * float(steps - i - 1);
    return v;
}

DistogramHead DistogramHead::load(const io::ModelDir& m, const std::string& prefix, int64_t c, int64_t bins,
                                  bool sum_pairs) {
    DistogramHead h;
    h.proj = Linear::load(m, prefix, c, bins);
    h.bins = bins;
    h.sum_pairs = sum_pairs;
    return h;
}

Tensor DistogramHead::operator()(const Tensor& z) const {
    const int64_t L = z.size(0), cz = z.size(2);
    if (sum_pairs) {
        // W (z + z^T) + b, `chunk` rows of the pair at a time
        Tensor out = Tensor::empty({L, L, bins});
        const int64_t chunk = std::max<int64_t>(1, (int64_t(64) << 20) / std::max<int64_t>(1, L * cz * 4));
        for (int64_t r0 = 0; r0 < L; r0 += chunk) {
            const int64_t r1 = std::min(L, r0 + chunk), n = (r1 - r0) * L;
            Tensor x = Tensor::empty({r1 - r0, L, cz});
            ops::copy(z.narrow0(r0, r1), x);
            ops::add_into(z.slice(1, r0, r1).permute({1, 0, 2}), x);
            Tensor o = out.narrow0(r0, r1).reshape({n, bins});
            proj(x.reshape({n, cz}), o);
        }
        return out;
    }
    Tensor logits = Tensor::empty({L * L, bins});
    proj(z.reshape({L * L, cz}), logits);
    // symmetrised: (x[i, j] + x[j, i]) / 2
    const Tensor x = logits.reshape({L, L, bins});
    Tensor out = Tensor::empty({L, L, bins});
    ops::copy(x, out);
    ops::add_into(x.permute({1, 0, 2}), out);
    ops::scale(out, 0.5f, out);
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
    // the bins' centres, (k + 0.5) / bins: host-side constants, once at load
    std::vector<float> centre(static_cast<size_t>(bins));
    for (int64_t k = 0; k < bins; ++k) centre[size_t(k)] = (float(k) + 0.5f) / float(bins);
    h.centres = Tensor::of(centre);
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
    Tensor flat = plddt.reshape({L * atoms});
    ops::bin_expectation(logits, centres, flat);  // the expected bin centre
    return plddt;
}

AlignedError aligned_error_from_logits(Tensor& probs, int64_t L) {
    AlignedError out;
    ops::softmax(probs, nullptr, nullptr);
    const double n = double(std::max<int64_t>(L, 19));
    const double d0 = 1.24 * std::cbrt(n - 15.0) - 1.8;
    // bin centres (0.5 A wide, 0.25..31.75) and their TM-score terms: host-side constants
    std::vector<float> centre(kAlignedErrorBins), tm(kAlignedErrorBins);
    for (int64_t k = 0; k < kAlignedErrorBins; ++k) {
        centre[size_t(k)] = 0.25f + 0.5f * float(k);
        tm[size_t(k)] = float(1.0 / (1.0 + double(centre[size_t(k)]) * centre[size_t(k)] / (d0 * d0)));
    }
    // PAE (L, L): the expected error; pTM: max over aligned residues i of the mean over j of the
    // expected TM term
    out.pae = Tensor::empty({L, L});
    Tensor pae = out.pae.reshape({L * L}), t = Tensor::empty({L, L}), aligned = Tensor::empty({L});
    ops::bin_expectation(probs, Tensor::of(centre), pae);
    Tensor tf = t.reshape({L * L});
    ops::bin_expectation(probs, Tensor::of(tm), tf);
    ops::bin_expectation(t, Tensor::of(std::vector<float>(size_t(L), 1.0f / (1e-8f + float(L)))), aligned);
    out.ptm = ops::max_value(aligned);
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
