// The ops the sweep measures: shape sets (the real model shapes), variants and cases.
#include "sweep/sweep_ops.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "backend/tuning/defaults.h"
#include "backend/tuning/tuned_table.h"
#include "bioinfer/error.h"
#include "bioinfer/tensor.h"
#include "io/model_dir.h"
#include "nn/pair_seq.h"
#include "nn/triangle.h"
#include "ops/ops.h"

namespace bioinfer::tuning::sweep {

int64_t dim(const Dims& d, const std::string& name) {
    for (const auto& [k, v] : d)
        if (k == name) return v;
    fail("sweep", cat("shape has no dimension '", name, "'"));
}

std::string variant_key(const std::string& name, const std::map<std::string, int64_t>& params) {
    std::string s = name;
    if (params.empty()) return s;
    s += "{";
    bool first = true;
    for (const auto& [k, v] : params) {
        s += (first ? "" : ",") + k + "=" + std::to_string(v);
        first = false;
    }
    return s + "}";
}

namespace {

// ---- model shapes -------------------------------------------------------------------------

struct LmShape {
    const char* name;
    int64_t d, ffn, heads;
    bool swiglu;  // ESM C: gate and up projections without an activation, then SwiGLU
};

// ESM-2 8M..3B and ESM C 300M/600M (hidden size, feed-forward width, heads).
const std::vector<LmShape>& lm_shapes() {
    static const std::vector<LmShape> v{
        {"esm2_8M", 320, 1280, 20, false},     {"esm2_35M", 480, 1920, 20, false},
        {"esm2_150M", 640, 2560, 20, false},   {"esm2_650M", 1280, 5120, 20, false},
        {"esm2_3B", 2560, 10240, 40, false},   {"esmc_300M", 960, 2560, 15, true},
        {"esmc_600M", 1152, 3072, 18, true}};
    return v;
}

constexpr int64_t kActNone = 0, kActGelu = 1, kActGeluTanh = 2, kActSwiglu = 3;

Act to_act(int64_t a) { return a == kActGelu ? Act::Gelu : a == kActGeluTanh ? Act::GeluTanh : Act::None; }

std::string act_suffix(int64_t a) {
    return a == kActGelu ? "+gelu" : a == kActGeluTanh ? "+gelu_tanh" : "";
}

// Shapes are unique within a set; the first model to use one names it.
void add_unique(std::vector<Shape>& out, Shape s) {
    for (const Shape& o : out)
        if (o.dims == s.dims) return;
    out.push_back(std::move(s));
}

const std::vector<int64_t> kLmTokens{256, 1024};

std::vector<Shape> matmul_shapes(const std::string& set) {
    std::vector<Shape> out;
    const auto mk = [&](const std::string& label, int64_t m, int64_t k, int64_t n, int64_t act) {
        add_unique(out, {set, label + " " + std::to_string(m) + "x" + std::to_string(k) + "x" +
                                  std::to_string(n) + act_suffix(act),
                         {{"m", m}, {"k", k}, {"n", n}, {"act", act}}});
    };
    if (set == "esm")
        for (int64_t m : kLmTokens)
            for (const LmShape& s : lm_shapes()) {
                mk(std::string(s.name) + " attn-proj", m, s.d, s.d, kActNone);
                mk(std::string(s.name) + " ffn-up", m, s.d, s.ffn, s.swiglu ? kActNone : kActGelu);
                mk(std::string(s.name) + " ffn-down", m, s.ffn, s.d, kActNone);
            }
    if (set == "fold") {  // weights a fold runs at one protein's residues (ops::LinearRowsScope)
        const auto fold = [&](const std::string& label, int64_t k, int64_t n) {
            const int64_t m = ops::kFoldLinearRows;
            add_unique(out, {set,
                             label + " " + std::to_string(m) + "x" + std::to_string(k) + "x" +
                                 std::to_string(n),
                             {{"m", m}, {"k", k}, {"n", n}, {"act", kActNone}, {"fold", 1}}});
        };
        for (const LmShape& s : lm_shapes())  // ESMFold's ESM-2 3B stem, ESMFold2's ESM C tower
            if (std::string(s.name) == "esm2_3B" || std::string(s.name) == "esmc_600M") {
                fold(std::string(s.name) + " attn-proj", s.d, s.d);
                fold(std::string(s.name) + " ffn-up", s.d, s.ffn);
                fold(std::string(s.name) + " ffn-down", s.ffn, s.d);
            }
        fold("esmfold seq-attn qkv", 1024, 3072);  // the trunk's sequence attention
        fold("esmfold seq-attn gate/out", 1024, 1024);
        fold("diffusion token", 768, 768);  // ESMFold2's and Boltz-2's token transformer
    }
    if (set == "gr00t") {
        mk("gr00t", 1792, 1024, 3072, kActNone);
        mk("gr00t", 1792, 1024, 1024, kActNone);
        mk("gr00t", 1792, 1024, 4096, kActGeluTanh);
        mk("gr00t", 1792, 4096, 1024, kActNone);
        mk("gr00t", 1792, 1536, 1024, kActNone);
        mk("gr00t", 448, 4096, 4096, kActGelu);
        mk("gr00t", 448, 4096, 2048, kActNone);
    }
    if (set == "esmfold2")  // the pair-update blocks at c_z 256: L^2 rows at L 64 and 128
        for (int64_t l : {64, 128}) {
            const int64_t m = l * l;
            mk("esmfold2 trimul-proj", m, 256, 1024, kActNone);
            mk("esmfold2 trimul-gate", m, 256, 256, kActNone);
            mk("esmfold2 transition-up", m, 256, 2048, kActNone);
            mk("esmfold2 transition-down", m, 1024, 256, kActNone);
        }
    if (set == "tiny") {
        mk("tiny", 64, 96, 80, kActGelu);
        mk("tiny", 33, 40, 24, kActNone);
        add_unique(out, {set,
                         "tiny fold 33x40x24",
                         {{"m", 33}, {"k", 40}, {"n", 24}, {"act", kActNone}, {"fold", 1}}});
    }
    return out;
}

// Attention: the last sequence of the batch has `valid` real keys (the rest padding).
std::vector<Shape> attention_shapes(const std::string& set) {
    std::vector<Shape> out;
    const auto mk = [&](const std::string& label, int64_t b, int64_t h, int64_t hkv, int64_t l,
                        int64_t dh, int64_t causal, int64_t valid) {
        std::string lab = label + " b" + std::to_string(b) + " h" + std::to_string(h) +
                          (hkv != h ? "/" + std::to_string(hkv) : "") + " L" + std::to_string(l) +
                          " dh" + std::to_string(dh) + (causal ? " causal" : "") +
                          (valid < l ? " valid" + std::to_string(valid) : "");
        add_unique(out, {set, lab,
                         {{"batch", b}, {"heads", h}, {"kv_heads", hkv}, {"seq", l},
                          {"head_dim", dh}, {"causal", causal}, {"valid", valid}}});
    };
    if (set == "esm")
        for (int64_t l : {128, 512, 1024})
            for (const LmShape& s : lm_shapes())  // two sequences, the second 3/4 padding-free
                mk(s.name, 2, s.heads, s.heads, l, s.d / s.heads, 0, l * 3 / 4);
    if (set == "gr00t") {
        mk("gr00t", 1, 16, 16, 256, 72, 0, 256);
        mk("gr00t", 1, 16, 16, 352, 72, 0, 352 - 28);
        mk("gr00t", 4, 16, 16, 448, 64, 0, 448);
        for (int64_t l : {128, 384, 512}) mk("gr00t", 1, 16, 8, l, 128, 1, l);
        mk("gr00t", 1, 32, 32, 384, 64, 0, 296);
        mk("gr00t", 1, 32, 32, 512, 64, 0, 469);
    }
    if (set == "tiny") {
        mk("tiny", 2, 2, 2, 40, 16, 0, 30);
        mk("tiny", 1, 4, 2, 33, 8, 1, 33);
    }
    return out;
}

// A (rows, cols) shape of a row-wise op, its second dimension named `col` ("dim", "cols").
void add_rows_shape(std::vector<Shape>& out, const std::string& set, const std::string& label,
                    int64_t rows, const char* col, int64_t cols) {
    add_unique(out, {set, label + " " + std::to_string(rows) + "x" + std::to_string(cols),
                     {{"rows", rows}, {col, cols}}});
}

std::vector<Shape> layer_norm_shapes(const std::string& set) {
    std::vector<Shape> out;
    const auto mk = [&](const std::string& label, int64_t rows, int64_t d) {
        add_rows_shape(out, set, label, rows, "dim", d);
    };
    if (set == "esm")
        for (int64_t m : kLmTokens)
            for (const LmShape& s : lm_shapes()) mk(s.name, m, s.d);
    if (set == "gr00t")
        for (auto [r, d] : {std::pair<int64_t, int64_t>{1792, 1024}, {1792, 1536}, {448, 4096}, {448, 2048}})
            mk("gr00t", r, d);
    if (set == "tiny") mk("tiny", 16, 48);
    return out;
}

std::vector<Shape> rotary_shapes(const std::string& set) {
    std::vector<Shape> out;
    const auto mk = [&](const std::string& label, int64_t p, int64_t h, int64_t dh) {
        add_unique(out, {set, label + " L" + std::to_string(p) + " h" + std::to_string(h) + " dh" +
                                  std::to_string(dh),
                         {{"positions", p}, {"heads", h}, {"head_dim", dh}}});
    };
    if (set == "esm")
        for (int64_t p : kLmTokens)
            for (const LmShape& s : lm_shapes()) mk(s.name, p, s.heads, s.d / s.heads);
    if (set == "gr00t") {
        mk("gr00t", 256, 16, 72);
        mk("gr00t", 448, 16, 64);
        mk("gr00t", 512, 16, 128);
        mk("gr00t", 512, 32, 64);
    }
    if (set == "tiny") mk("tiny", 16, 2, 16);
    return out;
}

// Softmax rows as the materialised attention runs them: heads x L rows of L scores.
std::vector<Shape> softmax_shapes(const std::string& set) {
    std::vector<Shape> out;
    const auto mk = [&](const std::string& label, int64_t rows, int64_t cols) {
        add_rows_shape(out, set, label, rows, "cols", cols);
    };
    if (set == "esm")
        for (int64_t l : {128, 512, 1024}) mk("esm h20", 20 * l, l);
    if (set == "gr00t") {
        mk("gr00t h16", 16 * 256, 256);
        mk("gr00t h16", 16 * 448, 448);
        mk("gr00t h32", 32 * 512, 512);
    }
    if (set == "tiny") mk("tiny", 8, 33);
    return out;
}

std::string activation_op(int64_t fn) {
    return fn == kActGelu ? "gelu" : fn == kActGeluTanh ? "gelu_tanh" : "swiglu";
}

std::vector<Shape> activation_shapes(const std::string& set) {
    std::vector<Shape> out;
    const auto mk = [&](const std::string& label, int64_t fn, int64_t rows, int64_t cols) {
        add_unique(out, {set, label + " " + activation_op(fn) + " " + std::to_string(rows) + "x" + std::to_string(cols),
                         {{"fn", fn}, {"n", rows * cols}}});
    };
    if (set == "esm")
        for (int64_t m : kLmTokens)
            for (const LmShape& s : lm_shapes()) mk(s.name, s.swiglu ? kActSwiglu : kActGelu, m, s.ffn);
    if (set == "gr00t") {
        mk("gr00t", kActGeluTanh, 1792, 4096);
        mk("gr00t", kActGelu, 448, 4096);
    }
    if (set == "tiny") {
        for (int64_t fn : {kActGelu, kActGeluTanh, kActSwiglu}) mk("tiny", fn, 7, 150);
    }
    return out;
}

// ESMFold's pair ops at its trunk's real width (c_z 128, 4 heads of 32) and lengths.
std::vector<Shape> pair_shapes(const std::string& set, const char* flag) {
    std::vector<Shape> out;
    const auto mk = [&](int64_t l, int64_t c, int64_t f) {
        Dims d{{"seq", l}, {"channels", c}};
        if (flag) d.push_back({flag, f});
        add_unique(out, {set, std::string(set == "tiny" ? "tiny" : "esmfold") + " L" + std::to_string(l) +
                                  " c" + std::to_string(c) + (flag ? std::string(" ") + flag + "=" + std::to_string(f) : ""),
                         d});
    };
    for (int64_t f : {1, 0}) {
        if (set == "esmfold")
            for (int64_t l : {128, 256, 512}) mk(l, 128, f);
        if (set == "tiny") mk(24, 16, f);
        if (!flag) break;
    }
    return out;
}

std::vector<Shape> trimul_shapes(const std::string& set) { return pair_shapes(set, "outgoing"); }
std::vector<Shape> triatt_shapes(const std::string& set) { return pair_shapes(set, "starting"); }
std::vector<Shape> pair_mlp_shapes(const std::string& set) { return pair_shapes(set, nullptr); }

// ---- variants ---------------------------------------------------------------------------

Variant v(const std::string& name, const std::string& table_op,
          std::map<std::string, int64_t> params = {}, bool selectable = true) {
    return {name, std::move(params), table_op, selectable};
}

// Below this much work a reference kernel runs in seconds, not minutes: it is timed for scale.
constexpr double kRefMaxFlops = 4e8;

double matmul_flops(const Dims& d) { return 2.0 * double(dim(d, "m") * dim(d, "k") * dim(d, "n")); }

// A weight's GEMM provider is chosen at pack time: "matmul" by the weight's shape, and
// "matmul_fold" for a weight packed under ops::LinearRowsScope (the fold set's shapes).
bool fold_shape(const Dims& d) {
    for (const auto& kv : d)
        if (kv.first == "fold") return kv.second != 0;
    return false;
}

std::vector<Variant> matmul_variants(const Dims& d, const std::string& dtype) {
    const std::string op = fold_shape(d) ? "matmul_fold" : "matmul";
    std::vector<Variant> out{v("onednn_packed", op)};
    if (dtype == "fp32") {
        for (auto [mb, nb, kb] : {std::tuple<int64_t, int64_t, int64_t>{96, 256, 256}, {192, 128, 512}, {48, 512, 128}})
            out.push_back(v("own_packed", op, {{"m_block", mb}, {"n_block", nb}, {"k_block", kb}}));
        out.push_back(v("onednn_plain", op, {}, false));
        if (matmul_flops(d) <= kRefMaxFlops) out.push_back(v("ref", op, {}, false));
    }
    if (dim(d, "act") != kActNone) {
        out.push_back(v("fused", "matmul_act"));
        out.push_back(v("separate", "matmul_act"));
    }
    return out;
}

int64_t seen_keys(const Dims& d) {  // sum over (sequence, query row) of the keys it attends
    const int64_t b = dim(d, "batch"), l = dim(d, "seq"), valid = dim(d, "valid");
    int64_t total = 0;
    for (int64_t s = 0; s < b; ++s) {
        const int64_t nk = s + 1 == b ? valid : l;
        for (int64_t i = 0; i < l; ++i) total += dim(d, "causal") ? std::min(nk, i + 1) : nk;
    }
    return total;
}

double attention_flops(const Dims& d) {
    return 4.0 * double(dim(d, "heads") * dim(d, "head_dim")) * double(seen_keys(d));
}

std::vector<Variant> attention_variants(const Dims& d, const std::string& dtype) {
    if (dtype != "fp32") return {};
    std::vector<Variant> out;
    for (int64_t qb : {32, 64, 128})
        for (int64_t kb : {64, 128, 256})
            out.push_back(v("tiled", "attention", {{"q_block", qb}, {"k_block", kb}}));
    out.push_back(v("materialised", "attention"));
    if (attention_flops(d) <= kRefMaxFlops) out.push_back(v("ref", "attention", {}, false));
    return out;
}

std::vector<Variant> simd_variants(const std::string& table_op, const std::string& dtype) {
    if (dtype != "fp32") return {};
    return {v("simd", table_op, {{"parallel", 0}}), v("simd", table_op, {{"parallel", 1}}),
            v("ref", table_op, {}, false)};
}

// one_pass is timed but never selected: 5-20% faster here, and within a few times the default's
// error at the kernel, but compounded over a model's layers that error broke the fp32 parity bar
// (ESM C tiny fixture, max-abs 2.07e-5 > 2e-5), and layer norm runs in fp32 on every path.
std::vector<Variant> layer_norm_variants(const Dims&, const std::string& dtype) {
    if (dtype != "fp32") return {};
    std::vector<Variant> out;
    for (const char* alg : {"two_pass", "one_pass"})
        for (int64_t p : {0, 1})
            out.push_back(v(alg, "layer_norm", {{"parallel", p}}, std::string(alg) == "two_pass"));
    out.push_back(v("ref", "layer_norm", {}, false));
    return out;
}

std::vector<Variant> softmax_variants(const Dims&, const std::string& dtype) {
    if (dtype != "fp32") return {};
    return {v("three_pass", "softmax"), v("online", "softmax"), v("ref", "softmax", {}, false)};
}

std::vector<Variant> rotary_variants(const Dims&, const std::string& dtype) {
    return simd_variants("rotary", dtype);
}

std::vector<Variant> activation_variants(const Dims& d, const std::string& dtype) {
    return simd_variants(activation_op(dim(d, "fn")), dtype);
}

// Chunk sizes (pair rows per chunk): 0 is the memory-bounded automatic choice, the default.
std::vector<Variant> pair_variants(const std::string& op, const Dims& d, const std::string& dtype) {
    if (dtype != "fp32") return {};
    const int64_t L = dim(d, "seq");
    std::vector<Variant> out{v("chunked", op, {{"chunk", 0}})};
    for (int64_t c : {8, 32, 128})
        if (c < L) out.push_back(v("chunked", op, {{"chunk", c}}));
    out.push_back(v("chunked", op, {{"chunk", L}}));
    return out;
}

double trimul_flops(const Dims& d) {
    const double L = double(dim(d, "seq")), C = double(dim(d, "channels"));
    return 2.0 * L * L * C * 6.0 * C + 2.0 * L * L * L * C;
}

double triatt_flops(const Dims& d) {  // q, k, v, gate, out and the bias projection; QK and PV
    const double L = double(dim(d, "seq")), C = double(dim(d, "channels"));
    return 2.0 * L * L * C * 5.0 * C + 4.0 * L * L * L * C;
}

double pair_mlp_flops(const Dims& d) {
    const double L = double(dim(d, "seq")), C = double(dim(d, "channels"));
    return 2.0 * L * L * 8.0 * C * C;
}

// ---- cases ------------------------------------------------------------------------------

Tensor random(const bioinfer::Shape& shape, uint32_t seed, float mean = 0.0f, float sd = 1.0f) {
    Tensor t = Tensor::empty(shape);
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(mean, sd);
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = nd(rng);
    return t;
}

DType compute_dtype(const std::string& dtype) { return dtype == "bf16" ? DType::BF16 : DType::F32; }

// Runs f under the reference backend.
template <typename F>
void on_ref(F f) {
    const ops::BackendScope scope("ref");
    f();
}

// y = act(x . w^T + b): the reference is fp64 over a sample of rows (all N columns).
class MatmulCase : public Case {
public:
  MatmulCase(const Dims& d, const std::string& dtype)
      : M_(dim(d, "m")),
        K_(dim(d, "k")),
        N_(dim(d, "n")),
        act_(to_act(dim(d, "act"))),
        compute_(compute_dtype(dtype)),
        fold_(fold_shape(d)) {
      x_ = random({M_, K_}, 1);
      w_ = random({N_, K_}, 2, 0.0f, 1.0f / std::sqrt(float(K_)));
      b_ = random({N_}, 3, 0.0f, 0.1f);
      y_ = Tensor::empty({M_, N_});
      const int64_t n_rows = std::min<int64_t>(M_, 48);
      for (int64_t i = 0; i < n_rows; ++i) rows_.push_back(i * M_ / n_rows);
      ref_.resize(rows_.size() * size_t(N_));
      for (size_t r = 0; r < rows_.size(); ++r)
          for (int64_t n = 0; n < N_; ++n) {
              double acc = b_.f32()[n];
              const float* xr = x_.f32() + rows_[r] * K_;
              const float* wr = w_.f32() + n * K_;
              for (int64_t k = 0; k < K_; ++k) acc += double(xr[k]) * wr[k];
              if (act_ == Act::Gelu) acc = 0.5 * acc * (1.0 + std::erf(acc / std::sqrt(2.0)));
              if (act_ == Act::GeluTanh)
                  acc =
                      0.5 * acc *
                      (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (acc + 0.044715 * acc * acc * acc)));
              ref_[r * size_t(N_) + size_t(n)] = acc;
          }
  }

