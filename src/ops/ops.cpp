// Op entry points: shape and dtype checks, then the selected backend's kernel table.
#include "ops/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "bioinfer/error.h"
#include "ops/kernels.h"

namespace bioinfer::ops {
namespace {

Backend g_backend = Backend::Cpu;

const kernels::KernelTable& table() {
    return g_backend == Backend::Ref ? kernels::ref_kernels() : kernels::cpu_kernels();
}

void check_f32_contig(const Tensor& t, const char* op, const char* name) {
    BI_CHECK(t.defined(), op, name, " is undefined");
    BI_CHECK(t.dtype() == DType::F32, op, name, ": expected F32, got ", dtype_name(t.dtype()));
    BI_CHECK(t.is_contiguous(), op, name, " is not contiguous");
}

}  // namespace

class PackedWeight {
public:
    PackedWeight(const kernels::KernelTable* t, void* h, int64_t K, int64_t N)
        : table(t), handle(h), k(K), n(N) {}
    ~PackedWeight() { table->free_packed(handle); }
    PackedWeight(const PackedWeight&) = delete;
    PackedWeight& operator=(const PackedWeight&) = delete;
    const kernels::KernelTable* table;
    void* handle;
    int64_t k, n;
};

void set_backend(Backend b) { g_backend = b; }
Backend backend() { return g_backend; }
const char* backend_name() { return table().name; }

PackedWeightPtr pack_linear_weight(const Tensor& w, DType compute) {
    BI_CHECK(w.defined() && w.is_contiguous(), "pack_linear_weight", "w is undefined or strided");
    BI_CHECK(w.ndim() == 2, "pack_linear_weight", "w: expected 2-D, got ", shape_str(w.shape()));
    const auto& t = table();
    if (!t.pack_linear) return nullptr;
    const int64_t N = w.size(0), K = w.size(1);
    void* h = t.pack_linear(w.raw(), w.dtype(), K, N, compute);
    return h ? std::make_shared<const PackedWeight>(&t, h, K, N) : nullptr;
}

namespace {
DType g_matmul_precision = DType::F32;
}

void set_matmul_precision(DType compute) { g_matmul_precision = compute; }
DType matmul_precision() { return g_matmul_precision; }

void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out, Epilogue ep,
            const PackedWeight* packed) {
    check_f32_contig(x, "linear", "x");
    check_f32_contig(out, "linear", "out");
    const auto& t = table();
    const bool use_packed = packed && packed->table == &t;
    if (!use_packed) check_f32_contig(w, "linear", "w");  // a packed weight keeps its own dtype
    BI_CHECK(w.ndim() == 2, "linear", "w: expected 2-D, got ", shape_str(w.shape()));
    const int64_t K = w.size(1), N = w.size(0);
    BI_CHECK(x.ndim() >= 1 && x.size(-1) == K, "linear", "x: expected last dim ", K, ", got ",
             shape_str(x.shape()));
    const int64_t M = x.numel() / K;
    BI_CHECK(out.numel() == M * N && out.size(-1) == N, "linear", "out: expected ", M, " x ", N,
             ", got ", shape_str(out.shape()));
    if (bias) {
        check_f32_contig(*bias, "linear", "bias");
        BI_CHECK(bias->numel() == N, "linear", "bias: expected [", N, "], got ",
                 shape_str(bias->shape()));
    }
    BI_CHECK(!(ep.act != Act::None && ep.accumulate), "linear",
             "an activation and accumulate cannot be combined");
    if (M == 0) return;
    BI_CHECK(!use_packed || (packed->k == K && packed->n == N), "linear", "packed weight is ",
             packed->n, " x ", packed->k, ", w is ", shape_str(w.shape()));
    t.linear(x.f32(), use_packed ? nullptr : w.f32(), use_packed ? packed->handle : nullptr, bias ? bias->f32() : nullptr,
             out.f32(), M, K, N, ep.act, ep.scale, ep.accumulate);
}

void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& out) {
    check_f32_contig(x, "layer_norm", "x");
    check_f32_contig(out, "layer_norm", "out");
    const int64_t D = x.size(-1);
    BI_CHECK(gamma.numel() == D && beta.numel() == D, "layer_norm", "weight/bias: expected [", D,
             "], got ", shape_str(gamma.shape()), " / ", shape_str(beta.shape()));
    BI_CHECK(out.numel() == x.numel(), "layer_norm", "out: expected ", shape_str(x.shape()),
             ", got ", shape_str(out.shape()));
    table().layer_norm(x.f32(), gamma.f32(), beta.f32(), out.f32(), x.numel() / D, D, eps);
}

