// THE op list. Each op checks shapes, dtypes and devices, then runs the kernel of the calling
// thread's backend. Every op has a plain fp32 reference (src/backend/ref/) that the op tests hold
// every registered backend to.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/kernels.h"
#include "backend/registry.h"
#include "bioinfer/tensor.h"

namespace bioinfer::ops {

// The backend ops run on: the process default (set_backend; "cpu" unless changed), or on a thread
// inside a BackendScope, that scope's (a worker runs on its device's backend this way).
void set_backend(const std::string& name);  // a registered name (backend::find), or "cpu"
const backend::Backend& current_backend();
const char* backend_name();  // the current backend's kernel table name (the tuned table's key)
// The context kernels receive on this thread: the backend's device and the scope's stream.
kernels::Context current_context();

class BackendScope {
public:
    explicit BackendScope(const backend::Backend& b, void* stream = nullptr);
    explicit BackendScope(const std::string& name) : BackendScope(backend::get(name)) {}
    ~BackendScope();
    BackendScope(const BackendScope&) = delete;
    BackendScope& operator=(const BackendScope&) = delete;

private:
    const backend::Backend* prev_;
    void* prev_stream_;
};

struct Epilogue {
    Act act = Act::None;      // activation after the bias (GELU erf or tanh form)
    float scale = 1.0f;       // multiply the result (after bias and GELU) by this
    bool accumulate = false;  // out += result (fused residual add) instead of out = result
};

// A linear weight rearranged once, at load, into the layout the backend's GEMM reads fastest.
// It remembers the backend that packed it; under another backend it is ignored.
class PackedWeight;
using PackedWeightPtr = std::shared_ptr<const PackedWeight>;
// Packs w (N, K) (F32, BF16 or F16 storage) for the current backend's GEMM computing in
// `compute` (F32; BF16 with fp32 accumulation; I8: w quantized per output channel, x per row on
// every call, int32 accumulation); null when the backend has no such packing.
PackedWeightPtr pack_linear_weight(const Tensor& w, DType compute = DType::F32);

// The compute dtype model loaders pack their linear layers for (F32 unless --precision bf16 or
// int8).
void set_matmul_precision(DType compute);
DType matmul_precision();
// The rows the linear layers packed from now on will mostly run at: 0 (the default) when not
// known, as for embedding's batches of at least a thousand tokens; a structure model's loader
// sets a protein's residues (kFoldLinearRows), since its token-level linears run at one
// protein's length. A backend with more than one GEMM may time them at these rows when packing.
void set_linear_rows(int64_t rows);
int64_t linear_rows();
inline constexpr int64_t kFoldLinearRows = 256;
// Sets linear_rows() for the scope's lifetime.
class LinearRowsScope {
  public:
    explicit LinearRowsScope(int64_t rows) : prev_(linear_rows()) { set_linear_rows(rows); }
    ~LinearRowsScope() { set_linear_rows(prev_); }
    LinearRowsScope(const LinearRowsScope&) = delete;
    LinearRowsScope& operator=(const LinearRowsScope&) = delete;

  private:
    int64_t prev_;
};

// The compute dtype of a model's output heads (the masked-LM logits): F32 under int8, whose
// per-row rounding of the head's input would move near-tied logits; the current one otherwise.
DType head_precision();
// Sets matmul_precision() for the scope's lifetime (a head loaded at head_precision()).
class MatmulPrecisionScope {
  public:
    explicit MatmulPrecisionScope(DType compute) : prev_(matmul_precision()) {
        set_matmul_precision(compute);
    }
    ~MatmulPrecisionScope() { set_matmul_precision(prev_); }
    MatmulPrecisionScope(const MatmulPrecisionScope&) = delete;
    MatmulPrecisionScope& operator=(const MatmulPrecisionScope&) = delete;

  private:
    DType prev_;
};

// out (M, N) = x (M, K) . w (N, K)^T + bias (N); `packed`, when given, is pack_linear_weight(w).
void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out, Epilogue ep = {},
            const PackedWeight* packed = nullptr);
// A fused linear (the own GEMM's panel_linear where the backend has one):
//   t = LN(x) . w^T + bias                      LN over K when ln_gamma is set, else x itself
//   with w2: t = glu(LN(x) . w^T + bias) * (LN(x) . w2^T + bias2)   (SwiGLU, or a sigmoid gate)
//   out (+)= ep.scale * ep.act(t) (* mul)       += with ep.accumulate; act with one weight only
// x (M, K), out and mul (M, N) are 2-D views: any strides with one dim contiguous (x read as the
// transpose of a channel-major tensor, out written channel-major); mul's rows contiguous.
struct FusedLinear {
    const Tensor *ln_gamma = nullptr, *ln_beta = nullptr;
    float ln_eps = 1e-5f;
    const Tensor *w2 = nullptr, *bias2 = nullptr;
    kernels::Glu glu = kernels::Glu::Silu;
    Epilogue ep;
    const Tensor* mul = nullptr;
};
// w (and w2, same shape and dtype) packed for fused_linear; null where the backend has no
// fused linear (fused_linear then runs its parts one op at a time).
PackedWeightPtr pack_fused_weight(const Tensor& w, const Tensor* w2 = nullptr);
void fused_linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out,
                  const FusedLinear& f, const PackedWeight* packed);