    std::function<void()> prepare(const Variant& v) override {
        packed_.reset();
        const ops::Epilogue ep{.act = act_};
        if (v.name == "ref")
            return [this, ep] { on_ref([&] { ops::linear(x_, w_, &b_, y_, ep); }); };
        if (v.name == "onednn_plain") return [this, ep] { ops::linear(x_, w_, &b_, y_, ep); };
        // a fold shape's weight is packed as a fold packs it, at its rows
        const ops::LinearRowsScope rows(fold_ ? M_ : 0);
        if (v.table_op == "matmul_act") {  // fused or separate after a oneDNN GEMM
            tuning::Force provider("matmul", {"onednn_packed", {}});
            packed_ = ops::pack_linear_weight(w_, compute_);
        } else {
            packed_ = ops::pack_linear_weight(w_, compute_);
        }
        BI_CHECK(packed_ != nullptr, "matmul", "no ", dtype_name(compute_), " GEMM on this CPU");
        return [this, ep] { ops::linear(x_, w_, &b_, y_, ep, packed_.get()); };
    }

    Agreement check() override {
        std::vector<float> got;
        for (int64_t r : rows_) got.insert(got.end(), y_.f32() + r * N_, y_.f32() + (r + 1) * N_);
        return agreement(got.data(), ref_.data(), int64_t(got.size()));
    }

private:
    int64_t M_, K_, N_;
    Act act_;
    DType compute_;
    bool fold_;
    Tensor x_, w_, b_, y_;
    ops::PackedWeightPtr packed_;
    std::vector<int64_t> rows_;
    std::vector<double> ref_;
};

// Padded attention with a key mask; the reference is fp64 over sampled query rows.
class AttentionCase : public Case {
public:
    explicit AttentionCase(const Dims& d)
        : B_(dim(d, "batch")), H_(dim(d, "heads")), Hkv_(dim(d, "kv_heads")), L_(dim(d, "seq")),
          Dh_(dim(d, "head_dim")), causal_(dim(d, "causal") != 0), valid_n_(dim(d, "valid")) {
        q_ = random({B_, L_, H_ * Dh_}, 11);
        k_ = random({B_, L_, Hkv_ * Dh_}, 12);
        v_ = random({B_, L_, Hkv_ * Dh_}, 13);
        out_ = Tensor::empty({B_, L_, H_ * Dh_});
        valid_.assign(size_t(B_ * L_), 1);
        for (int64_t t = valid_n_; t < L_; ++t) valid_[size_t((B_ - 1) * L_ + t)] = 0;
        scale_ = 1.0f / std::sqrt(float(Dh_));
        for (int64_t b = 0; b < B_; ++b)
            for (int64_t h = 0; h < H_; ++h)
                for (int64_t i : std::set<int64_t>{0, L_ / 3, 2 * L_ / 3, L_ - 1}) {
                    samples_.push_back({b, h, i});
                    reference_row(b, h, i);
                }
    }

