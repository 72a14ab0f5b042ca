// The kernel table: raw-pointer signatures every backend implements, the one dispatch contract
// between ops and the backends. ops.cpp checks shapes and dtypes once, then calls the table of the
// thread's backend (registry.h). Shapes are (rows, cols) row-major; pointers address the
// backend's device. Every kernel takes the call's Context first. Nothing here knows ops or nn.
#pragma once
#include <cstdint>

#include "bioinfer/device.h"
#include "bioinfer/dtype.h"

namespace bioinfer {

// The activation a linear layer applies after its bias (GELU: erf form; GeluTanh: tanh form;
// Sigmoid: the gates of AlphaFold-style blocks).
enum class Act : uint8_t { None, Gelu, GeluTanh, Relu, Sigmoid };

}  // namespace bioinfer

namespace bioinfer::kernels {

// What a kernel runs on: the device and a stream-like handle its launches queue on (null on the
// CPU, where kernels run synchronously on the calling thread's OpenMP team).
struct Context {
    Device device;
    void* stream = nullptr;
};

// The arguments of invariant point attention (AlphaFold 2 algorithm 22) for L residues, H heads,
// C channels per head, Pq query/key points and Pv value points per head, Cz pair channels.
// q (L, H*C); kv (L, 2*H*C) per head [k | v]; q_points (L, 3*H*Pq) and kv_points
// (L, 3*H*(Pq+Pv)), each in the residue's local frame as all x, then all y, then all z, per head
// [key points | value points]; bias (L*L, H) = linear_b(z); z (L, L, Cz); frames (L, 7) as
// quaternion (w, x, y, z) and translation; head_weights (H) = softplus(w_h) * point scale.
// out (L, H*(C + 4*Pv + Cz)): scalar values, value points in the local frame (x, y, z blocks of
// H*Pv) and their norms, pair values.
struct IpaArgs {
    const float *q, *kv, *q_points, *kv_points, *bias, *z, *frames, *head_weights;
    float* out;
    int64_t L, H, C, Pq, Pv, Cz;
    float eps;
};

// AlphaFold 2's frames to atom positions (algorithms 24 and 25: torsion angles to the 8
// rigid-group frames, literature positions to atom14) for L residues. backbone (L, 7) as
// quaternion and translation (in the structure module's units: scaled by trans_scale here);
// angles (L, 7, 2) normalised (sin, cos); aatype (L) in [0, R). Residue tables (R types):
// default_frames (R, 8, 4, 4), group_of_atom (R, 14), atom_mask (R, 14), literature positions
// (R, 14, 3). Writes frames_out (L, 7) (quaternion, scaled translation) and positions (L, 14, 3).
struct AtomFrameArgs {
    const float *backbone, *angles;
    const int32_t* aatype;
    const float* default_frames;
    const int32_t* group_of_atom;
    const float *atom_mask, *lit_positions;
    float *frames_out, *positions;
    int64_t L;
    float trans_scale;
};

// A paired linear's gate: y = silu(first) * second (SwiGLU) or sigmoid(first) * second.
enum class Glu : uint8_t { Silu, Sigmoid };

// One fused linear over x (M, K) whose element (m, k) is x[m * x_rs + k * x_cs]:
//   t = norm(x) . w^T + bias           (norm: layer norm over K with ln_gamma/ln_beta, when set)
//   paired weights: t = glu(norm(x) . wa^T + ba) * (norm(x) . wb^T + bb); bias ba, bias2 bb
//   v = scale * act(t) (act: single weights only), times mul[m * mul_rs + n] when mul is set
//   y[m * y_rs + n * y_cs] = v, or += v with accumulate.
struct PanelLinearArgs {
    const float* x = nullptr;
    int64_t x_rs = 0, x_cs = 1;
    const float *ln_gamma = nullptr, *ln_beta = nullptr;
    float ln_eps = 1e-5f;
    const void* packed = nullptr;  // pack_panels(w, wb)
    bool pairs = false;
    const float *bias = nullptr, *bias2 = nullptr;  // each N or null
    Act act = Act::None;
    Glu glu = Glu::Silu;
    float scale = 1.0f;
    const float* mul = nullptr;
    int64_t mul_rs = 0;
    float* y = nullptr;
    int64_t y_rs = 0, y_cs = 1;
    bool accumulate = false;
    int64_t M = 0, K = 0, N = 0;  // N: output columns
};

// A backend fills the core entries; the rest are optional. Optional: pack_linear / free_packed
// (weights run unpacked), pack_panels / panel_linear (ops runs a fused linear as its parts), and
// the model-specific entries, each run by one model family only (marked "model-specific" below):
// left null, ops composes each from core entries on the backend's device (ops/fallback.cpp), so a
// new backend runs every model once it fills the core and may add those kernels later.
struct KernelTable {
    const char* name;
    // y[M,N] = scale * act(x[M,K] . w[N,K]^T + b[N]); with accumulate, y += that instead.
    // packed, when not null, is this table's pack_linear(w) and is read instead of w.
    void (*linear)(const Context& ctx, const float* x, const float* w, const void* packed, const float* b, float* y,
                   int64_t M, int64_t K, int64_t N, Act act, float scale, bool accumulate);
    // Optional: w (N, K), stored as w_dtype, rearranged once into the layout `linear` reads
    // fastest, for GEMMs computing in `compute` (F32, or BF16 with fp32 accumulation: then `linear`
    // rounds x to bf16). Returns null when that compute dtype is not available. rows: the rows
    // the weight will mostly run at (ops::linear_rows(); 0 when not known), for a backend that
    // picks among its GEMMs by the rows.
    void* (*pack_linear)(const Context& ctx, const void* w, DType w_dtype, int64_t K, int64_t N,
                         DType compute, int64_t rows);
    void (*free_packed)(const Context& ctx, void* packed);
    // c[M,N] = a[M,K] . b[K,N] with row strides lda, ldb, ldc (single thread; callers parallelise).
    void (*gemm_nn)(const Context& ctx, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                    int64_t ldc, int64_t M, int64_t N, int64_t K);
    // Multi-head attention over B sequences packed as rows of q, out (rows, H*Dh) and k, v
    // (rows, Hkv*Dh): sequence b is rows [cu[b], cu[b+1]) and attends within itself only. Query
    // head h reads key/value head h / (H / Hkv) (grouped-query attention; Hkv divides H). causal:
    // query i sees keys j <= i only. key_valid (rows, 1 = attend) may be null (every key attends).
    // Scores are scaled by `scale`. probs, when not null, is (B, H, P, P) with P >= the longest
    // sequence and receives each sequence's probabilities in its top-left corner (the rest zero).
    // A query row with no key to attend gets zeros. bias, when not null, is added to the scaled
    // scores: sequence b (length L) reads bias + b * bias_stride as (H, L, L) (query, key);
    // bias_stride 0 shares one bias among all sequences (which then have one length).
    void (*attention)(const Context& ctx, const float* q, const float* k, const float* v, float* out,
                      const int64_t* cu, int64_t B, int64_t H, int64_t Hkv, int64_t Dh,
                      float scale, bool causal, const uint8_t* key_valid, float* probs,
                      int64_t P, const float* bias, int64_t bias_stride);
    void (*layer_norm)(const Context& ctx, const float* x, const float* gamma, const float* beta, float* y,
                       int64_t rows, int64_t d, float eps);
    void (*gelu)(const Context& ctx, const float* x, float* y, int64_t n);       // erf GELU, may run in place
    void (*gelu_tanh)(const Context& ctx, const float* x, float* y, int64_t n);  // tanh GELU, may run in place
    // y = silu(gate) * up = gate / (1 + exp(-gate)) * up; may run in place on either input.
    void (*swiglu)(const Context& ctx, const float* gate, const float* up, float* y, int64_t n);
    // Row softmax in place; additive (cols) and keep (cols, 1 = keep) masks are optional.
    void (*softmax)(const Context& ctx, float* x, int64_t rows, int64_t cols, const float* additive,
                    const uint8_t* keep);
    // Rotate-half rotary on x viewed as (n_pos, heads, dh) with position stride pos_stride;
    // cos/sin are (n_pos, dh/2).
    void (*rotary)(const Context& ctx, float* x, int64_t n_pos, int64_t pos_stride, int64_t heads, int64_t dh,
                   const float* cos, const float* sin);
    // c[g] (M, N) = op(a[g]) . op(b[g]) for g < G (contiguous batches): a[g] is (M, K), or
    // stored (K, M) when trans_a; b[g] is (K, N), or stored (N, K) when trans_b.
    void (*bmm)(const Context& ctx, const float* a, const float* b, float* c, int64_t G, int64_t M, int64_t N,
                int64_t K, bool trans_a, bool trans_b);
    void (*add)(const Context& ctx, const float* a, const float* b, float* y, int64_t n);
    void (*mul)(const Context& ctx, const float* a, const float* b, float* y, int64_t n);  // may run in place
    void (*scale)(const Context& ctx, const float* a, float s, float* y, int64_t n);