// Normalises over the last dim of x (..., D).
void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& out);
void gelu(const Tensor& x, Tensor& out);
void gelu_tanh(const Tensor& x, Tensor& out);
// out = silu(gate) * up, elementwise (the SwiGLU feed-forward's gate).
void swiglu(const Tensor& gate, const Tensor& up, Tensor& out);
// Softmax over the last dim of x (R, C) in place. additive: (C) added first; keep: C bytes.
void softmax(Tensor& x, const Tensor* additive, const uint8_t* keep);
// Rotary on x (B, L, H, Dh) in place using positions 0..L-1; cos/sin (>= L, Dh/2).
void rotary(Tensor& x, const Tensor& cos, const Tensor& sin);
// Rotary on packed sequences x (N, H, Dh): each sequence's rows get positions 0..len-1.
void rotary_varlen(Tensor& x, const std::vector<int64_t>& cu_seqlens, const Tensor& cos,
                   const Tensor& sin);
// cos/sin tables (n_pos, Dh/2) from inverse frequencies (Dh/2), as fp32 position * inv_freq.
void rotary_tables(const Tensor& inv_freq, int64_t n_pos, Tensor& cos, Tensor& sin);
struct AttentionOpts {
    int64_t kv_heads = 0;  // key/value heads (grouped-query attention); 0: as many as query heads
    bool causal = false;   // query i sees keys j <= i only
    // Added to the scaled scores: (H, L, L) shared by every sequence of the batch, or
    // (B, H, L, L); (query, key) order. Pair-biased attention (ESMFold, AlphaFold-style trunks).
    const Tensor* bias = nullptr;
};
// Scaled-dot-product attention. q: (B, L, H*Dh); k, v: (B, L, Hkv*Dh); key_valid: B*L bytes
// (1 = real token); out: (B, L, H*Dh). probs (B, H, L, L), when given, receives the softmax
// probabilities.
void attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, float scale,
               const std::vector<uint8_t>& key_valid, Tensor& out, Tensor* probs,
               const AttentionOpts& opts = {});
// The same over B sequences of different lengths packed as rows of q, k, v, out (N, H*Dh):
// sequence b is rows [cu_seqlens[b], cu_seqlens[b+1]) and attends within itself only (no padding
// anywhere). probs (B, H, P, P), P >= the longest, receives each sequence's probabilities in its
// top-left corner.
void attention_varlen(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                      float scale, const std::vector<int64_t>& cu_seqlens, Tensor& out,
                      Tensor* probs);
// out (n, D) = table (V, D) rows at ids (out += them with accumulate); an id outside [0, V) is
// an error.
void embedding(const std::vector<int32_t>& ids, const Tensor& table, Tensor& out,
               bool accumulate = false);
// The same with ids an I32 tensor (n) on the backend's device (computed by an op: bins, classes,
// gather indices); ids are trusted to lie below V, and a negative id gives a zero row (adds
// nothing with accumulate): a gather whose missing rows are zeros (windows past the edge, padding).
void embedding(const Tensor& ids, const Tensor& table, Tensor& out, bool accumulate = false);
void add(const Tensor& a, const Tensor& b, Tensor& out);
// out = a * b elementwise (may alias a or b); contiguous, or 2-D views with contiguous rows.
void mul(const Tensor& a, const Tensor& b, Tensor& out);
// out[g] (M, N) = op(a[g]) . op(b[g]) for every g of G: a (G, M, K), or (G, K, M) read
// transposed when trans_a; b (G, K, N), or (G, N, K) read transposed when trans_b.
void bmm(const Tensor& a, const Tensor& b, Tensor& out, bool trans_a = false, bool trans_b = false);
void scale(const Tensor& a, float s, Tensor& out);