    std::function<void()> prepare(const Variant& v) override {
        const ops::AttentionOpts opts{.kv_heads = Hkv_, .causal = causal_};
        if (v.name == "ref")
            return [this, opts] {
                on_ref([&] { ops::attention(q_, k_, v_, H_, scale_, valid_, out_, nullptr, opts); });
            };
        return [this, opts] { ops::attention(q_, k_, v_, H_, scale_, valid_, out_, nullptr, opts); };
    }

    Agreement check() override {
        std::vector<float> got;
        for (const auto& [b, h, i] : samples_) {
            const float* o = out_.f32() + (b * L_ + i) * H_ * Dh_ + h * Dh_;
            got.insert(got.end(), o, o + Dh_);
        }
        return agreement(got.data(), ref_.data(), int64_t(got.size()));
    }

private:
    void reference_row(int64_t b, int64_t h, int64_t i) {
        const int64_t hk = h / (H_ / Hkv_), Dkv = Hkv_ * Dh_;
        const float* qi = q_.f32() + (b * L_ + i) * H_ * Dh_ + h * Dh_;
        std::vector<double> s(size_t(L_), 0.0);
        double mx = -INFINITY, sum = 0;
        const auto sees = [&](int64_t j) { return valid_[size_t(b * L_ + j)] && (!causal_ || j <= i); };
        for (int64_t j = 0; j < L_; ++j) {
            if (!sees(j)) continue;
            const float* kj = k_.f32() + (b * L_ + j) * Dkv + hk * Dh_;
            double dot = 0;
            for (int64_t c = 0; c < Dh_; ++c) dot += double(qi[c]) * kj[c];
            s[size_t(j)] = dot * scale_;
            mx = std::max(mx, s[size_t(j)]);
        }
        for (int64_t j = 0; j < L_; ++j) sum += s[size_t(j)] = sees(j) ? std::exp(s[size_t(j)] - mx) : 0.0;
        for (int64_t c = 0; c < Dh_; ++c) {
            double o = 0;
            for (int64_t j = 0; j < L_; ++j) o += s[size_t(j)] * v_.f32()[(b * L_ + j) * Dkv + hk * Dh_ + c];
            ref_.push_back(sum > 0 ? o / sum : 0.0);
        }
    }