void gelu(const Tensor& x, Tensor& out) {
    check_f32_contig(x, "gelu", "x");
    check_f32_contig(out, "gelu", "out");
    BI_CHECK(out.numel() == x.numel(), "gelu", "out size ", out.numel(), " != ", x.numel());
    table().gelu(x.f32(), out.f32(), x.numel());
}

void gelu_tanh(const Tensor& x, Tensor& out) {
    check_f32_contig(x, "gelu_tanh", "x");
    check_f32_contig(out, "gelu_tanh", "out");
    BI_CHECK(out.numel() == x.numel(), "gelu_tanh", "out size ", out.numel(), " != ", x.numel());
    table().gelu_tanh(x.f32(), out.f32(), x.numel());
}

void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) {
    check_f32_contig(gate, "swiglu", "gate");
    check_f32_contig(up, "swiglu", "up");
    check_f32_contig(out, "swiglu", "out");
    BI_CHECK(gate.numel() == up.numel() && out.numel() == gate.numel(), "swiglu", "sizes differ: gate ",
             shape_str(gate.shape()), ", up ", shape_str(up.shape()), ", out ", shape_str(out.shape()));
    table().swiglu(gate.f32(), up.f32(), out.f32(), gate.numel());
}

void softmax(Tensor& x, const Tensor* additive, const uint8_t* keep) {
    check_f32_contig(x, "softmax", "x");
    const int64_t C = x.size(-1);
    if (additive) {
        check_f32_contig(*additive, "softmax", "additive");
        BI_CHECK(additive->numel() == C, "softmax", "additive mask: expected [", C, "], got ",
                 shape_str(additive->shape()));
    }
    table().softmax(x.f32(), x.numel() / C, C, additive ? additive->f32() : nullptr, keep);
}

void rotary_tables(const Tensor& inv_freq, int64_t n_pos, Tensor& cos, Tensor& sin) {
    check_f32_contig(inv_freq, "rotary_tables", "inv_freq");
    const int64_t half = inv_freq.numel();
    cos = Tensor::empty({n_pos, half});
    sin = Tensor::empty({n_pos, half});
    const float* f = inv_freq.f32();
    for (int64_t p = 0; p < n_pos; ++p) {
        for (int64_t i = 0; i < half; ++i) {
            // fp32 product as upstream computes it, then cos/sin of that fp32 angle.
            float angle = float(p) * f[i];
            cos.f32()[p * half + i] = std::cos(angle);
            sin.f32()[p * half + i] = std::sin(angle);
        }
    }
}

void rotary(Tensor& x, const Tensor& cos, const Tensor& sin) {
    check_f32_contig(x, "rotary", "x");
    BI_CHECK(x.ndim() == 4, "rotary", "x: expected (B, L, H, Dh), got ", shape_str(x.shape()));
    const int64_t B = x.size(0), L = x.size(1), H = x.size(2), Dh = x.size(3);
    BI_CHECK(Dh % 2 == 0, "rotary", "head dim must be even, got ", Dh);
    BI_CHECK(cos.ndim() == 2 && cos.size(0) >= L && cos.size(1) == Dh / 2 &&
                 sin.shape() == cos.shape(),
             "rotary", "tables: expected (>= ", L, ", ", Dh / 2, "), got ", shape_str(cos.shape()));
    for (int64_t b = 0; b < B; ++b)
        table().rotary(x.f32() + b * L * H * Dh, L, H * Dh, H, Dh, cos.f32(), sin.f32());
}

void attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, float scale,
               const std::vector<uint8_t>& key_valid, Tensor& out, Tensor* probs,
               const AttentionOpts& opts) {
    check_f32_contig(q, "attention", "q");
    check_f32_contig(k, "attention", "k");
    check_f32_contig(v, "attention", "v");
    check_f32_contig(out, "attention", "out");
    BI_CHECK(q.ndim() == 3, "attention", "q: expected (B, L, H*Dh), got ", shape_str(q.shape()));
    const int64_t B = q.size(0), L = q.size(1), D = q.size(2);
    BI_CHECK(heads > 0 && D % heads == 0, "attention", "width ", D, " not divisible by ", heads,
             " heads");
    const int64_t Dh = D / heads, Hkv = opts.kv_heads > 0 ? opts.kv_heads : heads;
    BI_CHECK(heads % Hkv == 0, "attention", heads, " query heads are not a multiple of ", Hkv,
             " key/value heads");
    const Shape kv{B, L, Hkv * Dh};
    BI_CHECK(k.shape() == kv && v.shape() == kv && out.shape() == q.shape(), "attention",
             "expected k/v ", shape_str(kv), " and out ", shape_str(q.shape()), ", got ",
             shape_str(k.shape()), " ", shape_str(v.shape()), " ", shape_str(out.shape()));
    BI_CHECK(int64_t(key_valid.size()) == B * L, "attention", "key mask: expected ", B * L,
             " entries, got ", key_valid.size());
    if (probs) {
        check_f32_contig(*probs, "attention", "probs");
        BI_CHECK(probs->shape() == (Shape{B, heads, L, L}), "attention", "probs: expected ",
                 shape_str({B, heads, L, L}), ", got ", shape_str(probs->shape()));
    }
    int64_t bias_stride = 0;
    if (opts.bias) {
        check_f32_contig(*opts.bias, "attention", "bias");
        const Shape& bs = opts.bias->shape();
        const bool shared = bs == Shape{heads, L, L};
        BI_CHECK(shared || bs == (Shape{B, heads, L, L}), "attention", "bias: expected ",
                 shape_str({heads, L, L}), " or ", shape_str({B, heads, L, L}), ", got ",
                 shape_str(bs));
        bias_stride = shared ? 0 : heads * L * L;
    }
    std::vector<int64_t> cu(size_t(B + 1));
    for (int64_t b = 0; b <= B; ++b) cu[size_t(b)] = b * L;
    table().attention(q.f32(), k.f32(), v.f32(), out.f32(), cu.data(), B, heads, Hkv, Dh, scale,
                      opts.causal, key_valid.data(), probs ? probs->f32() : nullptr, L,
                      opts.bias ? opts.bias->f32() : nullptr, bias_stride);
}

namespace {

// cu_seqlens: B + 1 non-decreasing offsets from 0 to `rows`; returns the longest sequence.
int64_t check_cu_seqlens(const std::vector<int64_t>& cu, int64_t rows, const char* op) {
    BI_CHECK(cu.size() >= 2 && cu.front() == 0 && cu.back() == rows, op, "cu_seqlens must run from 0 to ",
             rows, " rows over at least one sequence");
    int64_t longest = 0;
    for (size_t b = 0; b + 1 < cu.size(); ++b) {
        BI_CHECK(cu[b + 1] > cu[b], op, "cu_seqlens: sequence ", b, " is empty or out of order");
        longest = std::max(longest, cu[b + 1] - cu[b]);
    }
    return longest;
}

}  // namespace

void attention_varlen(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                      float scale, const std::vector<int64_t>& cu_seqlens, Tensor& out,
                      Tensor* probs) {
    check_f32_contig(q, "attention_varlen", "q");
    check_f32_contig(k, "attention_varlen", "k");
    check_f32_contig(v, "attention_varlen", "v");
    check_f32_contig(out, "attention_varlen", "out");
    BI_CHECK(q.ndim() == 2, "attention_varlen", "q: expected (rows, H*Dh), got ", shape_str(q.shape()));
    const int64_t N = q.size(0), D = q.size(1), B = int64_t(cu_seqlens.size()) - 1;
    BI_CHECK(heads > 0 && D % heads == 0, "attention_varlen", "width ", D, " not divisible by ",
             heads, " heads");
    BI_CHECK(k.shape() == q.shape() && v.shape() == q.shape() && out.shape() == q.shape(),
             "attention_varlen", "q/k/v/out shapes differ: ", shape_str(q.shape()), " ",
             shape_str(k.shape()), " ", shape_str(v.shape()), " ", shape_str(out.shape()));
    const int64_t longest = check_cu_seqlens(cu_seqlens, N, "attention_varlen");
    int64_t P = 0;
    if (probs) {
        check_f32_contig(*probs, "attention_varlen", "probs");
        P = probs->ndim() == 4 ? probs->size(2) : 0;
        BI_CHECK(probs->ndim() == 4 && probs->size(0) == B && probs->size(1) == heads &&
                     P >= longest && probs->size(3) == P,
                 "attention_varlen", "probs: expected (", B, ", ", heads, ", P, P) with P >= ",
                 longest, ", got ", shape_str(probs->shape()));
    }
    table().attention(q.f32(), k.f32(), v.f32(), out.f32(), cu_seqlens.data(), B, heads, heads,
                      D / heads, scale, false, nullptr, probs ? probs->f32() : nullptr, P, nullptr, 0);
}

