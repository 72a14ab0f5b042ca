// The CPU's attention kernels over a SIMD wrapper V: rotary embedding (rotate-half, as
// transformers' ESM) and multi-head attention over packed sequences, tiled with an online softmax
// (the flash-attention recurrence) or materialised where the probabilities are wanted.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backend/cpu/elementwise.h"
#include "backend/cpu/gemm_tile.h"
#include "backend/cpu/norms.h"

namespace bioinfer::cpu {
namespace {  // internal linkage: see kernel_common.h

// Rotary on positions [p0, p1).
template <typename V>
inline void rotary_span(float* x, int64_t p0, int64_t p1, int64_t pos_stride, int64_t heads,
                        int64_t dh, const float* cos, const float* sin) {
    constexpr int W = V::W;
    const int64_t half = dh / 2;
    for (int64_t p = p0; p < p1; ++p) {
        const float* cp = cos + p * half;
        const float* sp = sin + p * half;
        for (int64_t h = 0; h < heads; ++h) {
            float* v = x + p * pos_stride + h * dh;
            int64_t i = 0;
            for (; i + W <= half; i += W) {
                auto c = V::load(cp + i), s = V::load(sp + i);
                auto x1 = V::load(v + i), x2 = V::load(v + i + half);
                V::store(v + i, V::fnmadd(x2, s, V::mul(x1, c)));
                V::store(v + i + half, V::fmadd(x1, s, V::mul(x2, c)));
            }
            if (i < half) {  // the tail as one partial vector (head dims 16 and 24 are all tail)
                const int64_t n = half - i;
                auto c = V::load_partial(cp + i, n), s = V::load_partial(sp + i, n);
                auto x1 = V::load_partial(v + i, n), x2 = V::load_partial(v + i + half, n);
                V::store_partial(v + i, V::fnmadd(x2, s, V::mul(x1, c)), n);
                V::store_partial(v + i + half, V::fmadd(x1, s, V::mul(x2, c)), n);
            }
        }
    }
}

// Positions split over the threads (parallel = 1, the default) or run on the calling thread; a
// call from inside a parallel region (one sequence of a packed batch) runs on its thread.
template <typename V>
void rotary(float* x, int64_t n_pos, int64_t pos_stride, int64_t heads, int64_t dh,
            const float* cos, const float* sin) {
    const bool parallel =
        !omp_in_parallel() &&
        tuned<V>("rotary", {{"positions", n_pos}, {"heads", heads}, {"head_dim", dh}})
                .param("parallel") != 0;
#pragma omp parallel for schedule(static) if (parallel && n_pos > 1)
    for (int64_t p = 0; p < n_pos; ++p) rotary_span<V>(x, p, p + 1, pos_stride, heads, dh, cos, sin);
}

// K of one (batch, head) transposed to kT (Dh, ldk): kT[d][j] = k[j][d] for j < n, zero for
// j in [n, ldk), so a key block may run past the last key (ldk: kT's row stride).
// In blocks of kPackKeys keys: the block's rows (dh contiguous floats each) are copied whole into
// buf (kPackKeys * dh floats, the caller's scratch) first, so the strided key rows stream in as
// vector loads, then written out kPackKeys keys (one 64-byte run) per dim.
constexpr int64_t kPackKeys = 16;
inline void pack_keys_transposed(const float* k, int64_t ld, int64_t n, int64_t dh, float* kT,
                                 int64_t ldk, float* buf) {
    for (int64_t j0 = 0; j0 < n; j0 += kPackKeys) {
        const int64_t nb = std::min(kPackKeys, n - j0);
        for (int64_t j = 0; j < nb; ++j) std::copy_n(k + (j0 + j) * ld, dh, buf + j * dh);
        for (int64_t d = 0; d < dh; ++d) {
            float* row = kT + d * ldk + j0;
            for (int64_t j = 0; j < nb; ++j) row[j] = buf[j * dh + d];
        }
    }
    for (int64_t d = 0; d < dh; ++d) std::fill(kT + d * ldk + n, kT + (d + 1) * ldk, 0.0f);
}

// One attention work item: a sequence and a range of its query blocks (of qb rows).
struct AttnItem {
    int64_t b, qb0, qb1;
};

// Work items, longest sequences first so a dynamic schedule ends on short items; each runs for
// every head and packs its keys once. A sequence is split into several ranges only when there are
// too few (sequence, head) pairs to keep every thread busy; whole: one item per sequence.
inline std::vector<AttnItem> attention_items(const int64_t* cu, int64_t B, int64_t H, int64_t qb,
                                             bool whole) {
    const int64_t split =
        whole ? 1 : std::max<int64_t>(1, (4 * omp_get_max_threads() + B * H - 1) / (B * H));
    std::vector<AttnItem> items;
    for (int64_t b = 0; b < B; ++b) {
        const int64_t L = cu[b + 1] - cu[b];
        const int64_t n_qb = whole ? 1 : (L + qb - 1) / qb;
        const int64_t per = (n_qb + split - 1) / split;
        for (int64_t q = 0; q < n_qb; q += per) items.push_back({b, q, std::min(n_qb, q + per)});
    }
    std::stable_sort(items.begin(), items.end(), [&](const AttnItem& x, const AttnItem& y) {
        return cu[x.b + 1] - cu[x.b] > cu[y.b + 1] - cu[y.b];
    });
    return items;
}

// The online-softmax step of a flash-attention tile. s (mq rows of stride lds, kbv columns, a
// multiple of W) holds raw q.k scores; on return it holds exp(scale * s + bias - m_new) * keep,
// with m (running max) and l (running sum) updated and each o row (o_cols wide, stride ldo)
// rescaled by exp(m_old - m_new). bias is 0 or -inf per key, keep 1 or 0; unmasked: every key of
// the tile is real and valid (bias all 0, keep all 1), so neither is read. Row r may see columns
// c <= r + diag only (causal; diag >= kbv lets every column through).
template <typename V>
inline void online_softmax_tile(float* s, int64_t lds, int64_t mq, int64_t kbv, const float* bias,
                                const float* keep, bool unmasked, int64_t diag, float* m, float* l,
                                float* o, int64_t ldo, int64_t o_cols) {
    using R = typename V::R;
    constexpr int W = V::W;
    const float ninf = -std::numeric_limits<float>::infinity();
    for (int64_t r = 0; r < mq; ++r) {
        float* sr = s + r * lds;
        const int64_t seen = std::clamp<int64_t>(r + diag + 1, 0, kbv);  // columns [0, seen)
        R vmax = V::set1(ninf);
        if (unmasked) {
            for (int64_t c = 0; c < kbv; c += W) vmax = V::max(vmax, V::load(sr + c));
        } else {
            for (int64_t c = 0; c < kbv; c += W) {
                const R t = V::add(V::load(sr + c), V::load(bias + c));
                V::store(sr + c, t);
                vmax = V::max(vmax, t);
            }
        }
        float rmax = V::hmax(vmax);
        if (seen < kbv) {
            rmax = ninf;
            for (int64_t c = 0; c < seen; ++c) rmax = std::max(rmax, sr[c]);
        }
        const float mnew = std::max(m[r], rmax);
        if (mnew == ninf) {  // every key so far masked: nothing to add
            std::fill(sr, sr + kbv, 0.0f);
            continue;
        }
        const R vm = V::set1(mnew);
        R vsum = V::zero();
        for (int64_t c = 0; c < kbv; c += W) {
            R e = vexp<V>(V::sub(V::load(sr + c), vm));
            if (!unmasked) e = V::mul(e, V::load(keep + c));
            V::store(sr + c, e);
            vsum = V::add(vsum, e);
        }
        float rsum = V::hsum(vsum);
        if (seen < kbv) {  // causally hidden keys add exactly nothing
            std::fill(sr + seen, sr + kbv, 0.0f);
            rsum = 0.0f;
            for (int64_t c = 0; c < seen; ++c) rsum += sr[c];
        }
        const float alpha = m[r] == ninf ? 0.0f : std::exp(m[r] - mnew);
        l[r] = l[r] * alpha + rsum;
        m[r] = mnew;
        if (alpha != 1.0f) scale_row(o + r * ldo, o_cols, alpha);
    }
}

// Per-key bias (0 or -inf) and keep (1 or 0) over ldk keys: keys past nk or not valid are masked.
inline void attention_key_masks(const uint8_t* valid, int64_t nk, int64_t ldk, float* bias,
                                float* keep) {
    for (int64_t j = 0; j < ldk; ++j) {
        const bool ok = j < nk && (!valid || valid[j]);
        bias[j] = ok ? 0.0f : -std::numeric_limits<float>::infinity();
        keep[j] = ok ? 1.0f : 0.0f;
    }
}

// Attention over B sequences packed as rows of q, k, v, out (see KernelTable::attention), in one
// of two variants the tuned table chooses between:
//  tiled (default): flash-style tiles, q_block query rows against k_block keys at a time with an
//    online softmax, so no L x L matrix exists;
//  materialised: full score rows per (sequence, head), softmax, then P.V. Always used with probs
//    (B, H, P, P), as the contact head needs every probability.
template <typename V>
void attention(const float* q, const float* k, const float* v, float* out, const int64_t* cu,
               int64_t B, int64_t H, int64_t Hkv, int64_t Dh, float scale, bool causal,
               const uint8_t* key_valid, float* probs, int64_t P, const float* pair_bias,
               int64_t bias_stride) {
    constexpr int W = V::W;
    const int64_t D = H * Dh, Dkv = Hkv * Dh, group = H / Hkv;
    const float ninf = -std::numeric_limits<float>::infinity();
    int64_t max_len = 0;
    for (int64_t b = 0; b < B; ++b) max_len = std::max(max_len, cu[b + 1] - cu[b]);
    const tuning::Choice choice =
        tuned<V>("attention", {{"heads", H},  // not the batch: items are per (sequence, head)
                               {"kv_heads", Hkv},
                               {"seq", max_len},
                               {"head_dim", Dh},
                               {"causal", causal ? 1 : 0}});
    const bool full = probs || choice.is("materialised");
    // Tile sizes: key blocks a multiple of W (the score tile's columns are whole vectors).
    const int64_t kQB = std::max<int64_t>(1, choice.param("q_block"));
    const int64_t kKB = std::max<int64_t>(W, choice.param("k_block") / W * W);
    const SoftmaxFn<V> softmax_fn = full ? softmax_variant<V>(max_len, max_len) : nullptr;
    const std::vector<AttnItem> items = attention_items(cu, B, H, kQB, full);
    const int64_t n_items = int64_t(items.size());
#pragma omp parallel
    {
        // Per-thread scratch, sized for the longest sequence.
        const int64_t ldk_max = (max_len + W - 1) / W * W;
        const auto n = [](int64_t x) { return static_cast<size_t>(x); };
        // kT's rows are one vector longer than the keys need: a power-of-two row stride would put
        // the rows written together while packing onto a few cache sets.
        std::vector<float> kT(n(Dh * (ldk_max + W))), bias(n(ldk_max)), keep(n(ldk_max)),
            key_block(n(kPackKeys * Dh));
        std::vector<float> s(n(full ? (probs ? 0 : max_len * ldk_max) : kQB * kKB));
        std::vector<float> o(full ? 0 : n(kQB * Dh)), m(n(kQB)), l(n(kQB));
#pragma omp for collapse(2) schedule(dynamic, 1)
        for (int64_t it = 0; it < n_items; ++it)
            for (int64_t h = 0; h < H; ++h) {
                const AttnItem& item = items[n(it)];
                const int64_t b = item.b, r0 = cu[b], L = cu[b + 1] - r0, hk = h / group;
                const int64_t ldk = (L + W - 1) / W * W, ldt = ldk + W;  // kT's row stride: ldt
                const uint8_t* valid = key_valid ? key_valid + r0 : nullptr;
                int64_t nk = L;  // keys past the last valid one are skipped outright
                if (valid)
                    while (nk > 0 && !valid[nk - 1]) --nk;
                const float* qbh = q + r0 * D + h * Dh;
                // (L, L) additive scores of this (sequence, head), or null
                const float* pb = pair_bias ? pair_bias + b * bias_stride + h * L * L : nullptr;
                const float* vbh = v + r0 * Dkv + hk * Dh;
                float* obh = out + r0 * D + h * Dh;
                pack_keys_transposed(k + r0 * Dkv + hk * Dh, Dkv, nk, Dh, kT.data(), ldt,
                                     key_block.data());
                attention_key_masks(valid, nk, ldk, bias.data(), keep.data());
                // Key tiles ending at or before the first masked key need no mask arithmetic.
                const int64_t first_masked = std::find(keep.begin(), keep.begin() + ldk, 0.0f) -
                                             keep.begin();
                if (full) {
                    float* p = probs ? probs + (b * H + h) * P * P : s.data();
                    const int64_t ldp = probs ? P : ldk;
                    if (probs) std::fill(p, p + P * P, 0.0f);
                    if (nk == 0) {
                        for (int64_t i = 0; i < L; ++i) std::fill(obh + i * D, obh + i * D + Dh, 0.0f);
                        continue;
                    }
                    gemm<V>(qbh, D, kT.data(), ldt, p, ldp, L, nk, Dh, false);
                    for (int64_t i = 0; i < L; ++i) {
                        float* pr = p + i * ldp;
                        const int64_t seen = causal ? std::min(nk, i + 1) : nk;
                        if (pb)
                            for (int64_t j = 0; j < seen; ++j) pr[j] = pr[j] * scale + pb[i * L + j];
                        else
                            for (int64_t j = 0; j < seen; ++j) pr[j] *= scale;
                        softmax_fn(pr, 1, seen, nullptr, valid);
                        std::fill(pr + seen, pr + nk, 0.0f);
                    }
                    gemm<V>(p, ldp, vbh, Dkv, obh, D, L, Dh, nk, false);
                    continue;
                }
                for (int64_t qb = item.qb0; qb < item.qb1; ++qb) {
                    const int64_t i0 = qb * kQB, mq = std::min(kQB, L - i0);
                    std::fill(o.begin(), o.end(), 0.0f);
                    std::fill(m.begin(), m.end(), ninf);
                    std::fill(l.begin(), l.end(), 0.0f);
                    const int64_t kend = causal ? std::min(nk, i0 + mq) : nk;
                    for (int64_t j0 = 0; j0 < kend; j0 += kKB) {
                        const int64_t kb = std::min(kKB, kend - j0);
                        const int64_t kbv = (kb + W - 1) / W * W;  // padded keys are masked
                        const int64_t diag = causal ? i0 - j0 : kbv;
                        // s (mq, kbv) = scale * q rows . kT block (+ the pair bias's block),
                        // its padding columns [kb, kbv) zero (masked below)
                        const GemmOut scores{.scale = scale,
                                             .add = pb ? pb + i0 * L + j0 : nullptr,
                                             .ld_add = L};
                        gemm<V>(qbh + i0 * D, D, kT.data() + j0, ldt, s.data(), kKB, mq,
                                pb ? kb : kbv, Dh, scores);
                        if (pb && kb < kbv)
                            for (int64_t r = 0; r < mq; ++r)
                                std::fill(s.data() + r * kKB + kb, s.data() + r * kKB + kbv, 0.0f);
                        online_softmax_tile<V>(s.data(), kKB, mq, kbv, bias.data() + j0,
                                               keep.data() + j0, j0 + kbv <= first_masked,
                                               diag, m.data(), l.data(), o.data(), Dh, Dh);
                        // o (mq, Dh) += p (mq, kb) . v block (kb, Dh)
                        gemm<V>(s.data(), kKB, vbh + j0 * Dkv, Dkv, o.data(), Dh, mq, Dh, kb, true);
                    }
                    for (int64_t r = 0; r < mq; ++r) {
                        const float inv = l[n(r)] > 0.0f ? 1.0f / l[n(r)] : 0.0f;
                        float* dst = obh + (i0 + r) * D;
                        const float* src = o.data() + r * Dh;
                        for (int64_t d = 0; d < Dh; ++d) dst[d] = src[d] * inv;
                    }
                }
            }
    }
}

}  // namespace
}  // namespace bioinfer::cpu