    int64_t B_, H_, Hkv_, L_, Dh_;
    bool causal_;
    int64_t valid_n_;
    float scale_;
    Tensor q_, k_, v_, out_;
    std::vector<uint8_t> valid_;
    std::vector<std::tuple<int64_t, int64_t, int64_t>> samples_;
    std::vector<double> ref_;
};

// A pair op of the folding trunk with random weights adding its update to a pair state (L, L, C).
// The reference is the same block run unchunked; the op tests hold the block itself to plain
// double references.
class PairCase : public Case {
public:
    PairCase(const std::string& op, const Dims& d) : op_(op), L_(dim(d, "seq")), C_(dim(d, "channels")) {
        std::map<std::string, Tensor> w;
        uint32_t seed = 30;
        const auto lin = [&](const std::string& n, int64_t in, int64_t out, bool bias = true) {
            w[n + ".weight"] = random({out, in}, seed++, 0.0f, 1.0f / std::sqrt(float(in)));
            if (bias) w[n + ".bias"] = random({out}, seed++, 0.0f, 0.1f);
        };
        const auto norm = [&](const std::string& n, int64_t c) {
            w[n + ".weight"] = random({c}, seed++, 1.0f, 0.1f);
            w[n + ".bias"] = random({c}, seed++, 0.0f, 0.1f);
        };
        const int64_t C = C_, heads = std::max<int64_t>(1, C / 32), hd = C / heads;
        if (op == "trimul") {
            norm("b.layer_norm_in", C);
            norm("b.layer_norm_out", C);
            for (const char* n : {"linear_a_p", "linear_a_g", "linear_b_p", "linear_b_g", "linear_g", "linear_z"})
                lin(std::string("b.") + n, C, C);
        } else if (op == "triatt") {
            norm("b.layer_norm", C);
            lin("b.linear", C, heads, false);
            for (const char* n : {"linear_q", "linear_k", "linear_v"}) lin(std::string("b.mha.") + n, C, C, false);
            lin("b.mha.linear_g", C, C);
            lin("b.mha.linear_o", C, C);
        } else {
            norm("b.0", C);
            lin("b.1", C, 4 * C);
            lin("b.3", 4 * C, C);
        }
        const io::ModelDir m = io::ModelDir::from_tensors("sweep", {{"sweep", op}}, w);
        if (op == "trimul") trimul_ = nn::TriangleMultiplication::load(m, "b", C, dim(d, "outgoing") != 0);
        if (op == "triatt") triatt_ = nn::TriangleAttention::load(m, "b", C, hd, heads, dim(d, "starting") != 0);
        if (op == "pair_mlp") mlp_ = nn::ResidueMlp::load(m, "b", C, 4 * C);
        z0_ = random({L_, L_, C_}, 40);
        // The reference: the whole pair in one chunk on the reference kernels, independent of
        // every variant (the default's own path would give it a zero error, and the fp32 bar of
        // a few times the default's error would then refuse every other chunk size).
        ref_ = z0_.clone();
        {
            ops::BackendScope reference("ref");
            apply(ref_, L_);
        }
    }

