// The glue ops' arithmetic for one unit of work (a row, a residue, a sequence), written once: the
// reference table runs the units in order, the CPU tables over their threads (in a translation
// unit without ISA flags, so the compiler fuses no multiply-add the plain code does not have and
// the results are the same to the bit). The structure models' per-residue geometry has its units
// in geometry_units.h.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/kernels.h"

namespace bioinfer::kernels::glue {

inline float act_1(Act act, float x) {
    switch (act) {
        case Act::Relu: return x > 0.0f ? x : 0.0f;
        case Act::Sigmoid: return 1.0f / (1.0f + std::exp(-x));
        case Act::Gelu: return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
        case Act::GeluTanh:
            return 0.5f * x * (1.0f + std::tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
        case Act::None: break;
    }
    return x;
}

// One sequence of token dropout: rows (n, D) with their ids.
inline void token_dropout_seq(float* x, const int32_t* ids, int64_t n, int64_t D, int32_t mask_id,
                              float keep) {
    int64_t n_mask = 0;
    for (int64_t t = 0; t < n; ++t) n_mask += ids[t] == mask_id;
    const float denom = 1.0f - float(n_mask) / float(n);
    for (int64_t t = 0; t < n; ++t) {
        float* row = x + t * D;
        if (ids[t] == mask_id)
            std::fill(row, row + D, 0.0f);
        else
            for (int64_t d = 0; d < D; ++d) row[d] = row[d] * keep / denom;
    }
}

// Pair row (i, j) of the outer product and difference: [q_j * k_i | q_j - k_i].
inline void outer_product_difference_row(const float* qk, int64_t I, int64_t i, int64_t j,
                                         float* row) {
    const float* qj = qk + j * 2 * I;      // q of residue j
    const float* ki = qk + i * 2 * I + I;  // k of residue i
    for (int64_t c = 0; c < I; ++c) {
        row[c] = qj[c] * ki[c];
        row[I + c] = qj[c] - ki[c];
    }
}

// Row sums of the symmetrised map of one head (for APC): row[i] = sum_j A_ij + A_ji; returns the
// total.
inline double contact_row_sums(const float* probs, int64_t P, int64_t L, double* row) {
    double total = 0;
    for (int64_t i = 0; i < L; ++i) {
        row[i] = 0.0;
        for (int64_t j = 0; j < L; ++j) {
            const double s = double(probs[(i + 1) * P + j + 1]) + probs[(j + 1) * P + i + 1];
            row[i] += s;
            total += s;
        }
    }
    return total;
}

// acc[i, :] += w * (S_ij - row_i row_j / total) for one head and one row i.
inline void contact_apc_row(const float* probs, int64_t P, int64_t L, float w, const double* row,
                            double total, int64_t i, float* acc) {
    for (int64_t j = 0; j < L; ++j) {
        const double s = double(probs[(i + 1) * P + j + 1]) + probs[(j + 1) * P + i + 1];
        const double apc = total != 0 ? row[i] * row[j] / total : 0.0;
        acc[i * L + j] += float(w * (s - apc));
    }
}

inline void l2_normalize_row(const float* x, float* y, int64_t d, float eps) {
    float s = 0.0f;
    for (int64_t c = 0; c < d; ++c) s += x[c] * x[c];
    const float denom = std::sqrt(std::max(s, eps));
    for (int64_t c = 0; c < d; ++c) y[c] = x[c] / denom;
}

// y = x / sqrt(mean(x^2) + eps) over one row of d (a weightless RMSNorm; the sum in double).
inline void rms_norm_row(const float* x, float* y, int64_t d, float eps) {
    double s = 0.0;
    for (int64_t c = 0; c < d; ++c) s += double(x[c]) * x[c];
    const float inv = float(1.0 / std::sqrt(s / double(d) + double(eps)));
    for (int64_t c = 0; c < d; ++c) y[c] = x[c] * inv;
}

inline float bin_expectation_row(const float* p, const float* values, int64_t K) {
    float e = 0;
    for (int64_t k = 0; k < K; ++k) e += p[k] * values[k];
    return e;
}

inline int32_t relpos_class(const int32_t* index, int64_t bins, int64_t i, int64_t j) {
    const int64_t d = int64_t(index[j]) - int64_t(index[i]);
    return int32_t(std::clamp(d, -bins, bins) + bins + 1);
}

}  // namespace bioinfer::kernels::glue
