// Op entry points: shape and dtype checks, then the selected backend's kernel table.
#include "ops/ops.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/geometry_units.h"
#include "backend/kernels.h"
#include "bioinfer/error.h"
#include "ops/fallback.h"

namespace bioinfer::ops {
namespace {

std::atomic<const backend::Backend*> g_default{nullptr};
thread_local const backend::Backend* t_scope = nullptr;
thread_local void* t_stream = nullptr;

const backend::Backend& current() {
    if (t_scope) return *t_scope;
    const backend::Backend* d = g_default.load(std::memory_order_acquire);
    if (!d) {
        d = &backend::get("cpu");
        g_default.store(d, std::memory_order_release);
    }
    return *d;
}

const kernels::KernelTable& table() { return *current().kernels; }
kernels::Context ctx() { return {current().device, t_stream}; }

void check_device(const Tensor& t, const char* op, const char* name) {
    BI_CHECK(t.device() == current().device, op, name, " lives on ", t.device().str(),
             ", the backend '", current().name, "' runs on ", current().device.str());
}

void check_f32_contig(const Tensor& t, const char* op, const char* name) {
    BI_CHECK(t.defined(), op, name, " is undefined");
    BI_CHECK(t.dtype() == DType::F32, op, name, ": expected F32, got ", dtype_name(t.dtype()));
    BI_CHECK(t.is_contiguous(), op, name, " is not contiguous");
    check_device(t, op, name);
}

}  // namespace

class PackedWeight {
public:
  // kind: what packed it (pack_linear_weight, or pack_fused_weight of one or two weights)
  enum Kind { kLinear, kPanels, kPairedPanels };
  PackedWeight(const kernels::KernelTable* t, kernels::Context c, void* h, int64_t K, int64_t N,
               Kind kd = kLinear)
      : table(t), ctx(c), handle(h), k(K), n(N), kind(kd) {}
  ~PackedWeight() { table->free_packed(ctx, handle); }  // on the device it was packed for
  PackedWeight(const PackedWeight&) = delete;
  PackedWeight& operator=(const PackedWeight&) = delete;
  const kernels::KernelTable* table;
  kernels::Context ctx;
  void* handle;
  int64_t k, n;
  Kind kind;
};

void set_backend(const std::string& name) {
    g_default.store(&backend::get(name), std::memory_order_release);
}
const backend::Backend& current_backend() { return current(); }
const char* backend_name() { return table().name; }
kernels::Context current_context() { return ctx(); }

BackendScope::BackendScope(const backend::Backend& b, void* stream)
    : prev_(t_scope), prev_stream_(t_stream) {
    t_scope = &b;
    t_stream = stream;
}

BackendScope::~BackendScope() {
    t_scope = prev_;
    t_stream = prev_stream_;
}

PackedWeightPtr pack_linear_weight(const Tensor& w, DType compute) {
    BI_CHECK(w.defined() && w.is_contiguous(), "pack_linear_weight", "w is undefined or strided");
    BI_CHECK(w.ndim() == 2, "pack_linear_weight", "w: expected 2-D, got ", shape_str(w.shape()));
    BI_CHECK(w.dtype() != DType::I32, "pack_linear_weight", "w: expected F32, BF16 or F16, got I32");
    const auto& t = table();
    if (!t.pack_linear) return nullptr;
    const int64_t N = w.size(0), K = w.size(1);
    void* h = t.pack_linear(ctx(), w.raw(), w.dtype(), K, N, compute, linear_rows());
    return h ? std::make_shared<const PackedWeight>(&t, ctx(), h, K, N) : nullptr;
}

namespace {
DType g_matmul_precision = DType::F32;
int64_t g_linear_rows = 0;
}  // namespace

void set_linear_rows(int64_t rows) {
    g_linear_rows = rows;
}
int64_t linear_rows() {
    return g_linear_rows;
}
void set_matmul_precision(DType compute) { g_matmul_precision = compute; }
DType matmul_precision() { return g_matmul_precision; }
DType head_precision() {
    return g_matmul_precision == DType::I8 ? DType::F32 : g_matmul_precision;
}

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
    t.linear(ctx(), x.f32(), use_packed ? nullptr : w.f32(), use_packed ? packed->handle : nullptr, bias ? bias->f32() : nullptr,
             out.f32(), M, K, N, ep.act, ep.scale, ep.accumulate);
}

