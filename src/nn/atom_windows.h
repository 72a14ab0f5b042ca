// The atom windows of AlphaFold-3-style atom transformers (boltz's get_indexing_matrix /
// single_to_keys): the key-slot table shared by an atom encoder's pair representation and the
// windowed atom attention (Boltz-2's 32 x 128 windows, ESMFold2's sliding windows), and that
// attention.
#pragma once
#include <cstdint>

#include "bioinfer/tensor.h"

namespace bioinfer::nn {

// A table made on the host, on the device the current backend computes on.
Tensor on_backend(const Tensor& host);
// The gather index of a host I32 table idx (m) over S stacked copies of an n-row tensor: entry
// s * m + i is row s * n + idx[i], -1 kept (a zero row for ops::embedding); on the backend.
Tensor stacked_rows(const Tensor& idx, int64_t S, int64_t n);

// Window k (K = A / W of them) has the W queries k*W .. k*W+W-1 and the H keys k*W - (H-W)/2 + h,
// h < H (32k-48 .. 32k+79 for W 32, H 128); keys outside [0, A) are absent: zero rows, never
// valid. A must be a multiple of W (the models pad atoms to W). W and H are the model's (its
// config's atoms per window of queries and of keys).
struct AtomWindows {
    int64_t atoms = 0;                                // A
    int64_t window_q = 0, window_k = 0, windows = 0;  // W, H, K
    Tensor key_atom;  // (K, H) I32 on the backend: the atom in each key slot, -1 where absent

    static AtomWindows make(int64_t atoms, int64_t window_q, int64_t window_k);
    // x (S * A, D), S stacked samples -> (S, K, H, D): each window's key rows, zeros where absent
    // (boltz's to_keys).
    Tensor keys(const Tensor& x) const;
};

// Attention within each window over S stacked samples: q, k, v (S * A, H * Dh) (k and v before
// windowing), bias (NW, H, Wq, Wk) added to every sample's scaled scores (the key mask folded in:
// absent keys must be masked there); out (S * A, H * Dh).
void window_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                      const AtomWindows& windows, int64_t heads, Tensor& out);

}  // namespace bioinfer::nn