    std::function<void()> prepare(const Variant& v) override {
        z_ = z0_.clone();
        const int64_t chunk = v.params.count("chunk") ? v.params.at("chunk") : 0;
        return [this, chunk] { apply(z_, chunk); };
    }

    Agreement check() override { return agreement(z_.f32(), ref_.f32(), z_.numel()); }

private:
    void apply(Tensor& z, int64_t chunk) {
        if (op_ == "trimul") trimul_.add_to(z, chunk);
        if (op_ == "triatt") triatt_.add_to(z, chunk);
        if (op_ == "pair_mlp") {
            Tensor zf = z.reshape({L_ * L_, C_});
            mlp_.add_to(zf, nn::pair_chunk("pair_mlp", L_, C_, chunk) * L_);
        }
    }

    std::string op_;
    int64_t L_, C_;
    nn::TriangleMultiplication trimul_;
    nn::TriangleAttention triatt_;
    nn::ResidueMlp mlp_;
    Tensor z0_, z_, ref_;
};

// Memory-bound ops: the reference kernel's output over the whole tensor.
class ElementwiseCase : public Case {
public:
    using Run = std::function<void(Tensor& out)>;
    // run_op computes into out from the case's inputs; in-place ops start from `init`.
    ElementwiseCase(Tensor init, Run run_op) : init_(std::move(init)), run_(std::move(run_op)) {
        ref_ = init_.clone();
        on_ref([&] { run_(ref_); });
        out_ = init_.clone();
    }

