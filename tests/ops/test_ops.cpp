// Op tests: every registered backend's kernels (the CPU's ISAs this machine runs, and any other
// backend registered) against the plain fp32 reference, over odd and even sizes, masks and strides;
// and the model-specific ops composed from core entries (a table without them) against the CPU's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>
#include <utility>

#include "backend/cpu/dispatch.h"
#include "backend/cpu/peak.h"
#include "backend/kernels.h"
#include "backend/ref/ref_kernels.h"
#include "backend/registry.h"
#include "backend/tuning/defaults.h"
#include "backend/tuning/tuned_table.h"
#include "bioinfer/error.h"
#include "core/rigid.h"
#include "ops/ops.h"
#include "test_util.h"

using namespace bioinfer;
using bioinfer::test::compare;
using bioinfer::test::random_tensor;

namespace {

// The backends under test: every registered one but the reference itself.
std::vector<std::string> tested_backends() {
    std::vector<std::string> names;
    for (const backend::Backend* b : backend::backends())
        if (b->name != "ref") names.push_back(b->name);
    return names;
}

std::string param_name(std::string s) {
    for (char& c : s)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    return s;
}

// A test run for one backend under test (and one size, for OpSizes); the process default
// backend goes back to "cpu" afterwards.
class OpBackend : public ::testing::TestWithParam<std::string> {
protected:
    const std::string& tested() const { return GetParam(); }
    void TearDown() override { ops::set_backend("cpu"); }
};

class OpSizes : public ::testing::TestWithParam<std::tuple<std::string, int>> {
protected:
    const std::string& tested() const { return std::get<0>(GetParam()); }
    int size() const { return std::get<1>(GetParam()); }
    void TearDown() override { ops::set_backend("cpu"); }
    // Runs f under the reference and then the backend under test on copies of the same inputs.
    template <typename F>
    void both(F f) {
        ops::set_backend("ref");
        f(true);
        ops::set_backend(tested());
        f(false);
    }
};

}  // namespace

// Every register-level peak loop this CPU runs counts what it adds (measure_peak checks each
// thread's accumulators against the closed form and throws otherwise), at a rate a core can
// reach (at most 4 such instructions a cycle at 6 GHz); the loops it lacks are refused by name.
TEST(Peak, RunnableLoopsCountWhatTheyAddAndOthersAreRefused) {
    __builtin_cpu_init();
    bool saw_fp32 = false;
    for (const cpu::PeakKernel& k : cpu::peak_kernels()) {
        SCOPED_TRACE(k.name);
        if (k.name == "fp32_fma_avx2") {
            saw_fp32 = true;
            EXPECT_EQ(k.supported, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
        }
        if (!k.supported) {
            const std::string e = test::error_of([&] { cpu::measure_peak(k, 1, 100, 1); });
            EXPECT_NE(e.find("lacks"), std::string::npos) << e;
            continue;
        }
        for (int threads : {1, 2}) {
            const cpu::PeakResult r = cpu::measure_peak(k, threads, 1000, 2);
            EXPECT_GT(r.ops_per_s, 0.0);
            EXPECT_LT(r.ops_per_s, threads * k.ops_per_instr * 4 * 6e9);
            EXPECT_GT(r.instructions_per_thread, 0);
        }
        const int64_t n = cpu::peak_iterations(k, 1e6);  // capped where the sums stay exact
        EXPECT_NO_THROW(cpu::measure_peak(k, 1, n, 1));
        const std::string e = test::error_of([&] { cpu::measure_peak(k, 1, n + 1, 1); });
        EXPECT_NE(e.find("iterations"), std::string::npos) << e;
    }
    EXPECT_TRUE(saw_fp32);
}

TEST(Ops, KernelTableIsOptimized) {
    // On an x86-64 machine with AVX2 the dispatcher must not fall back to the reference.
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        EXPECT_NE(std::string(kernels::cpu_kernels().name), "ref");
    }
}

TEST_P(OpSizes, Linear) {
    const int64_t n = size();
    for (int64_t M : {int64_t(1), n, 2 * n + 3}) {
        Tensor x = random_tensor({M, n + 5}, 1), w = random_tensor({n, n + 5}, 2),
               b = random_tensor({n}, 3), res = random_tensor({M, n}, 4);
        // modes: GELU, no bias, accumulate, ReLU, sigmoid
        const Act acts[] = {Act::Gelu, Act::None, Act::None, Act::Relu, Act::Sigmoid};
        for (int mode = 0; mode < 5; ++mode) {
            Tensor ref, got;
            both([&](bool is_ref) {
                Tensor out = mode == 2 ? res.clone() : Tensor::empty({M, n});
                ops::linear(x, w, mode == 1 ? nullptr : &b, out,
                            {.act = acts[mode], .accumulate = mode == 2});
                (is_ref ? ref : got) = out;
            });
            compare(got, ref, 1e-5, 1e-5, "linear");
            // The same product through weights packed once into the backend's GEMM layout.
            ops::set_backend(tested());
            auto packed = ops::pack_linear_weight(w);
            Tensor out = mode == 2 ? res.clone() : Tensor::empty({M, n});
            ops::linear(x, w, mode == 1 ? nullptr : &b, out,
                        {.act = acts[mode], .accumulate = mode == 2}, packed.get());
            compare(out, ref, 1e-5, 1e-5, "linear (packed)");
        }
    }
}

// The fused linear (the own GEMM with a layer norm on its input, paired weights, an output gate,
// strided input and output) against its parts run one op at a time by the reference backend,
// over shapes with partial register tiles, K past the GEMM's K slice (no norm) and one row.
TEST_P(OpBackend, FusedLinearMatchesItsParts) {
    struct Shape3 {
        int64_t M, K, N;
    };
    int checked = 0;
    for (const Shape3 sh : {Shape3{1, 3, 1}, Shape3{7, 32, 9}, Shape3{13, 256, 40},
                            Shape3{100, 300, 17}, Shape3{61, 64, 260}}) {
        const int64_t M = sh.M, K = sh.K, N = sh.N;
        Tensor x = random_tensor({M, K}, 61, 0.5f, 2.0f), xt = random_tensor({K, M}, 62),
               w = random_tensor({N, K}, 63, 0.0f, 0.2f),
               w2 = random_tensor({N, K}, 64, 0.0f, 0.2f), b = random_tensor({N}, 65),
               b2 = random_tensor({N}, 66), g = random_tensor({K}, 67, 1.0f, 0.3f),
               beta = random_tensor({K}, 68), gate = random_tensor({M, N}, 69),
               res = random_tensor({M, N}, 70);
        for (int mode = 0; mode < 4;
             ++mode)  // single + sigmoid, single plain, SwiGLU, sigmoid pair
            for (int opt = 0; opt < 8; ++opt) {
                const bool ln = opt & 1, gated = opt & 2, transposed = opt & 4;
                ops::FusedLinear f;
                if (ln) {
                    f.ln_gamma = &g;
                    f.ln_beta = &beta;
                }
                if (mode >= 2) {
                    f.w2 = &w2;
                    f.bias2 = &b2;
                    f.glu = mode == 2 ? kernels::Glu::Silu : kernels::Glu::Sigmoid;
                }
                f.ep = {.act = mode == 0 ? Act::Sigmoid : Act::None,
                        .scale = mode == 1 ? 0.5f : 1.0f,
                        .accumulate = mode != 0};
                if (gated) f.mul = &gate;
                // transposed: x read from a (K, M) tensor, out written into an (N, M) one
                const Tensor xin = transposed ? xt.permute({1, 0}) : x;
                auto run = [&](const ops::PackedWeight* packed) {
                    Tensor store = transposed ? ops::contiguous(res.permute({1, 0})) : res.clone();
                    Tensor out = transposed ? store.permute({1, 0}) : store;
                    ops::fused_linear(xin, w, mode == 1 ? nullptr : &b, out, f, packed);
                    return ops::contiguous(out);
                };
                ops::set_backend("ref");
                const Tensor ref = run(nullptr);
                ops::set_backend(tested());
                const auto packed = ops::pack_fused_weight(w, mode >= 2 ? &w2 : nullptr);
                if (!packed) GTEST_SKIP() << tested() << " has no fused linear";
                const std::string what = "M " + std::to_string(M) + " K " + std::to_string(K) +
                                         " N " + std::to_string(N) + " mode " +
                                         std::to_string(mode) + " opt " + std::to_string(opt);
                compare(run(packed.get()), ref, 1e-4, 1e-4, what);
                ++checked;
            }
    }
    EXPECT_EQ(checked, 5 * 4 * 8);
}

