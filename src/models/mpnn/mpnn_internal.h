// What the MPNN model files (mpnn.cpp, sample.cpp, packer.cpp) share: the message-passing layers'
// pieces on ops and the host-side geometry both the sequence models and the side-chain packer
// build their features from. Internal to src/models/mpnn; defined in mpnn.cpp.
#pragma once
#include <cstdint>
#include <vector>

#include "bioinfer/tensor.h"
#include "models/mpnn/mpnn.h"
#include "nn/transformer.h"

namespace bioinfer::mpnn::detail {

// ProteinFeaturesLigand.periodic_table_features rows 1 and 2: group and period per element
// number (0: unknown .. 118), the element features of LigandMPNN and of the side-chain packer
inline constexpr int8_t kElementGroup[119] = {
    0,  1,  18, 1,  2,  13, 14, 15, 16, 17, 18, 1,  2,  13, 14, 15, 16, 17, 18, 1,  2,  3,  4,  5,
    6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
    12, 13, 14, 15, 16, 17, 18, 1,  2,  3,  3,  3,  3,  3,  3,  3,  3,  3,  3,  3,  3,  3,  3,  3,
    4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 1,  2,  3,  3,  3,  3,  3,  3,  3,
    3,  3,  3,  3,  3,  3,  3,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18};
inline constexpr int8_t kElementPeriod[119] = {
    0, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6,
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7};

// rows (n, C) of `table` at `ids` (ops::embedding)
Tensor gather(const Tensor& table, const std::vector<int32_t>& ids);

// [x_i repeated K times | parts...] as (N * K, C + the parts' widths) rows for x (N, C); each part
// holds N * K rows of any width (a contiguous tensor of N * K * width values)
Tensor message_rows(const Tensor& x, int64_t K, const std::vector<Tensor>& parts);

// rows (n, in) -> W3(gelu(W2(gelu(W1 rows)))) (n, H)
Tensor mlp_rows(const MessageMlp& mlp, const Tensor& rows);

// h (N, H) = LN1(h + sum over k of weights[i, k] * mlp(rows[i, k])), then the feed-forward, LN2
// and the mask: the node update every layer kind shares. rows (N * K, H + in) are [h_i, the
// edge's inputs]; weights (N, K) hold the edge mask and the 1/30.
void node_update(Tensor& h, const MessageMlp& mlp, const FeedForward& ff, const nn::LayerNorm& n1,
                 const nn::LayerNorm& n2, const Tensor& rows, const Tensor& weights, const Tensor& mask);

// host-side geometry, in float32 as the reference computes it:
// the virtual CB of featurize and ProteinFeatures from x = N, CA, C (9 values): the reference's
// ideal geometry -0.58273431 (b x c) + 0.56802827 b - 0.54067466 c + CA, b = CA - N, c = C - CA
void virtual_cb(const float* x, float* cb);
// sqrt(|p - q|^2 + 1e-6)
float dist(const float* p, const float* q);
// |p - q|^2
float squared_dist(const float* p, const float* q);
// idx[0..take): the indices of the `take` smallest d (ties: the lower index first), sorted
void smallest_first(const std::vector<float>& d, int64_t take, std::vector<int32_t>& idx);
// Each residue's K nearest by CA, atoms (L, 5, 3) N, CA, C, O, CB (masked pairs pushed past every
// real one), nearest first: E_idx (L, K) and, when given, Dn (L, K) their distances
void ca_neighbours(const std::vector<float>& atoms, const std::vector<float>& mask, int64_t K,
                   std::vector<int32_t>& E_idx, std::vector<float>* Dn);
// PositionalEncodings of edge (i, j): the linear of the one-hot of the clipped residue offset (65:
// another chain) is the weight's column plus the bias; pw (16, 66), pb (16) -> e[0..16)
void positional(const float* pw, const float* pb, const Backbone& b, int64_t i, int64_t j, float* e);
// The graph's edge features (L * K, F) for E_idx (L, K): each edge (i, k -> j)'s positional
// encoding (pw, pb: float32) in its first 16 columns, then fill(i, k, j, row) writes the rest
template <class Fill>
Tensor edge_rows(const Backbone& b, const std::vector<int32_t>& E_idx, int64_t K, int64_t F,
                 const Tensor& pw, const Tensor& pb, Fill&& fill) {
    const int64_t L = b.length();
    Tensor E = Tensor::empty({L * K, F});
    for (int64_t i = 0; i < L; ++i)
        for (int64_t k = 0; k < K; ++k) {
            const int64_t j = E_idx[size_t(i * K + k)];
            // host-side: one edge's features, written once per structure
            float* e = E.f32() + (i * K + k) * F;
            positional(pw.f32(), pb.f32(), b, i, j, e);
            fill(i, k, j, e);
        }
    return E;
}
// out = l - logsumexp(l) over n values (sums in double; out may be l)
void log_softmax_row(const float* l, int n, float* out);

}  // namespace bioinfer::mpnn::detail