PackedWeightPtr pack_fused_weight(const Tensor& w, const Tensor* w2) {
    const char* op = "pack_fused_weight";
    for (const Tensor* t : {&w, w2}) {
        if (!t) continue;
        BI_CHECK(t->defined() && t->is_contiguous(), op, "w is undefined or strided");
        BI_CHECK(t->ndim() == 2 && t->dtype() != DType::I32, op,
                 "w: expected a 2-D float weight, got ", dtype_name(t->dtype()), " ",
                 shape_str(t->shape()));
        check_device(*t, op, "w");
    }
    BI_CHECK(!w2 || (w2->shape() == w.shape() && w2->dtype() == w.dtype()), op,
             "paired weights differ: ", shape_str(w.shape()), " and ", shape_str(w2->shape()));
    const auto& t = table();
    if (!t.pack_panels) return nullptr;
    const int64_t N = w.size(0), K = w.size(1);
    void* h = t.pack_panels(ctx(), w.raw(), w2 ? w2->raw() : nullptr, w.dtype(), K, N);
    return h ? std::make_shared<const PackedWeight>(
                   &t, ctx(), h, K, N, w2 ? PackedWeight::kPairedPanels : PackedWeight::kPanels)
             : nullptr;
}

namespace {

// A 2-D fp32 view on the backend's device with a unit stride along one of its dims.
void check_view(const Tensor& t, const char* name, int64_t rows, int64_t cols) {
    const char* op = "fused_linear";
    BI_CHECK(t.defined() && t.dtype() == DType::F32, op, name, ": expected F32");
    BI_CHECK(t.ndim() == 2 && t.size(0) == rows && t.size(1) == cols, op, name, ": expected ", rows,
             " x ", cols, ", got ", shape_str(t.shape()));
    BI_CHECK(t.strides()[0] == 1 || t.strides()[1] == 1 || rows == 1 || cols == 1, op, name,
             ": neither dim is contiguous");
    check_device(t, op, name);
}

// The fused linear as its parts, one op at a time (backends without panel_linear, and the tests'
// reference for the fused kernel).
void fused_linear_parts(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out,
                        const FusedLinear& f) {
    const int64_t M = x.size(0), N = w.size(0);
    Tensor xn = contiguous(x);
    if (f.ln_gamma) layer_norm(xn, *f.ln_gamma, *f.ln_beta, f.ln_eps, xn);
    Tensor t = Tensor::empty({M, N});
    if (f.w2) {
        Tensor t2 = Tensor::empty({M, N});
        linear(xn, w, bias, t);
        linear(xn, *f.w2, f.bias2, t2);
        if (f.glu == kernels::Glu::Silu) {
            swiglu(t, t2, t);
        } else {
            activation(t, Act::Sigmoid, t);
            mul(t, t2, t);
        }
        if (f.ep.scale != 1.0f) scale(t, f.ep.scale, t);
    } else {
        linear(xn, w, bias, t, {.act = f.ep.act, .scale = f.ep.scale});
    }
    if (f.mul) mul(t, *f.mul, t);
    if (f.ep.accumulate)
        add_into(t, out);
    else
        copy(t, out);
}

}  // namespace