// A packed weight of the wrong kind (a plain linear's, or one weight where two are paired) is
// refused by name instead of being read as panels.
TEST_P(OpBackend, FusedLinearRefusesAWrongPacking) {
    ops::set_backend(tested());
    Tensor x = random_tensor({4, 8}, 1), w = random_tensor({5, 8}, 2), out = Tensor::empty({4, 5});
    const auto single = ops::pack_fused_weight(w);
    if (!single) GTEST_SKIP() << tested() << " has no fused linear";
    ops::FusedLinear paired{.w2 = &w};
    EXPECT_NE(test::error_of([&] {
                  ops::fused_linear(x, w, nullptr, out, paired, single.get());
              }).find("pack_fused_weight"),
              std::string::npos);
    const auto plain = ops::pack_linear_weight(w);
    ASSERT_NE(plain, nullptr);
    EXPECT_NE(test::error_of([&] {
                  ops::fused_linear(x, w, nullptr, out, {}, plain.get());
              }).find("pack_fused_weight"),
              std::string::npos);
}

// bf16 GEMM (AMX / AVX-512-BF16 where present, fp32 accumulation): x and w rounded to bf16, so
// the bar is the fast path's (PCC >= 0.999), not fp32's. Weights are packed straight from bf16
// storage or from fp32.
namespace {
std::vector<std::string> g_asked;  // the ops the kernels asked the tuned table for
void record_op(const char* op, const tuning::Choice&) {
    g_asked.emplace_back(op);
}
}  // namespace

// A weight packed under ops::LinearRowsScope (a fold's) takes the table's matmul_fold choice, and
// each provider it may choose computes the linear as the reference does, K past the own GEMM's
// K slice (summed blockwise) included, with and without accumulation.
TEST_P(OpBackend, LinearPackedForAFoldTakesTheFoldChoice) {
    const int64_t M = 45, K = 700, N = 37;
    Tensor x = random_tensor({M, K}, 51), w = random_tensor({N, K}, 52), b = random_tensor({N}, 53),
           res = random_tensor({M, N}, 54);
    for (bool acc : {false, true}) {
        Tensor ref = acc ? res.clone() : Tensor::empty({M, N});
        ops::set_backend("ref");
        ops::linear(x, w, &b, ref, {.accumulate = acc});
        ops::set_backend(tested());
        for (const char* variant : {"onednn_packed", "own_packed"}) {
            SCOPED_TRACE(std::string(variant) + (acc ? " accumulate" : ""));
            ops::PackedWeightPtr packed;
            g_asked.clear();
            tuning::set_choice_observer(record_op);
            {
                const tuning::Force f("matmul_fold", {variant, {}});
                const ops::LinearRowsScope rows(256);
                packed = ops::pack_linear_weight(w);
            }
            tuning::set_choice_observer(nullptr);
            if (!packed) GTEST_SKIP() << "this backend packs no weights";
            EXPECT_NE(std::find(g_asked.begin(), g_asked.end(), "matmul_fold"), g_asked.end());
            EXPECT_EQ(std::find(g_asked.begin(), g_asked.end(), "matmul"), g_asked.end());
            Tensor got = acc ? res.clone() : Tensor::empty({M, N});
            ops::linear(x, w, &b, got, {.accumulate = acc}, packed.get());
            compare(got, ref, 1e-4, 1e-5, "linear packed for a fold");  // sums of 700 products
        }
    }
    EXPECT_EQ(ops::linear_rows(), 0);  // the scope restored it
}

TEST_P(OpBackend, LinearBf16Packed) {
    for (int64_t n : {7, 64, 100}) {
        const int64_t M = 2 * n + 3, K = 3 * n + 5;
        Tensor x = random_tensor({M, K}, 41), w = random_tensor({n, K}, 42), b = random_tensor({n}, 43);
        Tensor ref = Tensor::empty({M, n});
        ops::set_backend("ref");
        ops::linear(x, w, &b, ref, {.act = Act::Gelu});
        ops::set_backend(tested());
        Tensor wb = Tensor::empty({n, K}, DType::BF16);
        for (int64_t i = 0; i < w.numel(); ++i)
            static_cast<uint16_t*>(wb.raw())[i] = f32_to_bf16(w.f32()[i]);
        for (const Tensor* src : {&w, &wb}) {
            auto packed = ops::pack_linear_weight(*src, DType::BF16);
            if (!packed) GTEST_SKIP() << "no bf16 GEMM on this CPU";
            Tensor got = Tensor::empty({M, n});
            ops::linear(x, *src, &b, got, {.act = Act::Gelu}, packed.get());
            auto s = test::stats(got.f32(), ref.f32(), got.numel());
            EXPECT_GE(s.pcc, 0.9999) << "n " << n;
            EXPECT_LE(s.rel_l2, 1e-2) << "n " << n;
            EXPECT_GT(s.max_abs, 0.0) << "bf16 rounding must show: is the fp32 path running?";
        }
    }
}

// int8 linear (per-channel weights quantized at pack time, per-row activations on every call):
// against the fp32 reference at the fast path's bar, for every epilogue, across shapes that
// leave partial SIMD rows. Backends without an int8 GEMM (ref) pack nothing.
TEST_P(OpBackend, LinearInt8Packed) {
    ops::set_backend(tested());
    if (!ops::pack_linear_weight(Tensor::zeros({16, 16}), DType::I8))
        GTEST_SKIP() << tested() << " has no int8 GEMM";
    const Act acts[] = {Act::Gelu, Act::None, Act::None, Act::Relu, Act::Sigmoid};
    for (int64_t n : {7, 64, 100}) {
        const int64_t M = 2 * n + 3, K = 3 * n + 5;
        Tensor x = random_tensor({M, K}, 51), w = random_tensor({n, K}, 52),
               b = random_tensor({n}, 53), res = random_tensor({M, n}, 54);
        auto packed = ops::pack_linear_weight(w, DType::I8);
        ASSERT_TRUE(packed);
        for (int mode = 0; mode < 5; ++mode) {
            const ops::Epilogue ep{
                .act = acts[mode], .scale = mode == 2 ? 0.5f : 1.0f, .accumulate = mode == 2};
            Tensor ref = mode == 2 ? res.clone() : Tensor::empty({M, n});
            Tensor got = mode == 2 ? res.clone() : Tensor::empty({M, n});
            ops::set_backend("ref");
            ops::linear(x, w, mode == 1 ? nullptr : &b, ref, ep);
            ops::set_backend(tested());
            ops::linear(x, w, mode == 1 ? nullptr : &b, got, ep, packed.get());
            auto s = test::stats(got.f32(), ref.f32(), got.numel());
            EXPECT_GE(s.pcc, 0.999) << "n " << n << " mode " << mode;
            EXPECT_LE(s.rel_l2, 5e-2) << "n " << n << " mode " << mode;
            EXPECT_GT(s.max_abs, 0.0) << "int8 rounding must show: is the fp32 path running?";
        }
    }
}

// Values on the quantization grids come through int8 exactly (up to fp32 rounding of the
// rescale), including the extremes that would saturate AVX2's 16-bit pair sums if the weights
// used all 8 bits: every x row holds +-max|x| (127 after scaling) and every w row +-max|w|.
TEST_P(OpBackend, LinearInt8ExactOnGridAndUnsaturated) {
    ops::set_backend(tested());
    if (!ops::pack_linear_weight(Tensor::zeros({16, 16}), DType::I8))
        GTEST_SKIP() << tested() << " has no int8 GEMM";
    const int64_t M = 9, K = 256, N = 33;
    Tensor x = Tensor::empty({M, K}), w = Tensor::empty({N, K});
    for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < K; ++k)  // all at the row's max magnitude, mostly positive
            x.f32()[m * K + k] = float(m + 1) * ((k % 7 == 3) ? -1.0f : 1.0f);
    for (int64_t j = 0; j < N; ++j)
        for (int64_t k = 0; k < K; ++k)
            w.f32()[j * K + k] = 0.25f * float(j + 1) * ((k + j) % 5 == 0 ? -1.0f : 1.0f);
    auto packed = ops::pack_linear_weight(w, DType::I8);
    ASSERT_TRUE(packed);
    Tensor got = Tensor::empty({M, N}), ref = Tensor::empty({M, N});
    ops::linear(x, w, nullptr, got, {}, packed.get());
    ops::set_backend("ref");
    ops::linear(x, w, nullptr, ref);
    ops::set_backend(tested());
    compare(got, ref, 1e-4, 1e-5, "int8 linear on the grid");
}

