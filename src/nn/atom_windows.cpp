// Atom windows and windowed attention: see atom_windows.h.
#include "nn/atom_windows.h"

#include <cmath>

#include "bioinfer/error.h"
#include "ops/ops.h"

namespace bioinfer::nn {
namespace {

constexpr const char* kWhere = "atom windows";

}  // namespace

AtomWindows AtomWindows::make(int64_t A, int64_t W, int64_t H) {
    BI_CHECK(W > 0 && H >= W && (H - W) % 2 == 0 && A % W == 0, kWhere,
             "atoms and windows: expected a multiple of ", W, " atoms and ", H,
             " keys centred on the queries, got ", A, " atoms");
    AtomWindows w;
    w.atoms = A;
    w.window_q = W;
    w.window_k = H;
    w.windows = A / W;
    const int64_t K = w.windows, first = (H - W) / 2;
    Tensor key_atom = Tensor::empty({K, H}, DType::I32);
    // host-side: the window index table, made once per input
    for (int64_t k = 0; k < K; ++k)
        for (int64_t h = 0; h < H; ++h) {
            const int64_t atom = k * W - first + h;
            key_atom.i32()[k * H + h] = atom >= 0 && atom < A ? int32_t(atom) : -1;
        }
    w.key_atom = on_backend(key_atom);
    return w;
}

Tensor AtomWindows::keys(const Tensor& x) const {
    const int64_t D = x.size(-1), R = x.numel() / D, S = atoms > 0 ? R / atoms : 0;
    BI_CHECK(S > 0 && R == S * atoms, kWhere, "keys of ", shape_str(x.shape()),
             ": expected whole samples of ", atoms, " atoms");
    Tensor out = Tensor::empty({S, windows, window_k, D});
    ops::embedding(stacked_rows(key_atom.to(kHost), S, atoms),
                   ops::contiguous(x).reshape({S * atoms, D}), out);
    return out;
}

namespace {

// Per-head layout for batched GEMMs: x (G, L, H * Dh) -> (G * H, L, Dh).
Tensor heads_first(const Tensor& x, int64_t G, int64_t L, int64_t H, int64_t Dh) {
    return ops::contiguous(x.reshape({G, L, H, Dh}).permute({0, 2, 1, 3})).reshape({G * H, L, Dh});
}

}  // namespace

void window_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
                      const AtomWindows& w, int64_t heads, Tensor& out) {
    const int64_t A = w.atoms, Wq = w.window_q, Wk = w.window_k, NW = w.windows;
    const int64_t D = q.size(-1), S = q.numel() / D / A, Dh = D / heads, G = S * NW;
    const Tensor qh = heads_first(q, G, Wq, heads, Dh);
    const Tensor kh = heads_first(w.keys(k), G, Wk, heads, Dh);
    const Tensor vh = heads_first(w.keys(v), G, Wk, heads, Dh);
    Tensor scores = Tensor::empty({G * heads, Wq, Wk});
    ops::bmm(qh, kh, scores, false, true);
    ops::scale(scores, 1.0f / std::sqrt(float(Dh)), scores);
    const int64_t per_sample = NW * heads;
    for (int64_t s = 0; s < S; ++s) {
        Tensor sc = scores.narrow0(s * per_sample, (s + 1) * per_sample);
        ops::add(sc, bias.reshape({per_sample, Wq, Wk}), sc);
    }
    ops::softmax(scores, nullptr, nullptr);
    Tensor ctx = Tensor::empty({G * heads, Wq, Dh});
    ops::bmm(scores, vh, ctx);
    Tensor dst = out.reshape({G, Wq, heads, Dh});
    ops::copy(ctx.reshape({G, heads, Wq, Dh}).permute({0, 2, 1, 3}), dst);
}

Tensor on_backend(const Tensor& host) {
    const Device dev = ops::current_backend().device;
    return dev.is_host() ? host : host.to(dev);
}

Tensor stacked_rows(const Tensor& idx, int64_t S, int64_t n) {
    const int64_t m = idx.numel();
    Tensor out = Tensor::empty({S * m}, DType::I32);
    // host-side: a gather index built once per call from a layout table
    for (int64_t s = 0; s < S; ++s)
        for (int64_t i = 0; i < m; ++i) {
            const int32_t v = idx.i32()[i];
            out.i32()[s * m + i] = v < 0 ? -1 : int32_t(s * n + v);
        }
    return on_backend(out);
}

}  // namespace bioinfer::nn