void fused_linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out,
                  const FusedLinear& f, const PackedWeight* packed) {
    const char* op = "fused_linear";
    BI_CHECK(w.ndim() == 2, op, "w: expected 2-D, got ", shape_str(w.shape()));
    const int64_t K = w.size(1), N = w.size(0);
    BI_CHECK(x.ndim() == 2, op, "x: expected 2-D, got ", shape_str(x.shape()));
    const int64_t M = x.size(0);
    check_view(x, "x", M, K);
    check_view(out, "out", M, N);
    if (f.mul) {
        check_view(*f.mul, "mul", M, N);
        BI_CHECK(f.mul->strides()[1] == 1 || N == 1, op, "mul: rows are not contiguous");
    }
    for (const Tensor* b : {bias, f.bias2})
        if (b)
            BI_CHECK(b->numel() == N && b->is_contiguous() && b->dtype() == DType::F32, op,
                     "bias: expected [", N, "] F32, got ", shape_str(b->shape()));
    BI_CHECK(!f.ln_gamma || (f.ln_beta && f.ln_gamma->numel() == K && f.ln_beta->numel() == K), op,
             "layer norm weight/bias: expected [", K, "]");
    BI_CHECK(!f.w2 || f.w2->shape() == w.shape(), op,
             "paired weights differ: ", shape_str(w.shape()), " and ", shape_str(f.w2->shape()));
    BI_CHECK(!(f.w2 && f.ep.act != Act::None), op, "paired weights take no activation");
    if (M == 0) return;
    const auto& t = table();
    const auto want = f.w2 ? PackedWeight::kPairedPanels : PackedWeight::kPanels;
    if (!packed || packed->table != &t || !t.panel_linear) {
        fused_linear_parts(x, w, bias, out, f);
        return;
    }
    BI_CHECK(packed->kind == want && packed->k == K && packed->n == N, op,
             "packed weight is not pack_fused_weight of ", f.w2 ? "these two weights" : "w");
    const bool paired = f.w2 != nullptr;
    kernels::PanelLinearArgs a{.x = x.f32(),
                               .x_rs = x.strides()[0],
                               .x_cs = x.strides()[1],
                               .ln_gamma = f.ln_gamma ? f.ln_gamma->f32() : nullptr,
                               .ln_beta = f.ln_beta ? f.ln_beta->f32() : nullptr,
                               .ln_eps = f.ln_eps,
                               .packed = packed->handle,
                               .pairs = paired,
                               .bias = bias ? bias->f32() : nullptr,
                               .bias2 = paired && f.bias2 ? f.bias2->f32() : nullptr,
                               .act = f.ep.act,
                               .glu = f.glu,
                               .scale = f.ep.scale,
                               .mul = f.mul ? f.mul->f32() : nullptr,
                               .mul_rs = f.mul ? f.mul->strides()[0] : 0,
                               .y = out.f32(),
                               .y_rs = out.strides()[0],
                               .y_cs = out.strides()[1],
                               .accumulate = f.ep.accumulate,
                               .M = M,
                               .K = K,
                               .N = N};
    t.panel_linear(ctx(), a);
}

void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& out) {
    check_f32_contig(x, "layer_norm", "x");
    check_f32_contig(out, "layer_norm", "out");
    const int64_t D = x.size(-1);
    BI_CHECK(gamma.numel() == D && beta.numel() == D, "layer_norm", "weight/bias: expected [", D,
             "], got ", shape_str(gamma.shape()), " / ", shape_str(beta.shape()));
    BI_CHECK(out.numel() == x.numel(), "layer_norm", "out: expected ", shape_str(x.shape()),
             ", got ", shape_str(out.shape()));
    table().layer_norm(ctx(), x.f32(), gamma.f32(), beta.f32(), out.f32(), x.numel() / D, D, eps);
}

void gelu(const Tensor& x, Tensor& out) {
    check_f32_contig(x, "gelu", "x");
    check_f32_contig(out, "gelu", "out");
    BI_CHECK(out.numel() == x.numel(), "gelu", "out size ", out.numel(), " != ", x.numel());
    table().gelu(ctx(), x.f32(), out.f32(), x.numel());
}

void gelu_tanh(const Tensor& x, Tensor& out) {
    check_f32_contig(x, "gelu_tanh", "x");
    check_f32_contig(out, "gelu_tanh", "out");
    BI_CHECK(out.numel() == x.numel(), "gelu_tanh", "out size ", out.numel(), " != ", x.numel());
    table().gelu_tanh(ctx(), x.f32(), out.f32(), x.numel());
}

void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) {
    check_f32_contig(gate, "swiglu", "gate");
    check_f32_contig(up, "swiglu", "up");
    check_f32_contig(out, "swiglu", "out");
    BI_CHECK(gate.numel() == up.numel() && out.numel() == gate.numel(), "swiglu", "sizes differ: gate ",
             shape_str(gate.shape()), ", up ", shape_str(up.shape()), ", out ", shape_str(out.shape()));
    table().swiglu(ctx(), gate.f32(), up.f32(), out.f32(), gate.numel());
}