TEST_P(OpBackend, PackedWeightIsIgnoredUnderAnotherBackend) {
    Tensor x = random_tensor({5, 9}, 1), w = random_tensor({4, 9}, 2);
    ops::set_backend(tested());
    auto packed = ops::pack_linear_weight(w);
    Tensor got = Tensor::empty({5, 4}), ref = Tensor::empty({5, 4});
    ops::set_backend("ref");
    ops::linear(x, w, nullptr, ref);
    ops::linear(x, w, nullptr, got, {}, packed.get());
    ops::set_backend(tested());
    compare(got, ref, 0, 0, "linear (packed for cpu, run on ref)");
}

TEST_P(OpSizes, LayerNorm) {
    const int64_t d = size();
    Tensor x = random_tensor({7, d}, 5, 3.0f, 1.5f), g = random_tensor({d}, 6), b = random_tensor({d}, 7);
    Tensor ref = Tensor::empty({7, d}), got = Tensor::empty({7, d});
    ops::set_backend("ref");
    ops::layer_norm(x, g, b, 1e-5f, ref);
    ops::set_backend(tested());
    ops::layer_norm(x, g, b, 1e-5f, got);
    compare(got, ref, 2e-6, 1e-6, "layer_norm");
}

TEST_P(OpSizes, Gelu) {
    const int64_t n = size() * 7;
    Tensor x = random_tensor({n}, 8, 0.0f, 4.0f);
    Tensor ref = Tensor::empty({n}), got = Tensor::empty({n});
    ops::set_backend("ref");
    ops::gelu(x, ref);
    ops::set_backend(tested());
    ops::gelu(x, got);
    compare(got, ref, 1e-6, 2e-6, "gelu");
}

TEST_P(OpSizes, SoftmaxWithMasks) {
    const int64_t c = size();
    std::vector<uint8_t> keep(size_t(c), 1);
    for (int64_t i = 0; i < c; i += 3) keep[size_t(i)] = 0;
    keep[size_t(c - 1)] = 1;
    Tensor add = random_tensor({c}, 9);
    for (int variant = 0; variant < 3; ++variant) {
        Tensor x = random_tensor({5, c}, 10, 0.0f, 5.0f);
        Tensor ref = x.clone(), got = x.clone();
        const Tensor* a = variant == 1 ? &add : nullptr;
        const uint8_t* k = variant == 2 ? keep.data() : nullptr;
        ops::set_backend("ref");
        ops::softmax(ref, a, k);
        ops::set_backend(tested());
        ops::softmax(got, a, k);
        compare(got, ref, 1e-6, 1e-6, "softmax");
        if (!k) continue;
        for (int64_t r = 0; r < 5; ++r)
            for (int64_t i = 0; i < c; ++i) {
                if (!keep[size_t(i)]) {
                    EXPECT_EQ(got.f32()[r * c + i], 0.0f);
                }
            }
    }
}

TEST_P(OpSizes, Rotary) {
    const int64_t dh = 2 * size();
    const int64_t B = 2, L = 9, H = 3;
    Tensor inv = Tensor::empty({dh / 2});
    for (int64_t i = 0; i < dh / 2; ++i) inv.f32()[i] = 1.0f / std::pow(10000.0f, float(2 * i) / float(dh));
    Tensor cos, sin;
    ops::rotary_tables(inv, L, cos, sin);
    Tensor x = random_tensor({B, L, H, dh}, 11);
    Tensor ref = x.clone(), got = x.clone();
    ops::set_backend("ref");
    ops::rotary(ref, cos, sin);
    ops::set_backend(tested());
    ops::rotary(got, cos, sin);
    compare(got, ref, 1e-6, 1e-6, "rotary");
    // Position 0 is the identity rotation.
    for (int64_t i = 0; i < H * dh; ++i) EXPECT_FLOAT_EQ(got.f32()[i], x.f32()[i]);
}

TEST_P(OpSizes, AttentionWithKeyPadding) {
    const int64_t L = size(), H = 2, Dh = 12, B = 3;
    Tensor q = random_tensor({B, L, H * Dh}, 12), k = random_tensor({B, L, H * Dh}, 13),
           v = random_tensor({B, L, H * Dh}, 14);
    std::vector<uint8_t> valid(size_t(B * L), 1);
    for (int64_t t = L / 2 + 1; t < L; ++t) valid[size_t(1 * L + t)] = 0;  // batch 1 padded
    Tensor ref_o = Tensor::empty({B, L, H * Dh}), got_o = Tensor::empty({B, L, H * Dh});
    Tensor ref_p = Tensor::empty({B, H, L, L}), got_p = Tensor::empty({B, H, L, L});
    ops::set_backend("ref");
    ops::attention(q, k, v, H, 0.3f, valid, ref_o, &ref_p);
    ops::set_backend(tested());
    ops::attention(q, k, v, H, 0.3f, valid, got_o, &got_p);
    compare(got_o, ref_o, 1e-5, 1e-5, "attention out");
    compare(got_p, ref_p, 1e-6, 1e-6, "attention probs");
    // Without probs the tiled (online-softmax) kernel runs: same result within rounding.
    Tensor o2 = Tensor::empty({B, L, H * Dh});
    ops::attention(q, k, v, H, 0.3f, valid, o2, nullptr);
    compare(o2, ref_o, 1e-5, 1e-5, "attention without probs");
    // Independent oracle: batch 1 equals attention over its valid prefix alone.
    const int64_t Lv = L / 2 + 1;
    for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < L; ++i) {
            std::vector<double> s(static_cast<size_t>(Lv));
            double mx = -1e300, sum = 0;
            for (int64_t j = 0; j < Lv; ++j) {
                double d = 0;
                for (int64_t c = 0; c < Dh; ++c)
                    d += double(q.f32()[(L + i) * H * Dh + h * Dh + c]) * k.f32()[(L + j) * H * Dh + h * Dh + c];
                s[size_t(j)] = 0.3 * d;
                mx = std::max(mx, s[size_t(j)]);
            }
            for (auto& e : s) sum += (e = std::exp(e - mx));
            for (int64_t c = 0; c < Dh; ++c) {
                double o = 0;
                for (int64_t j = 0; j < Lv; ++j) o += s[size_t(j)] / sum * v.f32()[(L + j) * H * Dh + h * Dh + c];
                EXPECT_NEAR(got_o.f32()[(L + i) * H * Dh + h * Dh + c], o, 2e-5);
            }
        }
}

// Pair-biased attention (ESMFold's sequence and triangle attention): an (H, L, L) bias shared by
// the batch or one per sequence, with key padding, through the materialised and the tiled kernel,
// against the reference and against scores written out here.
TEST_P(OpSizes, AttentionWithPairBias) {
    const int64_t L = size(), H = 3, Dh = 8, B = 2;
    Tensor q = random_tensor({B, L, H * Dh}, 51), k = random_tensor({B, L, H * Dh}, 52),
           v = random_tensor({B, L, H * Dh}, 53);
    std::vector<uint8_t> valid(size_t(B * L), 1);
    for (int64_t t = L / 2 + 1; t < L; ++t) valid[size_t(L + t)] = 0;
    for (bool shared : {true, false}) {
        Tensor bias = shared ? random_tensor({H, L, L}, 54, 0.0f, 2.0f)
                             : random_tensor({B, H, L, L}, 55, 0.0f, 2.0f);
        const ops::AttentionOpts opts{.bias = &bias};
        Tensor ref_o = Tensor::empty({B, L, H * Dh}), ref_p = Tensor::empty({B, H, L, L});
        ops::set_backend("ref");
        ops::attention(q, k, v, H, 0.35f, valid, ref_o, &ref_p, opts);
        ops::set_backend(tested());
        for (bool with_probs : {true, false}) {
            Tensor o = Tensor::empty({B, L, H * Dh}), p = Tensor::empty({B, H, L, L});
            ops::attention(q, k, v, H, 0.35f, valid, o, with_probs ? &p : nullptr, opts);
            const std::string what = std::string("biased attention (") +
                                     (shared ? "shared" : "per sequence") +
                                     (with_probs ? ", materialised)" : ", tiled)");
            compare(o, ref_o, 1e-5, 1e-5, what);
            if (with_probs) compare(p, ref_p, 1e-6, 1e-6, what + " probs");
        }
        // The reference's probabilities against softmax(scale q.k + bias) over valid keys.
        for (int64_t b = 0; b < B; ++b)
            for (int64_t h = 0; h < H; ++h) {
                const int64_t i = L - 1;
                const float* bi = bias.f32() + (shared ? 0 : b * H * L * L) + (h * L + i) * L;
                std::vector<double> s(size_t(L), 0.0);
                double mx = -1e300, sum = 0;
                for (int64_t j = 0; j < L; ++j) {
                    if (!valid[size_t(b * L + j)]) continue;
                    double d = 0;
                    for (int64_t c = 0; c < Dh; ++c)
                        d += double(q.f32()[(b * L + i) * H * Dh + h * Dh + c]) *
                             k.f32()[(b * L + j) * H * Dh + h * Dh + c];
                    s[size_t(j)] = 0.35 * d + bi[j];
                    mx = std::max(mx, s[size_t(j)]);
                }
                for (int64_t j = 0; j < L; ++j)
                    if (valid[size_t(b * L + j)]) sum += (s[size_t(j)] = std::exp(s[size_t(j)] - mx));
                for (int64_t j = 0; j < L; ++j)
                    EXPECT_NEAR(ref_p.f32()[((b * H + h) * L + i) * L + j],
                                valid[size_t(b * L + j)] ? s[size_t(j)] / sum : 0.0, 1e-6);
            }
    }
    Tensor wrong = Tensor::zeros({H, L + 1, L + 1}), o = Tensor::empty({B, L, H * Dh});
    const ops::AttentionOpts bad{.bias = &wrong};
    EXPECT_THROW(ops::attention(q, k, v, H, 0.35f, valid, o, nullptr, bad), Error);
}