    std::function<void()> prepare(const Variant& v) override {
        out_ = init_.clone();  // in-place ops: the checked call starts from the same input
        if (v.name == "ref") return [this] { on_ref([&] { run_(out_); }); };
        return [this] { run_(out_); };
    }

    Agreement check() override { return agreement(out_.f32(), ref_.f32(), out_.numel()); }

private:
    Tensor init_, ref_, out_;
    Run run_;
};

std::unique_ptr<Case> make_matmul(const Dims& d, const std::string& dtype) {
    return std::make_unique<MatmulCase>(d, dtype);
}

std::unique_ptr<Case> make_attention(const Dims& d, const std::string&) {
    return std::make_unique<AttentionCase>(d);
}

std::unique_ptr<Case> make_layer_norm(const Dims& d, const std::string&) {
    const int64_t rows = dim(d, "rows"), D = dim(d, "dim");
    // Residual-stream-like rows: unit noise on a per-row offset of up to +-4, with every 64th
    // channel an outlier at 20x, so a variant whose variance cancels when the mean is large shows.
    auto x = std::make_shared<Tensor>(random({rows, D}, 21));
    std::mt19937 rng(24);
    std::uniform_real_distribution<float> offset(-4.0f, 4.0f);
    for (int64_t r = 0; r < rows; ++r) {
        const float o = offset(rng);
        for (int64_t c = 0; c < D; ++c) {
            float& v = x->f32()[r * D + c];
            v = (c % 64 == 5 ? 20.0f * v : v) + o;
        }
    }
    auto g = std::make_shared<Tensor>(random({D}, 22, 1.0f, 0.1f));
    auto b = std::make_shared<Tensor>(random({D}, 23, 0.0f, 0.1f));
    return std::make_unique<ElementwiseCase>(Tensor::zeros({rows, D}), [x, g, b](Tensor& out) {
        ops::layer_norm(*x, *g, *b, 1e-5f, out);
    });
}

std::unique_ptr<Case> make_rotary(const Dims& d, const std::string&) {
    const int64_t P = dim(d, "positions"), H = dim(d, "heads"), Dh = dim(d, "head_dim");
    auto cos = std::make_shared<Tensor>(Tensor::empty({P, Dh / 2}));
    auto sin = std::make_shared<Tensor>(Tensor::empty({P, Dh / 2}));
    Tensor inv = Tensor::empty({Dh / 2});
    for (int64_t i = 0; i < Dh / 2; ++i) inv.f32()[i] = std::pow(10000.0f, -2.0f * float(i) / float(Dh));
    ops::rotary_tables(inv, P, *cos, *sin);
    return std::make_unique<ElementwiseCase>(random({P, H, Dh}, 31), [cos, sin, P](Tensor& x) {
        ops::rotary_varlen(x, {0, P}, *cos, *sin);  // one sequence, as the packed models run it
    });
}

std::unique_ptr<Case> make_softmax(const Dims& d, const std::string&) {
    const int64_t rows = dim(d, "rows"), cols = dim(d, "cols");
    auto keep = std::make_shared<std::vector<uint8_t>>(size_t(cols), 1);
    for (int64_t c = cols - cols / 8; c < cols; ++c) (*keep)[size_t(c)] = 0;  // padded keys
    return std::make_unique<ElementwiseCase>(random({rows, cols}, 41, 0.0f, 3.0f),
                                             [keep](Tensor& x) { ops::softmax(x, nullptr, keep->data()); });
}

std::unique_ptr<Case> make_activation(const Dims& d, const std::string&) {
    const int64_t fn = dim(d, "fn"), n = dim(d, "n");
    auto x = std::make_shared<Tensor>(random({n}, 51, 0.0f, 2.0f));
    auto u = std::make_shared<Tensor>(random({n}, 52));
    return std::make_unique<ElementwiseCase>(Tensor::zeros({n}), [x, u, fn](Tensor& out) {
        if (fn == kActGelu) ops::gelu(*x, out);
        if (fn == kActGeluTanh) ops::gelu_tanh(*x, out);
        if (fn == kActSwiglu) ops::swiglu(*x, *u, out);
    });
}

std::unique_ptr<Case> make_trimul(const Dims& d, const std::string&) { return std::make_unique<PairCase>("trimul", d); }
std::unique_ptr<Case> make_triatt(const Dims& d, const std::string&) { return std::make_unique<PairCase>("triatt", d); }
std::unique_ptr<Case> make_pair_mlp(const Dims& d, const std::string&) { return std::make_unique<PairCase>("pair_mlp", d); }
std::vector<Variant> trimul_variants(const Dims& d, const std::string& dt) { return pair_variants("trimul", d, dt); }
std::vector<Variant> triatt_variants(const Dims& d, const std::string& dt) { return pair_variants("triatt", d, dt); }
std::vector<Variant> pair_mlp_variants(const Dims& d, const std::string& dt) { return pair_variants("pair_mlp", d, dt); }

// The chunk is looked up by length and width only (not by direction).
Dims pair_table_shape(const Dims& d, const std::string&) {
    return {{"seq", dim(d, "seq")}, {"channels", dim(d, "channels")}};
}

double bytes_rw(const Dims& d, const char* a, const char* b, double arrays) {
    return arrays * 4.0 * double(dim(d, a)) * double(b ? dim(d, b) : 1);
}

Dims matmul_table_shape(const Dims& d, const std::string& op) {
    if (op == "matmul" || op == "matmul_fold")  // chosen at pack time
        return {{"k", dim(d, "k")}, {"n", dim(d, "n")}};
    return {{"m", dim(d, "m")}, {"k", dim(d, "k")}, {"n", dim(d, "n")}, {"act", dim(d, "act")}};
}

// The kernel looks its tiles up by what shapes one (sequence, head) item: not by the batch (the
// engine's packed batches hold 1 to dozens of sequences) nor by the mask.
Dims attention_table_shape(const Dims& d, const std::string&) {
    Dims out;
    for (const auto& kv : d)
        if (kv.first != "valid" && kv.first != "batch") out.push_back(kv);
    return out;
}

Dims same_shape(const Dims& d, const std::string&) { return d; }

Dims activation_table_shape(const Dims& d, const std::string&) { return {{"n", dim(d, "n")}}; }

}  // namespace