void softmax(Tensor& x, const Tensor* additive, const uint8_t* keep) {
    check_f32_contig(x, "softmax", "x");
    const int64_t C = x.size(-1);
    if (additive) {
        check_f32_contig(*additive, "softmax", "additive");
        BI_CHECK(additive->numel() == C, "softmax", "additive mask: expected [", C, "], got ",
                 shape_str(additive->shape()));
    }
    table().softmax(ctx(), x.f32(), x.numel() / C, C, additive ? additive->f32() : nullptr, keep);
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
        table().rotary(ctx(), x.f32() + b * L * H * Dh, L, H * Dh, H, Dh, cos.f32(), sin.f32());
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
    table().attention(ctx(), q.f32(), k.f32(), v.f32(), out.f32(), cu.data(), B, heads, Hkv, Dh, scale,
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
    table().attention(ctx(), q.f32(), k.f32(), v.f32(), out.f32(), cu_seqlens.data(), B, heads, heads,
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
    const kernels::Context c = ctx();  // read here: the team's threads have no scope of their own
    // Sequences over the threads; one sequence alone runs outside a parallel region, so the
    // kernel spreads its positions over the threads instead.
#pragma omp parallel for schedule(dynamic, 1) if (B > 1)
    for (int64_t b = 0; b < B; ++b) {
        const int64_t r0 = cu_seqlens[size_t(b)];
        t.rotary(c, x.f32() + r0 * H * Dh, cu_seqlens[size_t(b) + 1] - r0, H * Dh, H, Dh, cos.f32(),
                 sin.f32());
    }
}

void embedding(const std::vector<int32_t>& ids, const Tensor& table_t, Tensor& out,
               bool accumulate) {
    check_f32_contig(table_t, "embedding", "table");
    check_f32_contig(out, "embedding", "out");
    const int64_t V = table_t.size(0), D = table_t.size(1);
    BI_CHECK(out.numel() == int64_t(ids.size()) * D, "embedding", "out: expected ", ids.size(),
             " x ", D, ", got ", shape_str(out.shape()));
    for (int32_t id : ids)
        BI_CHECK(id >= 0 && id < V, "embedding", "token id ", id, " outside [0, ", V, ")");
    // The ids are the caller's host data; a device backend reads them from a copy.
    const Device dev = current().device;
    if (dev.is_host()) {
        table().embedding(ctx(), ids.data(), int64_t(ids.size()), table_t.f32(), D, out.f32(), accumulate);
        return;
    }
    Tensor host = Tensor::empty({int64_t(ids.size())}, DType::I32);
    std::copy(ids.begin(), ids.end(), host.i32());
    embedding(host.to(dev), table_t, out, accumulate);
}

void embedding(const Tensor& ids, const Tensor& table_t, Tensor& out, bool accumulate) {
    check_f32_contig(table_t, "embedding", "table");
    check_f32_contig(out, "embedding", "out");
    BI_CHECK(ids.dtype() == DType::I32 && ids.is_contiguous(), "embedding",
             "ids: expected contiguous I32, got ", dtype_name(ids.dtype()));
    check_device(ids, "embedding", "ids");
    const int64_t D = table_t.size(1);
    BI_CHECK(out.numel() == ids.numel() * D, "embedding", "out: expected ", ids.numel(), " x ", D,
             ", got ", shape_str(out.shape()));
    table().embedding(ctx(), ids.i32(), ids.numel(), table_t.f32(), D, out.f32(), accumulate);
}

namespace {

// A binary elementwise operand as rows: contiguous (one row of all elements), or a 2-D view
// whose columns are contiguous (row stride ld).
struct Rows {
    int64_t rows = 0, cols = 0, ld = 0;
    bool contiguous = false;
};

Rows rows_of(const Tensor& t, const char* op, const char* name) {
    BI_CHECK(t.defined(), op, name, " is undefined");
    BI_CHECK(t.dtype() == DType::F32, op, name, ": expected F32, got ", dtype_name(t.dtype()));
    check_device(t, op, name);
    if (t.is_contiguous()) return {1, t.numel(), t.numel(), true};
    BI_CHECK(t.ndim() == 2 && t.strides()[1] == 1, op, name,
             " is neither contiguous nor a 2-D view with contiguous rows");
    return {t.size(0), t.size(1), t.strides()[0], false};
}

// Runs a binary op over a, b, out: the contiguous kernel when all three are contiguous, else the
// row-strided one over 2-D views of one shape.
template <typename F>
void binary(const Tensor& a, const Tensor& b, Tensor& out, const char* op, int row_op, F contig) {
    const Rows ra = rows_of(a, op, "a"), rb = rows_of(b, op, "b"), ro = rows_of(out, op, "out");
    if (ra.contiguous && rb.contiguous && ro.contiguous) {
        BI_CHECK(a.numel() == b.numel() && a.numel() == out.numel(), op, "sizes differ: ",
                 shape_str(a.shape()), " ", shape_str(b.shape()), " ", shape_str(out.shape()));
        contig(a.numel());
        return;
    }
    BI_CHECK(a.ndim() == 2 && a.shape() == b.shape() && a.shape() == out.shape(), op,
             "strided operands must be 2-D of one shape, got ", shape_str(a.shape()), " ",
             shape_str(b.shape()), " ", shape_str(out.shape()));
    const int64_t lda = ra.contiguous ? a.size(1) : ra.ld, ldb = rb.contiguous ? b.size(1) : rb.ld,
                  ldo = ro.contiguous ? out.size(1) : ro.ld;
    table().binary_rows(ctx(), row_op, a.f32(), lda, b.f32(), ldb, out.f32(), ldo,
                        a.size(0), a.size(1));
}

}  // namespace

void add(const Tensor& a, const Tensor& b, Tensor& out) {
    binary(a, b, out, "add", kernels::kBinaryAdd,
           [&](int64_t n) { table().add(ctx(), a.f32(), b.f32(), out.f32(), n); });
}

void mul(const Tensor& a, const Tensor& b, Tensor& out) {
    binary(a, b, out, "mul", kernels::kBinaryMul,
           [&](int64_t n) { table().mul(ctx(), a.f32(), b.f32(), out.f32(), n); });
}

void add_mul(const Tensor& a, const Tensor& b, Tensor& out) {
    binary(a, b, out, "add_mul", kernels::kBinaryAddMul,
           [&](int64_t n) { table().add_mul(ctx(), a.f32(), b.f32(), out.f32(), n); });
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
    table().bmm(ctx(), a.f32(), b.f32(), out.f32(), G, M, N, K, trans_a, trans_b);
}

void scale(const Tensor& a, float s, Tensor& out) {
    check_f32_contig(a, "scale", "a");
    check_f32_contig(out, "scale", "out");
    BI_CHECK(a.numel() == out.numel(), "scale", "sizes differ: ", shape_str(a.shape()), " ",
             shape_str(out.shape()));
    table().scale(ctx(), a.f32(), s, out.f32(), a.numel());
}

// --- data movement and glue ---

namespace {

void copy_checked(const Tensor& src, Tensor& dst, bool accumulate, const char* op) {
    BI_CHECK(src.defined() && dst.defined(), op, "src or dst is undefined");
    BI_CHECK(src.shape() == dst.shape(), op, "shapes differ: src ", shape_str(src.shape()), ", dst ",
             shape_str(dst.shape()));
    BI_CHECK(src.dtype() == dst.dtype() && dtype_size(src.dtype()) == 4, op,
             "expected F32 or I32 on both sides, got ", dtype_name(src.dtype()), " and ",
             dtype_name(dst.dtype()));
    BI_CHECK(!accumulate || src.dtype() == DType::F32, op, "accumulates F32 only");
    BI_CHECK(src.ndim() <= 8, op, "at most 8 dims, got ", src.ndim());
    check_device(src, op, "src");
    check_device(dst, op, "dst");
    table().copy_strided(ctx(), src.raw(), dst.raw(), src.ndim(), src.shape().data(),
                         src.strides().data(), dst.strides().data(), accumulate);
}

void check_i32(const Tensor& t, const char* op, const char* name) {
    BI_CHECK(t.defined() && t.dtype() == DType::I32 && t.is_contiguous(), op, name,
             ": expected contiguous I32");
    check_device(t, op, name);
}

}  // namespace

void copy(const Tensor& src, Tensor& dst) { copy_checked(src, dst, false, "copy"); }

void add_into(const Tensor& src, Tensor& dst) { copy_checked(src, dst, true, "add_into"); }

Tensor contiguous(const Tensor& t) {
    Tensor out = Tensor::empty(t.shape(), t.dtype(), t.device());
    copy(t, out);
    return out;
}

void axpy(float alpha, const Tensor& x, Tensor& y) {
    check_f32_contig(x, "axpy", "x");
    check_f32_contig(y, "axpy", "y");
    BI_CHECK(x.numel() == y.numel(), "axpy", "sizes differ: ", shape_str(x.shape()), " ",
             shape_str(y.shape()));
    table().axpy(ctx(), alpha, x.f32(), y.f32(), x.numel());
}

void scale_rows(const Tensor& x, const Tensor& factors, Tensor& out) {
    check_f32_contig(x, "scale_rows", "x");
    check_f32_contig(factors, "scale_rows", "factors");
    check_f32_contig(out, "scale_rows", "out");
    const int64_t R = factors.numel();
    BI_CHECK(R > 0 && x.numel() % R == 0 && out.numel() == x.numel(), "scale_rows", "x ",
             shape_str(x.shape()), " is not ", R, " rows, or out ", shape_str(out.shape()),
             " differs");
    table().scale_rows(ctx(), x.f32(), factors.f32(), out.f32(), R, x.numel() / R);
}

void activation(const Tensor& x, Act act, Tensor& out, float shift) {
    check_f32_contig(x, "activation", "x");
    check_f32_contig(out, "activation", "out");
    BI_CHECK(x.numel() == out.numel(), "activation", "sizes differ: ", shape_str(x.shape()), " ",
             shape_str(out.shape()));
    table().activation(ctx(), act, x.f32(), shift, out.f32(), x.numel());
}

void token_dropout(Tensor& x, const std::vector<int32_t>& ids, const std::vector<int64_t>& cu,
                   int32_t mask_id, float keep) {
    check_f32_contig(x, "token_dropout", "x");
    BI_CHECK(x.ndim() == 2 && int64_t(ids.size()) == x.size(0), "token_dropout", "expected ",
             x.size(0), " ids for x ", shape_str(x.shape()), ", got ", ids.size());
    check_cu_seqlens(cu, x.size(0), "token_dropout");
    BI_CHECK(current().device.is_host(), "token_dropout", "runs on the host backend only");
    if (!table().token_dropout) return fallback::token_dropout(x, ids, cu, mask_id, keep);
    table().token_dropout(ctx(), x.f32(), ids.data(), cu.data(), int64_t(cu.size()) - 1, x.size(1),
                          mask_id, keep);
}

void outer_product_difference(const Tensor& qk, int64_t r0, int64_t r1, Tensor& out) {
    check_f32_contig(qk, "outer_product_difference", "qk");
    check_f32_contig(out, "outer_product_difference", "out");
    BI_CHECK(qk.ndim() == 2 && qk.size(1) % 2 == 0, "outer_product_difference",
             "qk: expected (L, 2I), got ", shape_str(qk.shape()));
    const int64_t L = qk.size(0), I2 = qk.size(1);
    BI_CHECK(0 <= r0 && r0 <= r1 && r1 <= L && out.numel() == (r1 - r0) * L * I2,
             "outer_product_difference", "rows [", r0, ", ", r1, ") of ", L, " need out of ",
             (r1 - r0) * L, " x ", I2, ", got ", shape_str(out.shape()));
    table().outer_product_difference(ctx(), qk.f32(), L, I2 / 2, r0, r1, out.f32());
}

void contact_apc(const Tensor& probs, const Tensor& weights, Tensor& acc) {
    check_f32_contig(probs, "contact_apc", "probs");
    check_f32_contig(weights, "contact_apc", "weights");
    check_f32_contig(acc, "contact_apc", "acc");
    BI_CHECK(probs.ndim() == 3 && probs.size(1) == probs.size(2) && acc.ndim() == 2 &&
                 acc.size(0) == acc.size(1) && acc.size(0) + 2 <= probs.size(1) &&
                 weights.numel() == probs.size(0),
             "contact_apc", "expected probs (H, P, P), weights (H) and acc (L, L) with L + 2 <= P, got ",
             shape_str(probs.shape()), " ", shape_str(weights.shape()), " ", shape_str(acc.shape()));
    if (!table().contact_apc) return fallback::contact_apc(probs, weights, acc);
    table().contact_apc(ctx(), probs.f32(), probs.size(0), probs.size(1), acc.size(0),
                        weights.f32(), acc.f32());
}

void rms_norm(const Tensor& x, float eps, Tensor& out) {
    check_f32_contig(x, "rms_norm", "x");
    check_f32_contig(out, "rms_norm", "out");
    BI_CHECK(x.numel() == out.numel() && x.ndim() >= 1, "rms_norm",
             "sizes differ: ", shape_str(x.shape()), " ", shape_str(out.shape()));
    if (!table().rms_norm) return fallback::rms_norm(x, eps, out);
    const int64_t d = x.size(-1);
    table().rms_norm(ctx(), x.f32(), out.f32(), d ? x.numel() / d : 0, d, eps);
}

void l2_normalize(const Tensor& x, float eps, Tensor& out) {
    check_f32_contig(x, "l2_normalize", "x");
    check_f32_contig(out, "l2_normalize", "out");
    BI_CHECK(x.numel() == out.numel() && x.ndim() >= 1, "l2_normalize", "sizes differ: ",
             shape_str(x.shape()), " ", shape_str(out.shape()));
    if (!table().l2_normalize) return fallback::l2_normalize(x, eps, out);
    const int64_t d = x.size(-1);
    table().l2_normalize(ctx(), x.f32(), out.f32(), d ? x.numel() / d : 0, d, eps);
}

void bin_expectation(const Tensor& probs, const Tensor& values, Tensor& out) {
    check_f32_contig(probs, "bin_expectation", "probs");
    check_f32_contig(values, "bin_expectation", "values");
    check_f32_contig(out, "bin_expectation", "out");
    const int64_t K = values.numel();
    BI_CHECK(K > 0 && probs.size(-1) == K && out.numel() * K == probs.numel(), "bin_expectation",
             "expected probs (..., ", K, ") and out of ", probs.numel() / std::max<int64_t>(K, 1),
             ", got ", shape_str(probs.shape()), " ", shape_str(out.shape()));
    table().bin_expectation(ctx(), probs.f32(), values.f32(), out.f32(), out.numel(), K);
}

float max_value(const Tensor& x) {
    check_f32_contig(x, "max_value", "x");
    BI_CHECK(x.numel() > 0, "max_value", "x is empty");
    Tensor r = Tensor::empty({1}, DType::F32, current().device);
    table().max_value(ctx(), x.f32(), x.numel(), r.f32());
    return r.to(kHost).f32()[0];
}

void relpos_classes(const Tensor& index, int64_t bins, Tensor& out) {
    check_i32(index, "relpos_classes", "index");
    check_i32(out, "relpos_classes", "out");
    const int64_t L = index.numel();
    BI_CHECK(out.shape() == (Shape{L, L}) && bins >= 0, "relpos_classes", "out: expected ",
             shape_str({L, L}), ", got ", shape_str(out.shape()));
    table().relpos_classes(ctx(), index.i32(), L, bins, out.i32());
}

void virtual_cb(const Tensor& atoms, Tensor& out) {
    check_f32_contig(atoms, "virtual_cb", "atoms");
    check_f32_contig(out, "virtual_cb", "out");
    BI_CHECK(atoms.ndim() == 3 && atoms.size(1) >= 3 && atoms.size(2) == 3 &&
                 out.shape() == (Shape{atoms.size(0), 3}),
             "virtual_cb", "expected atoms (L, >= 3, 3) and out (L, 3), got ",
             shape_str(atoms.shape()), " ", shape_str(out.shape()));
    if (!table().virtual_cb) return fallback::virtual_cb(atoms, out);
    table().virtual_cb(ctx(), atoms.f32(), atoms.size(0), atoms.size(1), out.f32());
}

void distance_bins(const Tensor& points, const Tensor& bounds_sq, Tensor& out) {
    check_f32_contig(points, "distance_bins", "points");
    check_f32_contig(bounds_sq, "distance_bins", "bounds_sq");
    check_i32(out, "distance_bins", "out");
    const int64_t L = points.size(0);
    BI_CHECK(points.ndim() == 2 && points.size(1) == 3 && out.shape() == (Shape{L, L}),
             "distance_bins", "expected points (L, 3) and out (L, L), got ",
             shape_str(points.shape()), " ", shape_str(out.shape()));
    table().distance_bins(ctx(), points.f32(), L, bounds_sq.f32(), bounds_sq.numel(), out.i32());
}

void atom_pair_geometry(const Tensor& pos, const Tensor& valid, const Tensor& uid,
                        const Tensor& keys, Tensor& out) {
    const char* op = "atom_pair_geometry";
    check_f32_contig(pos, op, "pos");
    check_f32_contig(valid, op, "valid");
    check_f32_contig(uid, op, "uid");
    check_i32(keys, op, "keys");
    check_f32_contig(out, op, "out");
    const int64_t A = pos.size(0);
    BI_CHECK(pos.ndim() == 2 && pos.size(1) == 3 && valid.numel() == A && uid.numel() == A, op,
             "expected pos (A, 3), valid (A) and uid (A), got ", shape_str(pos.shape()), " ",
             shape_str(valid.shape()), " ", shape_str(uid.shape()));
    BI_CHECK(keys.ndim() == 2 && keys.size(0) > 0 && A % keys.size(0) == 0, op,
             "keys: expected (K, H) with K dividing ", A, " atoms, got ", shape_str(keys.shape()));
    const int64_t K = keys.size(0), H = keys.size(1), W = A / K;
    BI_CHECK(out.shape() == (Shape{K, W, H, 5}), op, "out: expected ",
             shape_str(Shape{K, W, H, 5}), ", got ", shape_str(out.shape()));
    if (!table().atom_pair_geometry)
        return fallback::atom_pair_geometry(pos, valid, uid, keys, out);
    table().atom_pair_geometry(ctx(), pos.f32(), valid.f32(), uid.f32(), keys.i32(), K, W, H,
                               out.f32());
}

void quat_update(Tensor& frames, const Tensor& update) {
    check_f32_contig(frames, "quat_update", "frames");
    check_f32_contig(update, "quat_update", "update");
    const int64_t L = frames.numel() / 7;
    BI_CHECK(frames.numel() == L * 7 && update.numel() == L * 6, "quat_update",
             "expected frames (L, 7) and updates (L, 6), got ", shape_str(frames.shape()), " ",
             shape_str(update.shape()));
    if (!table().quat_update) return fallback::quat_update(frames, update);
    table().quat_update(ctx(), frames.f32(), update.f32(), L);
}

void ipa(const IpaInputs& in, Tensor& out) {
    const char* op = "ipa";
    for (const Tensor* t : {in.q, in.kv, in.q_points, in.kv_points, in.bias, in.z, in.frames,
                            in.head_weights})
        check_f32_contig(*t, op, "input");
    check_f32_contig(out, op, "out");
    const int64_t L = in.q->size(0), H = in.heads, Pq = in.qk_points, Pv = in.v_points;
    BI_CHECK(H > 0 && in.q->ndim() == 2 && in.q->size(1) % H == 0, op, "q: expected (L, H*C), got ",
             shape_str(in.q->shape()));
    const int64_t C = in.q->size(1) / H, Cz = in.z->size(-1);
    BI_CHECK(Pv <= kernels::glue::kIpaMaxValuePoints, op, Pv, " value points, at most ",
             kernels::glue::kIpaMaxValuePoints);
    BI_CHECK(in.kv->shape() == (Shape{L, 2 * H * C}) &&
                 in.q_points->shape() == (Shape{L, 3 * H * Pq}) &&
                 in.kv_points->shape() == (Shape{L, 3 * H * (Pq + Pv)}) &&
                 in.bias->numel() == L * L * H && in.z->shape() == (Shape{L, L, Cz}) &&
                 in.frames->numel() == L * 7 && in.head_weights->numel() == H &&
                 out.shape() == (Shape{L, H * (C + 4 * Pv + Cz)}),
             op, "inconsistent shapes for L ", L, ", H ", H, ", C ", C, ", points ", Pq, "/", Pv,
             ", c_z ", Cz);
    if (!table().ipa) return fallback::ipa(in, out);
    table().ipa(ctx(), {in.q->f32(), in.kv->f32(), in.q_points->f32(), in.kv_points->f32(),
                        in.bias->f32(), in.z->f32(), in.frames->f32(), in.head_weights->f32(),
                        out.f32(), L, H, C, Pq, Pv, Cz, in.eps});
}

void atom_frames(const Tensor& backbone, const Tensor& angles, const Tensor& aatype,
                 const ResidueTables& t, float trans_scale, Tensor& frames_out, Tensor& positions) {
    const char* op = "atom_frames";
    for (const Tensor* x : {&backbone, &angles, &t.default_frames, &t.atom_mask, &t.lit_positions})
        check_f32_contig(*x, op, "input");
    check_i32(aatype, op, "aatype");
    check_i32(t.group_of_atom, op, "group_of_atom");
    check_f32_contig(frames_out, op, "frames_out");
    check_f32_contig(positions, op, "positions");
    const int64_t L = aatype.numel(), R = t.atom_mask.size(0);
    BI_CHECK(backbone.numel() == L * 7 && angles.numel() == L * 14 && frames_out.numel() == L * 7 &&
                 positions.numel() == L * 42 && t.default_frames.numel() == R * 8 * 16 &&
                 t.group_of_atom.numel() == R * 14 && t.atom_mask.numel() == R * 14 &&
                 t.lit_positions.numel() == R * 42,
             op, "inconsistent shapes for ", L, " residues of ", R, " types");
    if (!table().atom_frames)
        return fallback::atom_frames(backbone, angles, aatype, t, trans_scale, frames_out,
                                     positions);
    table().atom_frames(ctx(), {backbone.f32(), angles.f32(), aatype.i32(), t.default_frames.f32(),
                                t.group_of_atom.i32(), t.atom_mask.f32(), t.lit_positions.f32(),
                                frames_out.f32(), positions.f32(), L, trans_scale});
}

}  // namespace bioinfer::ops