// Long sequences cross several query and key tiles of the tiled kernel; the masks here are not
// only trailing padding (holes, a fully masked sequence), and head dims are odd-sized multiples.
TEST_P(OpBackend, AttentionTiledLongAndHoles) {
    for (int64_t Dh : {8, 24, 36, 64}) {
        const int64_t L = 300, H = 3, B = 3;
        Tensor q = random_tensor({B, L, H * Dh}, 31, 0.0f, 2.0f), k = random_tensor({B, L, H * Dh}, 32),
               v = random_tensor({B, L, H * Dh}, 33);
        std::vector<uint8_t> valid(size_t(B * L), 1);
        for (int64_t t = 0; t < L; ++t) valid[size_t(L + t)] = (t % 7 != 3) && t < 257;
        for (int64_t t = 0; t < L; ++t) valid[size_t(2 * L + t)] = 0;
        for (bool with_probs : {false, true}) {
            Tensor ref_o = Tensor::empty({B, L, H * Dh}), got_o = Tensor::empty({B, L, H * Dh});
            Tensor ref_p = Tensor::empty({B, H, L, L}), got_p = Tensor::empty({B, H, L, L});
            ops::set_backend("ref");
            ops::attention(q, k, v, H, 0.2f, valid, ref_o, &ref_p);
            ops::set_backend(tested());
            ops::attention(q, k, v, H, 0.2f, valid, got_o, with_probs ? &got_p : nullptr);
            compare(got_o, ref_o, 1e-5, 1e-5, "attention (L 300, Dh " + std::to_string(Dh) + ")");
            if (with_probs) compare(got_p, ref_p, 1e-6, 1e-6, "attention probs (L 300)");
            // The fully masked sequence gives zeros, not NaN.
            for (int64_t i = 0; i < L * H * Dh; ++i) ASSERT_EQ(got_o.f32()[2 * L * H * Dh + i], 0.0f);
        }
    }
}

// Packed sequences (cu_seqlens) against each sequence run alone: attention, its probabilities
// and rotary positions restart at every sequence, on both backends; lengths cross the tile sizes.
TEST_P(OpBackend, AttentionAndRotaryVarlenEqualEachSequenceAlone) {
    const std::vector<int64_t> lens{1, 70, 300, 129, 5};
    std::vector<int64_t> cu{0};
    for (int64_t n : lens) cu.push_back(cu.back() + n);
    const int64_t N = cu.back(), B = int64_t(lens.size()), P = 300;
    for (int64_t Dh : {24, 64}) {
        const int64_t H = 3, D = H * Dh;
        Tensor inv = Tensor::empty({Dh / 2}), cos, sin;
        for (int64_t i = 0; i < Dh / 2; ++i) inv.f32()[i] = std::pow(10000.0f, -2.0f * float(i) / float(Dh));
        ops::rotary_tables(inv, P, cos, sin);
        Tensor q = random_tensor({N, D}, 51, 0.0f, 2.0f), k = random_tensor({N, D}, 52),
               v = random_tensor({N, D}, 53);
        for (const std::string& backend : {std::string("ref"), tested()}) {
            ops::set_backend(backend);
            const std::string tag = std::string(ops::backend_name()) + " Dh " + std::to_string(Dh);
            Tensor qr = q.clone(), out = Tensor::empty({N, D}), probs = Tensor::empty({B, H, P, P});
            Tensor q3 = qr.reshape({N, H, Dh});
            ops::rotary_varlen(q3, cu, cos, sin);
            ops::attention_varlen(qr, k, v, H, 0.2f, cu, out, &probs);
            Tensor out_np = Tensor::empty({N, D});
            ops::attention_varlen(qr, k, v, H, 0.2f, cu, out_np, nullptr);
            compare(out_np, out, 1e-5, 1e-5, tag + " varlen tiled vs probs path");
            for (int64_t b = 0; b < B; ++b) {
                const int64_t L = lens[size_t(b)], r0 = cu[size_t(b)];
                auto rows = [&](const Tensor& t) {
                    Tensor o = Tensor::empty({1, L, D});
                    std::copy(t.f32() + r0 * D, t.f32() + (r0 + L) * D, o.f32());
                    return o;
                };
                Tensor qs = rows(q), ks = rows(k), vs = rows(v), os = Tensor::empty({1, L, D});
                Tensor q4 = qs.reshape({1, L, H, Dh});
                ops::rotary(q4, cos, sin);
                compare(qs, rows(qr), 0, 0, tag + " rotary of sequence " + std::to_string(b));
                Tensor ps = Tensor::empty({1, H, L, L});
                ops::attention(qs, ks, vs, H, 0.2f, std::vector<uint8_t>(size_t(L), 1), os, &ps);
                compare(rows(out), os, 1e-6, 1e-6, tag + " attention of sequence " + std::to_string(b));
                for (int64_t h = 0; h < H; ++h)
                    for (int64_t i = 0; i < P; ++i)
                        for (int64_t j = 0; j < P; ++j) {
                            const float got = probs.f32()[((b * H + h) * P + i) * P + j];
                            const float want = i < L && j < L ? ps.f32()[(h * L + i) * L + j] : 0.0f;
                            ASSERT_NEAR(got, want, 1e-6) << tag << " probs " << b << "," << h << ","
                                                         << i << "," << j;
                        }
            }
        }
    }
    ops::set_backend(tested());
    Tensor q = random_tensor({10, 8}, 1), out = Tensor::empty({10, 8});
    EXPECT_THROW(ops::attention_varlen(q, q, q, 2, 1.0f, {0, 4, 9}, out, nullptr), Error);
    EXPECT_THROW(ops::attention_varlen(q, q, q, 2, 1.0f, {0, 4, 4, 10}, out, nullptr), Error);
}

TEST_P(OpSizes, GemmStrided) {
    const int64_t n = size();
    const int64_t M = n + 1, N = n + 2, K = n, lda = K + 3, ldb = N + 5, ldc = N + 1;
    Tensor a = random_tensor({M, lda}, 15), b = random_tensor({K, ldb}, 16);
    Tensor ref = Tensor::zeros({M, ldc}), got = Tensor::zeros({M, ldc});
    const kernels::Context ctx;
    kernels::ref_kernels().gemm_nn(ctx, a.f32(), lda, b.f32(), ldb, ref.f32(), ldc, M, N, K);
    backend::get(tested()).kernels->gemm_nn(ctx, a.f32(), lda, b.f32(), ldb, got.f32(), ldc, M, N, K);
    compare(got, ref, 1e-5, 1e-5, "gemm_nn");
}

TEST_P(OpSizes, AddScale) {
    const int64_t n = size() * 3 + 1;
    Tensor a = random_tensor({n}, 17), b = random_tensor({n}, 18);
    Tensor r1 = Tensor::empty({n}), g1 = Tensor::empty({n});
    ops::set_backend("ref");
    ops::add(a, b, r1);
    ops::set_backend(tested());
    ops::add(a, b, g1);
    compare(g1, r1, 0, 0, "add");
    ops::scale(a, -0.7f, g1);
    for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(g1.f32()[i], a.f32()[i] * -0.7f);
}