    // --- data movement and glue (the loops models used to write over raw data): core, but for
    // the model-specific ones ---
    // dst = src (or dst += src for F32 with accumulate) over an ndim index space: element i of dim
    // d sits at stride src_strides[d] / dst_strides[d] elements; 4-byte elements (F32, I32).
    void (*copy_strided)(const Context& ctx, const void* src, void* dst, int ndim,
                         const int64_t* shape, const int64_t* src_strides,
                         const int64_t* dst_strides, bool accumulate) = nullptr;
    // y[r, c] (op)= a[r, c], b[r, c] over rows x cols with row strides (columns contiguous):
    // Add: y = a + b; Mul: y = a * b; AddMul: y += a * b (b unused for none).
    void (*binary_rows)(const Context& ctx, int op, const float* a, int64_t lda, const float* b,
                        int64_t ldb, float* y, int64_t ldy, int64_t rows, int64_t cols) = nullptr;
    void (*add_mul)(const Context& ctx, const float* a, const float* b, float* y, int64_t n) = nullptr;  // y += a * b
    void (*axpy)(const Context& ctx, float alpha, const float* x, float* y, int64_t n) = nullptr;  // y += alpha * x
    // y[r, :] = x[r, :] * f[r] over rows x cols (may run in place).
    void (*scale_rows)(const Context& ctx, const float* x, const float* f, float* y, int64_t rows,
                       int64_t cols) = nullptr;
    // y = act(x + shift) elementwise (may run in place).
    void (*activation)(const Context& ctx, Act act, const float* x, float shift, float* y, int64_t n) = nullptr;
    // out[i] = table[ids[i]] (+= with accumulate), rows of D; ids are < V (checked by ops or
    // trusted); a negative id is a zero row (out[i] = 0, or left as it is with accumulate).
    void (*embedding)(const Context& ctx, const int32_t* ids, int64_t n, const float* table,
                      int64_t D, float* out, bool accumulate) = nullptr;
    // Model-specific (ESM-2).
    // ESM's token dropout at inference over B packed sequences (rows cu[b]..cu[b+1]) of D: rows
    // whose id is mask_id become zero, the others x * keep / (1 - masked fraction of their
    // sequence).
    void (*token_dropout)(const Context& ctx, float* x, const int32_t* ids, const int64_t* cu,
                          int64_t B, int64_t D, int32_t mask_id, float keep) = nullptr;
    // The pair features of a sequence state for pair rows [r0, r1): qk (L, 2I) holds [q | k];
    // out ((r1 - r0) * L, 2I) row (i - r0, j) = [q_j * k_i | q_j - k_i].
    void (*outer_product_difference)(const Context& ctx, const float* qk, int64_t L, int64_t I,
                                     int64_t r0, int64_t r1, float* out) = nullptr;
    // Model-specific (ESM-2).
    // ESM-2's contact features of one sequence: acc (L, L) += sum over heads h, in order, of
    // w[h] * APC(A + A^T), A = probs[h] (P, P) at positions 1..L (past <cls>).
    void (*contact_apc)(const Context& ctx, const float* probs, int64_t H, int64_t P, int64_t L,
                        const float* w, float* acc) = nullptr;
    // Model-specific (ESMFold).
    // y[r] = x[r] / sqrt(max(sum_c x[r, c]^2, eps)) over rows of d.
    void (*l2_normalize)(const Context& ctx, const float* x, float* y, int64_t rows, int64_t d,
                         float eps) = nullptr;
    // Model-specific (ESMFold2).
    // y[r] = x[r] / sqrt(mean_c x[r, c]^2 + eps) over rows of d (a weightless RMSNorm).
    void (*rms_norm)(const Context& ctx, const float* x, float* y, int64_t rows, int64_t d,
                     float eps) = nullptr;
    // out[r] = sum_k probs[r, k] * values[k], accumulated in k order (a binned expectation).
    void (*bin_expectation)(const Context& ctx, const float* probs, const float* values, float* out,
                            int64_t rows, int64_t K) = nullptr;
    void (*max_value)(const Context& ctx, const float* x, int64_t n, float* out) = nullptr;  // out[0] = max
    // out[i, j] = clamp(index[j] - index[i], -bins, bins) + bins + 1 (relative-position classes).
    void (*relpos_classes)(const Context& ctx, const int32_t* index, int64_t L, int64_t bins,
                           int32_t* out) = nullptr;
    // Model-specific (ESMFold).
    // AlphaFold's virtual C-beta from N, CA, C (slots 0..2 of each residue's `stride` atoms).
    void (*virtual_cb)(const Context& ctx, const float* atoms, int64_t L, int64_t stride, float* out) = nullptr;
    // out[i, j] = number of squared bounds (nb, ascending) below |p_j - p_i|^2; points (L, 3).
    void (*distance_bins)(const Context& ctx, const float* points, int64_t L,
                          const float* bounds_sq, int64_t nb, int32_t* out) = nullptr;
    // Model-specific (Boltz-2).
    // Windowed atom-pair geometry (Boltz's atom encoder) over K windows of W query atoms and H
    // key slots: keys[k * H + h] is the key atom of slot h of window k (-1: none). Row
    // ((k * W + w) * H + h) of out (K * W * H, 5) = [d (3), 1 / (1 + |d|^2), v] for query
    // q = k * W + w: d = pos[key] - pos[q] (pos (A, 3); a missing key sits at 0), v = 1 when
    // valid[q], valid[key] and uid[q] == uid[key], else 0 (a missing key is invalid).
    void (*atom_pair_geometry)(const Context& ctx, const float* pos, const float* valid,
                               const float* uid, const int32_t* keys, int64_t K, int64_t W,
                               int64_t H, float* out) = nullptr;
    // Model-specific (ESMFold).
    // frames (L, 7) composed in place with updates (L, 6) (x, y, z, tx, ty, tz): AlphaFold's
    // quaternion update, q' = normalise(q + q * (0, x, y, z)), t' = t + R(q) (tx, ty, tz).
    void (*quat_update)(const Context& ctx, float* frames, const float* update, int64_t L) = nullptr;
    // Optional, fp32: w (N, K) (and wb (N, K): paired) stored as w_dtype, packed for
    // panel_linear; freed with free_packed.
    void* (*pack_panels)(const Context& ctx, const void* w, const void* wb, DType w_dtype,
                         int64_t K, int64_t N) = nullptr;
    void (*panel_linear)(const Context& ctx, const PanelLinearArgs& a) = nullptr;
    // Model-specific (ESMFold): invariant point attention and atoms from torsions.
    void (*ipa)(const Context& ctx, const IpaArgs& a) = nullptr;
    void (*atom_frames)(const Context& ctx, const AtomFrameArgs& a) = nullptr;
};

// t without its model-specific entries: the table a new backend starts from (the op tests run
// ops' compositions through it).
inline KernelTable core_only(KernelTable t) {
    t.token_dropout = nullptr;
    t.contact_apc = nullptr;
    t.l2_normalize = nullptr;
    t.rms_norm = nullptr;
    t.virtual_cb = nullptr;
    t.atom_pair_geometry = nullptr;
    t.quat_update = nullptr;
    t.ipa = nullptr;
    t.atom_frames = nullptr;
    return t;
}

// binary_rows' operations.
enum BinaryOp : int { kBinaryAdd = 0, kBinaryMul = 1, kBinaryAddMul = 2 };

}  // namespace bioinfer::kernels