void rotary_varlen(Tensor& x, const std::vector<int64_t>& cu_seqlens, const Tensor& cos,
                   const Tensor& sin) {
    check_f32_contig(x, "rotary_varlen", "x");
    BI_CHECK(x.ndim() == 3, "rotary_varlen", "x: expected (rows, H, Dh), got ", shape_str(x.shape()));
    const int64_t N = x.size(0), H = x.size(1), Dh = x.size(2);
    BI_CHECK(Dh % 2 == 0, "rotary_varlen", "head dim must be even, got ", Dh);
    const int64_t longest = check_cu_seqlens(cu_seqlens, N, "rotary_varlen");
    BI_CHECK(cos.ndim() == 2 && cos.size(0) >= longest && cos.size(1) == Dh / 2 &&
                 sin.shape() == cos.shape(),
             "rotary_varlen", "tables: expected (>= ", longest, ", ", Dh / 2, "), got ",
             shape_str(cos.shape()));
    const int64_t B = int64_t(cu_seqlens.size()) - 1;
    const auto& t = table();
    // Sequences over the threads; one sequence alone runs outside a parallel region, so the
    // kernel spreads its positions over the threads instead.
#pragma omp parallel for schedule(dynamic, 1) if (B > 1)
    for (int64_t b = 0; b < B; ++b) {
        const int64_t r0 = cu_seqlens[size_t(b)];
        t.rotary(x.f32() + r0 * H * Dh, cu_seqlens[size_t(b) + 1] - r0, H * Dh, H, Dh, cos.f32(),
                 sin.f32());
    }
}

void embedding(const std::vector<int32_t>& ids, const Tensor& table_t, Tensor& out) {
    check_f32_contig(table_t, "embedding", "table");
    check_f32_contig(out, "embedding", "out");
    const int64_t V = table_t.size(0), D = table_t.size(1);
    BI_CHECK(out.numel() == int64_t(ids.size()) * D, "embedding", "out: expected ", ids.size(),
             " x ", D, ", got ", shape_str(out.shape()));
    // A row copy is already memory-bound optimal: one implementation serves every backend.
    for (size_t i = 0; i < ids.size(); ++i) {
        BI_CHECK(ids[i] >= 0 && ids[i] < V, "embedding", "token id ", ids[i], " outside [0, ", V,
                 ")");
        std::memcpy(out.f32() + i * D, table_t.f32() + int64_t(ids[i]) * D, size_t(D) * 4);
    }
}

// The checks of an elementwise a (op) b -> out.
static void check_binary(const Tensor& a, const Tensor& b, const Tensor& out, const char* op) {
    check_f32_contig(a, op, "a");
    check_f32_contig(b, op, "b");
    check_f32_contig(out, op, "out");
    BI_CHECK(a.numel() == b.numel() && a.numel() == out.numel(), op, "sizes differ: ",
             shape_str(a.shape()), " ", shape_str(b.shape()), " ", shape_str(out.shape()));
}

void add(const Tensor& a, const Tensor& b, Tensor& out) {
    check_binary(a, b, out, "add");
    table().add(a.f32(), b.f32(), out.f32(), a.numel());
}

void mul(const Tensor& a, const Tensor& b, Tensor& out) {
    check_binary(a, b, out, "mul");
    table().mul(a.f32(), b.f32(), out.f32(), a.numel());
}

void bmm(const Tensor& a, const Tensor& b, Tensor& out, bool trans_a, bool trans_b) {
    check_f32_contig(a, "bmm", "a");
    check_f32_contig(b, "bmm", "b");
    check_f32_contig(out, "bmm", "out");
    BI_CHECK(a.ndim() == 3 && b.ndim() == 3 && out.ndim() == 3, "bmm",
             "expected three (G, rows, cols) tensors, got ", shape_str(a.shape()), " ",
             shape_str(b.shape()), " ", shape_str(out.shape()));
    const int64_t G = a.size(0), M = trans_a ? a.size(2) : a.size(1),
                  K = trans_a ? a.size(1) : a.size(2), N = trans_b ? b.size(1) : b.size(2);
    const Shape want_b = trans_b ? Shape{G, N, K} : Shape{G, K, N};
    BI_CHECK(b.shape() == want_b && out.shape() == (Shape{G, M, N}), "bmm", "expected b ",
             shape_str(want_b), " and out ", shape_str({G, M, N}), ", got ", shape_str(b.shape()),
             " ", shape_str(out.shape()));
    table().bmm(a.f32(), b.f32(), out.f32(), G, M, N, K, trans_a, trans_b);
}

void scale(const Tensor& a, float s, Tensor& out) {
    check_f32_contig(a, "scale", "a");
    check_f32_contig(out, "scale", "out");
    BI_CHECK(a.numel() == out.numel(), "scale", "sizes differ: ", shape_str(a.shape()), " ",
             shape_str(out.shape()));
    table().scale(a.f32(), s, out.f32(), a.numel());
}

}  // namespace bioinfer::ops