TEST_P(OpSizes, MulAndBatchedMatmul) {
    const int64_t n = size();
    Tensor a = random_tensor({3 * n + 1}, 61), b = random_tensor({3 * n + 1}, 62);
    Tensor r1 = Tensor::empty({3 * n + 1}), g1 = Tensor::empty({3 * n + 1});
    ops::set_backend("ref");
    ops::mul(a, b, r1);
    ops::set_backend(tested());
    ops::mul(a, b, g1);
    compare(g1, r1, 0, 0, "mul");
    for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(g1.f32()[i], a.f32()[i] * b.f32()[i]);
    const int64_t G = 5, M = n + 2, K = n, N = n + 3;
    for (int t = 0; t < 4; ++t) {
        const bool ta = t & 1, tb = t & 2;
        Tensor x = random_tensor(ta ? Shape{G, K, M} : Shape{G, M, K}, 63),
               y = random_tensor(tb ? Shape{G, N, K} : Shape{G, K, N}, 64);
        Tensor ref, got;
        both([&](bool is_ref) {
            Tensor out = Tensor::empty({G, M, N});
            ops::bmm(x, y, out, ta, tb);
            (is_ref ? ref : got) = out;
        });
        const std::string what = "bmm trans " + std::to_string(t);
        compare(got, ref, 1e-4, 1e-4, what);
        // group 3, element (1, 2) written out
        double d = 0;
        for (int64_t kk = 0; kk < K; ++kk)
            d += double(ta ? x.f32()[(3 * K + kk) * M + 1] : x.f32()[(3 * M + 1) * K + kk]) *
                 (tb ? y.f32()[(3 * N + 2) * K + kk] : y.f32()[(3 * K + kk) * N + 2]);
        EXPECT_NEAR(got.f32()[(3 * M + 1) * N + 2], d, 1e-4) << what;
        Tensor wrong = Tensor::empty({G, M, N + 1});
        EXPECT_THROW(ops::bmm(x, y, wrong, ta, tb), Error);
    }
}

INSTANTIATE_TEST_SUITE_P(OddEven, OpSizes,
                         ::testing::Combine(::testing::ValuesIn(tested_backends()),
                                            ::testing::Values(1, 7, 8, 16, 33, 64, 100)),
                         [](const auto& info) {
                             return param_name(std::get<0>(info.param)) + "_" +
                                    std::to_string(std::get<1>(info.param));
                         });

TEST_P(OpBackend, EmbeddingGatherAndBadId) {
    Tensor table = random_tensor({5, 4}, 19);
    Tensor out = Tensor::empty({3, 4});
    ops::embedding({4, 0, 4}, table, out);
    for (int c = 0; c < 4; ++c) {
        EXPECT_EQ(out.f32()[c], table.f32()[16 + c]);
        EXPECT_EQ(out.f32()[4 + c], table.f32()[c]);
    }
    EXPECT_THROW(ops::embedding({5, 0, 1}, table, out), Error);
}

TEST_P(OpBackend, ShapeErrorsNameTheOperand) {
    Tensor x = random_tensor({3, 4}, 20), w = random_tensor({5, 6}, 21), out = Tensor::empty({3, 5});
    try {
        ops::linear(x, w, nullptr, out);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("[linear] x: expected last dim 6"), std::string::npos)
            << e.what();
    }
}

INSTANTIATE_TEST_SUITE_P(Backends, OpBackend, ::testing::ValuesIn(tested_backends()),
                         [](const auto& info) { return param_name(info.param); });

// --- data movement and glue ops: each backend against values written out here ---

namespace {

// Runs f once under the reference and once under the backend under test.
template <typename F>
void on_ref_and(const std::string& tested, F f) {
    for (const std::string& b : {std::string("ref"), tested}) {
        ops::set_backend(b);
        f(b);
    }
}

}  // namespace

TEST_P(OpBackend, CopyStridedViews) {
    on_ref_and(tested(), [&](const std::string& b) {
        for (int64_t n : {3, 40, 100}) {  // 100: past one 32-wide tile and the serial threshold
            const int64_t A = 5, B = n, C = n + 3;
            Tensor x = random_tensor({A, B, C}, 81);
            const auto at = [&](int64_t i, int64_t j, int64_t k) { return x.f32()[(i * B + j) * C + k]; };
            for (const std::vector<int>& p : std::vector<std::vector<int>>{
                     {0, 1, 2}, {1, 0, 2}, {2, 1, 0}, {0, 2, 1}, {2, 0, 1}}) {
                Tensor v = x.slice(1, 1, B).permute(p);
                Tensor out = ops::contiguous(v);
                Shape full{A, B - 1, C};
                for (int64_t i = 0; i < out.size(0); ++i)
                    for (int64_t j = 0; j < out.size(1); ++j)
                        for (int64_t k = 0; k < out.size(2); ++k) {
                            int64_t idx[3];
                            idx[p[0]] = i, idx[p[1]] = j, idx[p[2]] = k;
                            ASSERT_EQ(out.f32()[(i * out.size(1) + j) * out.size(2) + k],
                                      at(idx[0], idx[1] + 1, idx[2]))
                                << b << " permute " << p[0] << p[1] << p[2] << " n " << n;
                        }
                // accumulate into the strided view: every element of the slice doubles
                Tensor y = x.clone();
                Tensor yv = y.slice(1, 1, B).permute(p);
                ops::add_into(out, yv);
                for (int64_t i = 0; i < A; ++i)
                    for (int64_t j = 0; j < B; ++j)
                        for (int64_t k = 0; k < C; ++k)
                            ASSERT_EQ(y.f32()[(i * B + j) * C + k], j == 0 ? at(i, j, k) : at(i, j, k) + at(i, j, k))
                                << b << " add_into " << n;
            }
        }
        // I32 and a broadcast source (stride 0)
        Tensor ids = Tensor::of(std::vector<int32_t>{4, -2, 7}), ids3 = Tensor::empty({2, 3}, DType::I32);
        ops::copy(ids.expand({2, 3}), ids3);
        for (int i = 0; i < 6; ++i) EXPECT_EQ(ids3.i32()[i], ids.i32()[i % 3]) << b;
        Tensor wrong = Tensor::empty({2, 4});
        EXPECT_THROW(ops::copy(ids3, wrong), Error);
    });
}

TEST_P(OpBackend, ElementwiseGlue) {
    on_ref_and(tested(), [&](const std::string& b) {
        const int64_t R = 37, C = 9;
        Tensor a = random_tensor({R, 3 * C}, 82), x = random_tensor({R, C}, 83), y0 = random_tensor({R, C}, 84);
        // 2-D views with contiguous rows: a's first C columns and its last C
        Tensor av = a.slice(1, 0, C), bv = a.slice(1, 2 * C, 3 * C);
        Tensor m = Tensor::empty({R, C}), s = Tensor::empty({R, C}), am = y0.clone();
        ops::mul(av, bv, m);
        ops::add(x, bv, s);
        ops::add_mul(av, bv, am);
        Tensor xs = x.clone(), f = random_tensor({R}, 85), sr = Tensor::empty({R, C});
        ops::axpy(-0.75f, y0, xs);
        ops::scale_rows(x, f, sr);
        Tensor relu = Tensor::empty({R, C}), sig = Tensor::empty({R, C});
        ops::activation(x, Act::Relu, relu, 0.25f);
        ops::activation(x, Act::Sigmoid, sig, -0.5f);
        for (int64_t r = 0; r < R; ++r)
            for (int64_t c = 0; c < C; ++c) {
                const float ai = a.f32()[r * 3 * C + c], bi = a.f32()[r * 3 * C + 2 * C + c];
                const float xi = x.f32()[r * C + c], yi = y0.f32()[r * C + c];
                const int64_t i = r * C + c;
                ASSERT_EQ(m.f32()[i], ai * bi) << b;
                ASSERT_EQ(s.f32()[i], xi + bi) << b;
                ASSERT_NEAR(am.f32()[i], yi + ai * bi, 1e-6) << b;
                ASSERT_NEAR(xs.f32()[i], xi - 0.75f * yi, 1e-6) << b;
                ASSERT_EQ(sr.f32()[i], xi * f.f32()[r]) << b;
                ASSERT_EQ(relu.f32()[i], std::max(xi + 0.25f, 0.0f)) << b;
                ASSERT_NEAR(sig.f32()[i], 1.0 / (1.0 + std::exp(-(double(xi) - 0.5))), 1e-6) << b;
            }
        Tensor nx = random_tensor({R * 7, 2}, 86), nn_out = Tensor::empty({R * 7, 2});
        ops::l2_normalize(nx, 1e-8f, nn_out);
        for (int64_t r = 0; r < R * 7; ++r)
            ASSERT_NEAR(std::hypot(nn_out.f32()[2 * r], nn_out.f32()[2 * r + 1]), 1.0, 1e-6) << b;
        Tensor rx = random_tensor({R, 16}, 91), rn = Tensor::empty({R, 16});
        ops::rms_norm(rx, 1e-6f, rn);
        for (int64_t r = 0; r < R; ++r) {
            double ms = 0;
            for (int c = 0; c < 16; ++c) ms += double(rx.f32()[r * 16 + c]) * rx.f32()[r * 16 + c];
            const double inv = 1.0 / std::sqrt(ms / 16 + 1e-6);
            for (int c = 0; c < 16; ++c)
                ASSERT_NEAR(rn.f32()[r * 16 + c], rx.f32()[r * 16 + c] * inv, 1e-5) << b;
        }
        Tensor p = random_tensor({R, 11}, 87), v = random_tensor({11}, 88), e = Tensor::empty({R});
        ops::bin_expectation(p, v, e);
        for (int64_t r = 0; r < R; ++r) {
            double want = 0;
            for (int k = 0; k < 11; ++k) want += double(p.f32()[r * 11 + k]) * v.f32()[k];
            ASSERT_NEAR(e.f32()[r], want, 1e-5) << b;
        }
        EXPECT_EQ(ops::max_value(p), *std::max_element(p.f32(), p.f32() + p.numel())) << b;
    });
}