// --- data movement and glue ---
// dst = src elementwise (same shape; F32 or I32); either may be a strided view (slice, permute).
void copy(const Tensor& src, Tensor& dst);
// dst += src elementwise (F32); either may be a strided view.
void add_into(const Tensor& src, Tensor& dst);
// A contiguous copy of a (possibly strided) tensor.
Tensor contiguous(const Tensor& t);
// out += a * b elementwise. a, b and out are contiguous, or 2-D views whose rows are
// (as mul and add also accept).
void add_mul(const Tensor& a, const Tensor& b, Tensor& out);
// y += alpha * x elementwise.
void axpy(float alpha, const Tensor& x, Tensor& y);
// out (R, C) = x (R, C) with row r multiplied by factors (R); may run in place.
void scale_rows(const Tensor& x, const Tensor& factors, Tensor& out);
// out = act(x + shift) elementwise (Relu, Sigmoid, Gelu, GeluTanh); may run in place.
void activation(const Tensor& x, Act act, Tensor& out, float shift = 0.0f);
// ESM's token dropout at inference on packed rows x (N, D) of sequences cu_seqlens with token ids
// (N): <mask> rows zeroed, the others scaled by keep / (1 - the sequence's masked fraction).
void token_dropout(Tensor& x, const std::vector<int32_t>& ids,
                   const std::vector<int64_t>& cu_seqlens, int32_t mask_id, float keep);
// Pair rows [r0, r1) of the outer product and difference of qk (L, 2I) = [q | k]:
// out ((r1 - r0) * L, 2I), row (i - r0) * L + j = [q_j * k_i | q_j - k_i].
void outer_product_difference(const Tensor& qk, int64_t r0, int64_t r1, Tensor& out);
// ESM-2's contact features of one sequence: acc (L, L) += sum over heads of
// weights[h] * APC(A + A^T), A = probs[h] (P, P) over positions 1..L.
void contact_apc(const Tensor& probs, const Tensor& weights, Tensor& acc);
// out (..., d) = x / sqrt(max(sum over the last dim of x^2, eps)); may run in place.
void l2_normalize(const Tensor& x, float eps, Tensor& out);
// out (..., d) = x / sqrt(mean over the last dim of x^2 + eps): a weightless RMSNorm; may run
// in place.
void rms_norm(const Tensor& x, float eps, Tensor& out);
// out (R) = sum_k probs (R, K)[:, k] * values (K)[k], in k order: the expected value over bins.
void bin_expectation(const Tensor& probs, const Tensor& values, Tensor& out);
// The largest element (read back to the host).
float max_value(const Tensor& x);
// out (L, L) I32 = clamp(index[j] - index[i], -bins, bins) + bins + 1 for index (L) I32.
void relpos_classes(const Tensor& index, int64_t bins, Tensor& out);
// AlphaFold's virtual C-beta (L, 3) from atoms (L, A, 3) whose first three are N, CA, C.
void virtual_cb(const Tensor& atoms, Tensor& out);
// out (L, L) I32 = the number of squared distance bounds (K, ascending) below
// |points[j] - points[i]|^2, points (L, 3).
void distance_bins(const Tensor& points, const Tensor& bounds_sq, Tensor& out);
// Boltz's windowed atom-pair geometry. pos (A, 3), valid (A), uid (A) F32 (exact integers);
// keys (K, H) I32 the atom in key slot h of window k (-1: none); window k's W queries are atoms
// k*W..k*W+W-1 (A = K * W). out (K, W, H, 5) = [d (3), 1 / (1 + |d|^2), v]: d = pos[key] -
// pos[query] (keys minus queries; a missing key sits at the origin), v = 1 when both atoms are
// valid and share a uid (a missing key is invalid), else 0.
void atom_pair_geometry(const Tensor& pos, const Tensor& valid, const Tensor& uid,
                        const Tensor& keys, Tensor& out);
// frames (L, 7) (quaternion, translation) composed in place with updates (L, 6).
void quat_update(Tensor& frames, const Tensor& update);
// Invariant point attention's core (see kernels::IpaArgs for the layouts): out (L, H*(C+4Pv+Cz)).
struct IpaInputs {
    const Tensor *q, *kv, *q_points, *kv_points, *bias, *z, *frames, *head_weights;
    int64_t heads, qk_points, v_points;
    float eps;
};
void ipa(const IpaInputs& in, Tensor& out);
// AlphaFold 2's atoms from frames and torsions (kernels::AtomFrameArgs): backbone (L, 7),
// angles (L, 7, 2), aatype (L) I32, the residue tables; frames_out (L, 7), positions (L, 14, 3).
struct ResidueTables {
    Tensor default_frames;  // (R, 8, 4, 4)
    Tensor group_of_atom;   // (R, 14) I32
    Tensor atom_mask;       // (R, 14)
    Tensor lit_positions;   // (R, 14, 3)
};
void atom_frames(const Tensor& backbone, const Tensor& angles, const Tensor& aatype,
                 const ResidueTables& tables, float trans_scale, Tensor& frames_out,
                 Tensor& positions);

}  // namespace bioinfer::ops