const std::vector<std::string>& shape_sets() {
    static const std::vector<std::string> s{"esm", "gr00t", "esmfold", "esmfold2", "fold", "tiny"};
    return s;
}

const std::vector<OpSweep>& op_sweeps() {
    static const std::vector<OpSweep> s{
        {"matmul", true, matmul_shapes, matmul_variants, make_matmul, matmul_flops,
         matmul_table_shape},
        {"attention", true, attention_shapes, attention_variants, make_attention, attention_flops,
         attention_table_shape},
        {"layer_norm", false, layer_norm_shapes, layer_norm_variants, make_layer_norm,
         [](const Dims& d) { return bytes_rw(d, "rows", "dim", 2); }, same_shape},
        {"rotary", false, rotary_shapes, rotary_variants, make_rotary,
         [](const Dims& d) {
             return 2.0 * 4.0 * double(dim(d, "positions") * dim(d, "heads") * dim(d, "head_dim"));
         },
         same_shape},
        {"softmax", false, softmax_shapes, softmax_variants, make_softmax,
         [](const Dims& d) { return bytes_rw(d, "rows", "cols", 2); }, same_shape},
        {"activation", false, activation_shapes, activation_variants, make_activation,
         [](const Dims& d) { return bytes_rw(d, "n", nullptr, dim(d, "fn") == kActSwiglu ? 3 : 2); },
         activation_table_shape},
        {"trimul", true, trimul_shapes, trimul_variants, make_trimul, trimul_flops, pair_table_shape},
        {"triatt", true, triatt_shapes, triatt_variants, make_triatt, triatt_flops, pair_table_shape},
        {"pair_mlp", true, pair_mlp_shapes, pair_mlp_variants, make_pair_mlp, pair_mlp_flops,
         pair_table_shape},
    };
    return s;
}

const std::vector<std::pair<std::string, std::string>>& pending_sweeps() {
    static const std::vector<std::pair<std::string, std::string>> p;
    return p;
}

Variant default_variant(const std::string& table_op) {
    const Choice& c = default_choice(table_op);
    return v(c.variant, table_op, c.params);
}

}  // namespace bioinfer::tuning::sweep