TEST_P(OpBackend, GathersAndSequenceGlue) {
    on_ref_and(tested(), [&](const std::string& b) {
        Tensor table = random_tensor({6, 5}, 89), out = random_tensor({4, 5}, 90), acc = out.clone();
        const std::vector<int32_t> ids{5, 0, 5, 2};
        ops::embedding(ids, table, acc, /*accumulate=*/true);
        Tensor got = Tensor::empty({4, 5});
        ops::embedding(Tensor::of(ids), table, got);
        for (int i = 0; i < 4; ++i)
            for (int d = 0; d < 5; ++d) {
                ASSERT_EQ(got.f32()[i * 5 + d], table.f32()[ids[size_t(i)] * 5 + d]) << b;
                ASSERT_EQ(acc.f32()[i * 5 + d], out.f32()[i * 5 + d] + table.f32()[ids[size_t(i)] * 5 + d]) << b;
            }
        // a negative id is a zero row: written as zeros, or nothing added
        const std::vector<int32_t> holes{-1, 3, -1};
        Tensor gz = random_tensor({3, 5}, 96), ga = random_tensor({3, 5}, 97), ga0 = ga.clone();
        ops::embedding(Tensor::of(holes), table, gz);
        ops::embedding(Tensor::of(holes), table, ga, /*accumulate=*/true);
        for (int i = 0; i < 3; ++i)
            for (int d = 0; d < 5; ++d) {
                const float row = holes[size_t(i)] < 0 ? 0.0f : table.f32()[holes[size_t(i)] * 5 + d];
                ASSERT_EQ(gz.f32()[i * 5 + d], row) << b;
                ASSERT_EQ(ga.f32()[i * 5 + d], ga0.f32()[i * 5 + d] + row) << b;
            }
        // token dropout: two sequences, one with two <mask> (id 32) of 6 tokens
        const std::vector<int64_t> cu{0, 6, 9};
        const std::vector<int32_t> tok{0, 32, 5, 32, 7, 2, 0, 9, 2};
        Tensor x = random_tensor({9, 4}, 91), xd = x.clone();
        ops::token_dropout(xd, tok, cu, 32, 0.88f);
        for (int64_t t = 0; t < 9; ++t)
            for (int d = 0; d < 4; ++d) {
                const float denom = t < 6 ? 1.0f - 2.0f / 6.0f : 1.0f;
                const float want = tok[size_t(t)] == 32 ? 0.0f : x.f32()[t * 4 + d] * 0.88f / denom;
                ASSERT_EQ(xd.f32()[t * 4 + d], want) << b << " token " << t;
            }
        // outer product and difference of [q | k], rows 1..3 of a 4-residue state
        const int64_t L = 4, I = 3;
        Tensor qk = random_tensor({L, 2 * I}, 92), pd = Tensor::empty({2 * L, 2 * I});
        ops::outer_product_difference(qk, 1, 3, pd);
        for (int64_t i = 1; i < 3; ++i)
            for (int64_t j = 0; j < L; ++j)
                for (int64_t c = 0; c < I; ++c) {
                    const float q = qk.f32()[j * 2 * I + c], k = qk.f32()[i * 2 * I + I + c];
                    ASSERT_EQ(pd.f32()[((i - 1) * L + j) * 2 * I + c], q * k) << b;
                    ASSERT_EQ(pd.f32()[((i - 1) * L + j) * 2 * I + I + c], q - k) << b;
                }
    });
}

TEST_P(OpBackend, AtomPairGeometry) {
    on_ref_and(tested(), [&](const std::string& b) {
        // 3 windows of 4 query atoms, 8 key slots from 2 atoms before the window on; atoms 10
        // and 11 are padding; uids change every 3 atoms
        const int64_t K = 3, W = 4, H = 8, A = K * W;
        Tensor pos = random_tensor({A, 3}, 98, 0.0f, 3.0f), valid = Tensor::empty({A}), uid = Tensor::empty({A});
        std::vector<int32_t> keys(size_t(K * H));
        for (int64_t a = 0; a < A; ++a) valid.f32()[a] = a < 10 ? 1.0f : 0.0f, uid.f32()[a] = float(a / 3);
        for (int64_t k = 0; k < K; ++k)
            for (int64_t h = 0; h < H; ++h) {
                const int64_t atom = k * W - 2 + h;
                keys[size_t(k * H + h)] = atom >= 0 && atom < A ? int32_t(atom) : -1;
            }
        Tensor out = Tensor::empty({K, W, H, 5});
        ops::atom_pair_geometry(pos, valid, uid, Tensor::of(keys, {K, H}), out);
        for (int64_t k = 0; k < K; ++k)
            for (int64_t w = 0; w < W; ++w)
                for (int64_t h = 0; h < H; ++h) {
                    const int64_t q = k * W + w, key = keys[size_t(k * H + h)];
                    const float* o = out.f32() + ((k * W + w) * H + h) * 5;
                    float n = 0;
                    for (int c = 0; c < 3; ++c) {
                        const float d = (key >= 0 ? pos.f32()[key * 3 + c] : 0.0f) - pos.f32()[q * 3 + c];
                        ASSERT_EQ(o[c], d) << b;
                        n += d * d;
                    }
                    ASSERT_FLOAT_EQ(o[3], 1.0f / (1.0f + n)) << b;
                    const bool v = key >= 0 && q < 10 && key < 10 && q / 3 == key / 3;
                    ASSERT_EQ(o[4], v ? 1.0f : 0.0f) << b << " window " << k << " query " << w << " key " << h;
                }
    });
}

TEST_P(OpBackend, ContactApc) {
    on_ref_and(tested(), [&](const std::string& b) {
        const int64_t H = 3, P = 12, L = 9;  // <cls>, 9 residues, <eos>, one pad
        Tensor probs = random_tensor({H, P, P}, 93, 0.5f, 0.2f), w = random_tensor({H}, 94);
        Tensor acc = random_tensor({L, L}, 95), want = acc.clone();
        ops::contact_apc(probs, w, acc);
        for (int64_t h = 0; h < H; ++h) {
            std::vector<double> row(static_cast<size_t>(L), 0.0);
            double total = 0;
            const auto sym = [&](int64_t i, int64_t j) {
                return double(probs.f32()[(h * P + i + 1) * P + j + 1]) + probs.f32()[(h * P + j + 1) * P + i + 1];
            };
            for (int64_t i = 0; i < L; ++i)
                for (int64_t j = 0; j < L; ++j) row[size_t(i)] += sym(i, j), total += sym(i, j);
            for (int64_t i = 0; i < L; ++i)
                for (int64_t j = 0; j < L; ++j)
                    want.f32()[i * L + j] += float(w.f32()[h] * (sym(i, j) - row[size_t(i)] * row[size_t(j)] / total));
        }
        compare(acc, want, 1e-6, 1e-6, b + " contact_apc");
    });
}

TEST_P(OpBackend, PairClassesAndBins) {
    on_ref_and(tested(), [&](const std::string& b) {
        const std::vector<int32_t> index{0, 1, 2, 40, 41, 600, 601};
        const int64_t L = int64_t(index.size()), bins = 32;
        Tensor cls = Tensor::empty({L, L}, DType::I32);
        ops::relpos_classes(Tensor::of(index), bins, cls);
        for (int64_t i = 0; i < L; ++i)
            for (int64_t j = 0; j < L; ++j)
                ASSERT_EQ(cls.i32()[i * L + j],
                          std::clamp<int64_t>(index[size_t(j)] - index[size_t(i)], -bins, bins) + bins + 1) << b;
        // virtual C-beta of an ideal backbone, then distance bins between residues 3.8 A apart
        Tensor atoms = Tensor::zeros({3, 4, 3});
        for (int64_t r = 0; r < 3; ++r) {
            const float x0 = 3.8f * float(r);
            const float n[3] = {x0 - 0.53f, 1.36f, 0}, ca[3] = {x0, 0, 0}, c[3] = {x0 + 1.52f, 0, 0};
            for (int k = 0; k < 3; ++k) {
                atoms.f32()[(r * 4 + 0) * 3 + k] = n[k];
                atoms.f32()[(r * 4 + 1) * 3 + k] = ca[k];
                atoms.f32()[(r * 4 + 2) * 3 + k] = c[k];
            }
        }
        Tensor cb = Tensor::empty({3, 3});
        ops::virtual_cb(atoms, cb);
        for (int64_t r = 0; r < 3; ++r) {  // C-beta 1.5 A or so from C-alpha, as real ones are
            const float* p = cb.f32() + r * 3;
            EXPECT_NEAR(std::sqrt((p[0] - 3.8f * float(r)) * (p[0] - 3.8f * float(r)) + p[1] * p[1] + p[2] * p[2]), 1.53, 0.05) << b;
        }
        Tensor bounds = Tensor::of(std::vector<float>{1.0f, 16.0f, 100.0f}), bins_t = Tensor::empty({3, 3}, DType::I32);
        ops::distance_bins(cb, bounds, bins_t);
        for (int64_t i = 0; i < 3; ++i)
            for (int64_t j = 0; j < 3; ++j) {
                float d2 = 0;
                for (int k = 0; k < 3; ++k) d2 += (cb.f32()[j * 3 + k] - cb.f32()[i * 3 + k]) * (cb.f32()[j * 3 + k] - cb.f32()[i * 3 + k]);
                ASSERT_EQ(bins_t.i32()[i * 3 + j], int(d2 > 1.0f) + int(d2 > 16.0f) + int(d2 > 100.0f)) << b;
            }
    });
}

TEST_P(OpBackend, FramesIpaAndAtoms) {
    const int64_t L = 7, H = 2, C = 5, Pq = 3, Pv = 4, Cz = 6;
    std::mt19937 rng(7);
    std::normal_distribution<float> nd;
    Tensor frames = Tensor::empty({L, 7}), upd = random_tensor({L, 6}, 96);
    for (int64_t i = 0; i < L; ++i) {
        geom::QuatRigid q;
        const float u[6] = {nd(rng), nd(rng), nd(rng), 2 * nd(rng), 2 * nd(rng), 2 * nd(rng)};
        const geom::QuatRigid r = q.compose_update(u);
        std::copy(r.q.begin(), r.q.end(), frames.f32() + i * 7);
        std::copy(r.trans.begin(), r.trans.end(), frames.f32() + i * 7 + 4);
    }
    Tensor q = random_tensor({L, H * C}, 97), kv = random_tensor({L, 2 * H * C}, 98),
           qp = random_tensor({L, 3 * H * Pq}, 99), kvp = random_tensor({L, 3 * H * (Pq + Pv)}, 100),
           bias = random_tensor({L * L, H}, 101), z = random_tensor({L, L, Cz}, 102),
           hw = random_tensor({H}, 103, 0.5f, 0.1f);
    Tensor ref_ipa;
    on_ref_and(tested(), [&](const std::string& b) {
        // the frame update: the quaternion rule, row by row
        Tensor f = frames.clone();
        ops::quat_update(f, upd);
        for (int64_t i = 0; i < L; ++i) {
            const float* r0 = frames.f32() + i * 7;
            const geom::QuatRigid want = geom::QuatRigid{{r0[0], r0[1], r0[2], r0[3]}, {r0[4], r0[5], r0[6]}}
                                           .compose_update(upd.f32() + i * 6);
            for (int k = 0; k < 4; ++k) ASSERT_EQ(f.f32()[i * 7 + k], want.q[size_t(k)]) << b;
            for (int k = 0; k < 3; ++k) ASSERT_EQ(f.f32()[i * 7 + 4 + k], want.trans[size_t(k)]) << b;
        }
        // IPA: the backend's fp32 kernel against the reference's double one
        Tensor out = Tensor::empty({L, H * (C + 4 * Pv + Cz)});
        ops::ipa({&q, &kv, &qp, &kvp, &bias, &z, &frames, &hw, H, Pq, Pv, 1e-8f}, out);
        if (b == "ref") ref_ipa = out;
        else compare(out, ref_ipa, 2e-5, 2e-5, b + " ipa");
        // atoms: with zero torsions (sin 0, cos 1) and the identity frame, the backbone N of every
        // residue type sits at its literature position
        const int R = 3;
        ops::ResidueTables t{random_tensor({R, 8, 4, 4}, 104), Tensor::of(std::vector<int32_t>(R * 14, 0), {R, 14}),
                             Tensor::of(std::vector<float>(R * 14, 1.0f), {R, 14}), random_tensor({R, 14, 3}, 105)};
        for (int r = 0; r < R; ++r) {  // group 0 (the backbone frame) is the identity
            float* m = t.default_frames.f32() + r * 8 * 16;
            for (int e = 0; e < 16; ++e) m[e] = (e % 5 == 0) ? 1.0f : 0.0f;
        }
        Tensor ident = Tensor::of(std::vector<float>{1, 0, 0, 0, 0, 0, 0}, {1, 7}), ang = Tensor::empty({1, 7, 2});
        ops::copy(Tensor::of(std::vector<float>{0, 1}).expand({1, 7, 2}), ang);
        for (int r = 0; r < R; ++r) {
            Tensor fo = Tensor::empty({1, 7}), pos = Tensor::empty({1, 14, 3});
            ops::atom_frames(ident, ang, Tensor::of(std::vector<int32_t>{r}), t, 10.0f, fo, pos);
            for (int a = 0; a < 14; ++a)
                for (int k = 0; k < 3; ++k)
                    ASSERT_NEAR(pos.f32()[a * 3 + k], t.lit_positions.f32()[(r * 14 + a) * 3 + k], 1e-6) << b;
        }
    });
}

// --- the model-specific entries left null: ops composes each from the core entries ---

namespace {

// Runs f under the full CPU table ("cpu") and then under its core-only copy; returns both results.
template <typename F>
std::pair<Tensor, Tensor> cpu_and_core(F f) {
    ops::set_backend("cpu");
    Tensor full = f();
    ops::set_backend(test::core_only_backend());
    Tensor core = f();
    ops::set_backend("cpu");
    return {full, core};
}

// A rigid frame (quaternion, translation) per residue: random unit rotations, translations of
// the given spread.
Tensor random_frames(int64_t L, uint32_t seed, float spread) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd;
    Tensor f = Tensor::empty({L, 7});
    for (int64_t i = 0; i < L; ++i) {
        const float u[6] = {nd(rng), nd(rng), nd(rng), spread * nd(rng), spread * nd(rng), spread * nd(rng)};
        const geom::QuatRigid r = geom::QuatRigid{}.compose_update(u);
        std::copy(r.q.begin(), r.q.end(), f.f32() + i * 7);
        std::copy(r.trans.begin(), r.trans.end(), f.f32() + i * 7 + 4);
    }
    return f;
}

}  // namespace

TEST(OpFallback, CoreOnlyTableLeavesTheModelSpecificEntriesNull) {
    const kernels::KernelTable& full = *backend::get("cpu").kernels;
    const kernels::KernelTable& core = *backend::get(test::core_only_backend()).kernels;
    const std::vector<std::tuple<const char*, bool, bool>> entries{
        {"ipa", full.ipa != nullptr, core.ipa != nullptr},
        {"atom_frames", full.atom_frames != nullptr, core.atom_frames != nullptr},
        {"quat_update", full.quat_update != nullptr, core.quat_update != nullptr},
        {"virtual_cb", full.virtual_cb != nullptr, core.virtual_cb != nullptr},
        {"l2_normalize", full.l2_normalize != nullptr, core.l2_normalize != nullptr},
        {"rms_norm", full.rms_norm != nullptr, core.rms_norm != nullptr},
        {"token_dropout", full.token_dropout != nullptr, core.token_dropout != nullptr},
        {"contact_apc", full.contact_apc != nullptr, core.contact_apc != nullptr},
        {"atom_pair_geometry", full.atom_pair_geometry != nullptr, core.atom_pair_geometry != nullptr}};
    for (const auto& [name, in_full, in_core] : entries) {
        EXPECT_TRUE(in_full) << name << ": the CPU table fills it";
        EXPECT_FALSE(in_core) << name << ": core_only leaves it null";
    }
    EXPECT_EQ(core.linear, full.linear);
    EXPECT_EQ(core.attention, full.attention);
    EXPECT_EQ(core.copy_strided, full.copy_strided);
    EXPECT_EQ(core.distance_bins, full.distance_bins);
}

TEST(OpFallback, NormsAndSequenceGlue) {
    Tensor x = random_tensor({37, 16}, 201), v = random_tensor({74, 2}, 202);
    auto [rms, rms_c] = cpu_and_core([&] {
        Tensor out = Tensor::empty({37, 16});
        ops::rms_norm(x, 1e-6f, out);
        return out;
    });
    compare(rms_c, rms, 1e-6, 1e-5, "rms_norm");
    auto [l2, l2_c] = cpu_and_core([&] {
        Tensor out = v.clone();  // in place, as the structure module's angles
        ops::l2_normalize(out, 1e-8f, out);
        return out;
    });
    compare(l2_c, l2, 1e-6, 1e-5, "l2_normalize");
    // token dropout: two sequences, one with two <mask> (id 32) of 6 tokens
    const std::vector<int64_t> cu{0, 6, 9};
    const std::vector<int32_t> tok{0, 32, 5, 32, 7, 2, 0, 9, 2};
    Tensor t = random_tensor({9, 4}, 203);
    auto [td, td_c] = cpu_and_core([&] {
        Tensor out = t.clone();
        ops::token_dropout(out, tok, cu, 32, 0.88f);
        return out;
    });
    compare(td_c, td, 0, 1e-6, "token_dropout");
    // contact APC over <cls>, 9 residues, <eos> and one pad
    const int64_t H = 3, P = 12, L = 9;
    Tensor probs = random_tensor({H, P, P}, 204, 0.5f, 0.2f), w = random_tensor({H}, 205),
           acc0 = random_tensor({L, L}, 206);
    auto [apc, apc_c] = cpu_and_core([&] {
        Tensor acc = acc0.clone();
        ops::contact_apc(probs, w, acc);
        return acc;
    });
    compare(apc_c, apc, 1e-5, 1e-5, "contact_apc");
}

TEST(OpFallback, GeometryOfAtomsAndPairs) {
    // virtual C-beta of random backbones
    Tensor atoms = random_tensor({11, 4, 3}, 207, 0.0f, 3.0f);
    auto [cb, cb_c] = cpu_and_core([&] {
        Tensor out = Tensor::empty({11, 3});
        ops::virtual_cb(atoms, out);
        return out;
    });
    compare(cb_c, cb, 1e-5, 1e-5, "virtual_cb");
    // windowed atom pairs: 3 windows of 4 queries, 8 key slots from 2 atoms before the window on,
    // atoms 10 and 11 padding, uids changing every 3 atoms
    const int64_t K = 3, W = 4, KH = 8, A = K * W;
    Tensor pos = random_tensor({A, 3}, 208, 0.0f, 3.0f), valid = Tensor::empty({A}), uid = Tensor::empty({A});
    std::vector<int32_t> keys(size_t(K * KH));
    for (int64_t a = 0; a < A; ++a) valid.f32()[a] = a < 10 ? 1.0f : 0.0f, uid.f32()[a] = float(a / 3);
    for (int64_t k = 0; k < K; ++k)
        for (int64_t h = 0; h < KH; ++h) {
            const int64_t atom = k * W - 2 + h;
            keys[size_t(k * KH + h)] = atom >= 0 && atom < A ? int32_t(atom) : -1;
        }
    const Tensor key_t = Tensor::of(keys, {K, KH});
    auto [apg, apg_c] = cpu_and_core([&] {
        Tensor out = Tensor::empty({K, W, KH, 5});
        ops::atom_pair_geometry(pos, valid, uid, key_t, out);
        return out;
    });
    compare(apg_c, apg, 1e-6, 1e-5, "atom_pair_geometry");
    for (int64_t i = 0; i < apg.numel() / 5; ++i)  // the pair mask exactly
        ASSERT_EQ(apg_c.f32()[i * 5 + 4], apg.f32()[i * 5 + 4]) << "pair " << i;
}

TEST(OpFallback, FramesIpaAndAtoms) {
    const int64_t L = 13, H = 3, C = 5, Pq = 3, Pv = 4, Cz = 6;
    const Tensor frames = random_frames(L, 209, 2.0f), upd = random_tensor({L, 6}, 210, 0.0f, 0.3f);
    auto [fr, fr_c] = cpu_and_core([&] {
        Tensor f = frames.clone();
        ops::quat_update(f, upd);
        return f;
    });
    compare(fr_c, fr, 1e-6, 1e-5, "quat_update");
    Tensor q = random_tensor({L, H * C}, 211), kv = random_tensor({L, 2 * H * C}, 212),
           qp = random_tensor({L, 3 * H * Pq}, 213), kvp = random_tensor({L, 3 * H * (Pq + Pv)}, 214),
           bias = random_tensor({L * L, H}, 215), z = random_tensor({L, L, Cz}, 216),
           hw = random_tensor({H}, 217, 0.5f, 0.1f);
    auto [ipa, ipa_c] = cpu_and_core([&] {
        Tensor out = Tensor::empty({L, H * (C + 4 * Pv + Cz)});
        ops::ipa({&q, &kv, &qp, &kvp, &bias, &z, &frames, &hw, H, Pq, Pv, 1e-8f}, out);
        return out;
    });
    compare(ipa_c, ipa, 2e-5, 2e-5, "ipa");
    // atoms from frames and torsions: random rigid default frames whose fourth rows hold noise (the
    // kernels read the top three), random groups, masks and residue types
    const int R = 5;
    std::mt19937 rng(218);
    std::normal_distribution<float> nd;
    ops::ResidueTables t{Tensor::empty({R, 8, 4, 4}), Tensor::empty({R, 14}, DType::I32),
                         Tensor::empty({R, 14}), random_tensor({R, 14, 3}, 219, 0.0f, 1.5f)};
    const Tensor dframes = random_frames(R * 8, 220, 1.5f);
    for (int64_t g = 0; g < R * 8; ++g) {
        const float* f = dframes.f32() + g * 7;
        const geom::Rigid r = geom::QuatRigid{{f[0], f[1], f[2], f[3]}, {f[4], f[5], f[6]}}.rigid();
        float* m = t.default_frames.f32() + g * 16;
        for (int i = 0; i < 3; ++i) {
            for (int j = 0; j < 3; ++j) m[i * 4 + j] = r.rot[size_t(i * 3 + j)];
            m[i * 4 + 3] = r.trans[size_t(i)];
        }
        for (int j = 0; j < 4; ++j) m[12 + j] = nd(rng);
    }
    for (int64_t i = 0; i < R * 14; ++i) {
        t.group_of_atom.i32()[i] = int32_t(rng() % 8);
        t.atom_mask.f32()[i] = rng() % 4 ? 1.0f : 0.0f;
    }
    std::vector<int32_t> types(static_cast<size_t>(L));
    for (int32_t& a : types) a = int32_t(rng() % R);
    Tensor raw = random_tensor({L * 7, 2}, 221), ang = Tensor::empty({L, 7, 2});
    ops::l2_normalize(raw, 1e-8f, ang);
    const Tensor aatype = Tensor::of(types);
    Tensor fo_full, fo_core;
    auto [pos, pos_c] = cpu_and_core([&] {
        Tensor fo = Tensor::empty({L, 7}), p = Tensor::empty({L, 14, 3});
        ops::atom_frames(frames, ang, aatype, t, 10.0f, fo, p);
        (fo_full.defined() ? fo_core : fo_full) = fo;
        return p;
    });
    compare(fo_core, fo_full, 0, 0, "atom_frames frames");  // the quaternion and 10 x t, exactly
    compare(pos_c, pos, 1e-4, 1e-5, "atom_frames positions");
}
