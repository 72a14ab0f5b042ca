// Op tests: every optimized CPU kernel against its plain fp32 reference, over odd and even sizes,
// masks and strides (the same binary runs whichever ISA the dispatcher picks).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "bioinfer/error.h"
#include "ops/kernels.h"
#include "ops/ops.h"
#include "test_util.h"

using namespace bioinfer;
using bioinfer::test::compare;
using bioinfer::test::random_tensor;

namespace {

// Runs f under the reference and then the optimized backend on copies of the same inputs.
template <typename F>
void both(F f) {
    ops::set_backend(ops::Backend::Ref);
    f(true);
    ops::set_backend(ops::Backend::Cpu);
    f(false);
}

class OpSizes : public ::testing::TestWithParam<int> {};

}  // namespace

TEST(Ops, KernelTableIsOptimized) {
    // On an x86-64 machine with AVX2 the dispatcher must not fall back to the reference.
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        EXPECT_NE(std::string(kernels::cpu_kernels().name), "ref");
    }
}

TEST_P(OpSizes, Linear) {
    const int64_t n = GetParam();
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
            ops::set_backend(ops::Backend::Cpu);
            auto packed = ops::pack_linear_weight(w);
            Tensor out = mode == 2 ? res.clone() : Tensor::empty({M, n});
            ops::linear(x, w, mode == 1 ? nullptr : &b, out,
                        {.act = acts[mode], .accumulate = mode == 2}, packed.get());
            compare(out, ref, 1e-5, 1e-5, "linear (packed)");
        }
    }
}

// bf16 GEMM (AMX / AVX-512-BF16 where present, fp32 accumulation): x and w rounded to bf16, so
// the bar is the fast path's (PCC >= 0.999), not fp32's. Weights are packed straight from bf16
// storage or from fp32.
TEST(Ops, LinearBf16Packed) {
    for (int64_t n : {7, 64, 100}) {
        const int64_t M = 2 * n + 3, K = 3 * n + 5;
        Tensor x = random_tensor({M, K}, 41), w = random_tensor({n, K}, 42), b = random_tensor({n}, 43);
        Tensor ref = Tensor::empty({M, n});
        ops::set_backend(ops::Backend::Ref);
        ops::linear(x, w, &b, ref, {.act = Act::Gelu});
        ops::set_backend(ops::Backend::Cpu);
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

TEST(Ops, PackedWeightIsIgnoredUnderAnotherBackend) {
    Tensor x = random_tensor({5, 9}, 1), w = random_tensor({4, 9}, 2);
    ops::set_backend(ops::Backend::Cpu);
    auto packed = ops::pack_linear_weight(w);
    Tensor got = Tensor::empty({5, 4}), ref = Tensor::empty({5, 4});
    ops::set_backend(ops::Backend::Ref);
    ops::linear(x, w, nullptr, ref);
    ops::linear(x, w, nullptr, got, {}, packed.get());
    ops::set_backend(ops::Backend::Cpu);
    compare(got, ref, 0, 0, "linear (packed for cpu, run on ref)");
}

TEST_P(OpSizes, LayerNorm) {
    const int64_t d = GetParam();
    Tensor x = random_tensor({7, d}, 5, 3.0f, 1.5f), g = random_tensor({d}, 6), b = random_tensor({d}, 7);
    Tensor ref = Tensor::empty({7, d}), got = Tensor::empty({7, d});
    ops::set_backend(ops::Backend::Ref);
    ops::layer_norm(x, g, b, 1e-5f, ref);
    ops::set_backend(ops::Backend::Cpu);
    ops::layer_norm(x, g, b, 1e-5f, got);
    compare(got, ref, 2e-6, 1e-6, "layer_norm");
}

TEST_P(OpSizes, Gelu) {
    const int64_t n = GetParam() * 7;
    Tensor x = random_tensor({n}, 8, 0.0f, 4.0f);
    Tensor ref = Tensor::empty({n}), got = Tensor::empty({n});
    ops::set_backend(ops::Backend::Ref);
    ops::gelu(x, ref);
    ops::set_backend(ops::Backend::Cpu);
    ops::gelu(x, got);
    compare(got, ref, 1e-6, 2e-6, "gelu");
}

TEST_P(OpSizes, SoftmaxWithMasks) {
    const int64_t c = GetParam();
    std::vector<uint8_t> keep(size_t(c), 1);
    for (int64_t i = 0; i < c; i += 3) keep[size_t(i)] = 0;
    keep[size_t(c - 1)] = 1;
    Tensor add = random_tensor({c}, 9);
    for (int variant = 0; variant < 3; ++variant) {
        Tensor x = random_tensor({5, c}, 10, 0.0f, 5.0f);
        Tensor ref = x.clone(), got = x.clone();
        const Tensor* a = variant == 1 ? &add : nullptr;
        const uint8_t* k = variant == 2 ? keep.data() : nullptr;
        ops::set_backend(ops::Backend::Ref);
        ops::softmax(ref, a, k);
        ops::set_backend(ops::Backend::Cpu);
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
    const int64_t dh = 2 * GetParam();
    const int64_t B = 2, L = 9, H = 3;
    Tensor inv = Tensor::empty({dh / 2});
    for (int64_t i = 0; i < dh / 2; ++i) inv.f32()[i] = 1.0f / std::pow(10000.0f, float(2 * i) / float(dh));
    Tensor cos, sin;
    ops::rotary_tables(inv, L, cos, sin);
    Tensor x = random_tensor({B, L, H, dh}, 11);
    Tensor ref = x.clone(), got = x.clone();
    ops::set_backend(ops::Backend::Ref);
    ops::rotary(ref, cos, sin);
    ops::set_backend(ops::Backend::Cpu);
    ops::rotary(got, cos, sin);
    compare(got, ref, 1e-6, 1e-6, "rotary");
    // Position 0 is the identity rotation.
    for (int64_t i = 0; i < H * dh; ++i) EXPECT_FLOAT_EQ(got.f32()[i], x.f32()[i]);
}

TEST_P(OpSizes, AttentionWithKeyPadding) {
    const int64_t L = GetParam(), H = 2, Dh = 12, B = 3;
    Tensor q = random_tensor({B, L, H * Dh}, 12), k = random_tensor({B, L, H * Dh}, 13),
           v = random_tensor({B, L, H * Dh}, 14);
    std::vector<uint8_t> valid(size_t(B * L), 1);
    for (int64_t t = L / 2 + 1; t < L; ++t) valid[size_t(1 * L + t)] = 0;  // batch 1 padded
    Tensor ref_o = Tensor::empty({B, L, H * Dh}), got_o = Tensor::empty({B, L, H * Dh});
    Tensor ref_p = Tensor::empty({B, H, L, L}), got_p = Tensor::empty({B, H, L, L});
    ops::set_backend(ops::Backend::Ref);
    ops::attention(q, k, v, H, 0.3f, valid, ref_o, &ref_p);
    ops::set_backend(ops::Backend::Cpu);
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
    const int64_t L = GetParam(), H = 3, Dh = 8, B = 2;
    Tensor q = random_tensor({B, L, H * Dh}, 51), k = random_tensor({B, L, H * Dh}, 52),
           v = random_tensor({B, L, H * Dh}, 53);
    std::vector<uint8_t> valid(size_t(B * L), 1);
    for (int64_t t = L / 2 + 1; t < L; ++t) valid[size_t(L + t)] = 0;
    for (bool shared : {true, false}) {
        Tensor bias = shared ? random_tensor({H, L, L}, 54, 0.0f, 2.0f)
                             : random_tensor({B, H, L, L}, 55, 0.0f, 2.0f);
        const ops::AttentionOpts opts{.bias = &bias};
        Tensor ref_o = Tensor::empty({B, L, H * Dh}), ref_p = Tensor::empty({B, H, L, L});
        ops::set_backend(ops::Backend::Ref);
        ops::attention(q, k, v, H, 0.35f, valid, ref_o, &ref_p, opts);
        ops::set_backend(ops::Backend::Cpu);
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
TEST(Ops, AttentionTiledLongAndHoles) {
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
            ops::set_backend(ops::Backend::Ref);
            ops::attention(q, k, v, H, 0.2f, valid, ref_o, &ref_p);
            ops::set_backend(ops::Backend::Cpu);
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
TEST(Ops, AttentionAndRotaryVarlenEqualEachSequenceAlone) {
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
        for (auto backend : {ops::Backend::Ref, ops::Backend::Cpu}) {
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
    ops::set_backend(ops::Backend::Cpu);
    Tensor q = random_tensor({10, 8}, 1), out = Tensor::empty({10, 8});
    EXPECT_THROW(ops::attention_varlen(q, q, q, 2, 1.0f, {0, 4, 9}, out, nullptr), Error);
    EXPECT_THROW(ops::attention_varlen(q, q, q, 2, 1.0f, {0, 4, 4, 10}, out, nullptr), Error);
}

TEST_P(OpSizes, GemmStrided) {
    const int64_t n = GetParam();
    const int64_t M = n + 1, N = n + 2, K = n, lda = K + 3, ldb = N + 5, ldc = N + 1;
    Tensor a = random_tensor({M, lda}, 15), b = random_tensor({K, ldb}, 16);
    Tensor ref = Tensor::zeros({M, ldc}), got = Tensor::zeros({M, ldc});
    kernels::ref_kernels().gemm_nn(a.f32(), lda, b.f32(), ldb, ref.f32(), ldc, M, N, K);
    kernels::cpu_kernels().gemm_nn(a.f32(), lda, b.f32(), ldb, got.f32(), ldc, M, N, K);
    compare(got, ref, 1e-5, 1e-5, "gemm_nn");
}

TEST_P(OpSizes, AddScale) {
    const int64_t n = GetParam() * 3 + 1;
    Tensor a = random_tensor({n}, 17), b = random_tensor({n}, 18);
    Tensor r1 = Tensor::empty({n}), g1 = Tensor::empty({n});
    ops::set_backend(ops::Backend::Ref);
    ops::add(a, b, r1);
    ops::set_backend(ops::Backend::Cpu);
    ops::add(a, b, g1);
    compare(g1, r1, 0, 0, "add");
    ops::scale(a, -0.7f, g1);
    for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(g1.f32()[i], a.f32()[i] * -0.7f);
}

TEST_P(OpSizes, MulAndBatchedMatmul) {
    const int64_t n = GetParam();
    Tensor a = random_tensor({3 * n + 1}, 61), b = random_tensor({3 * n + 1}, 62);
    Tensor r1 = Tensor::empty({3 * n + 1}), g1 = Tensor::empty({3 * n + 1});
    ops::set_backend(ops::Backend::Ref);
    ops::mul(a, b, r1);
    ops::set_backend(ops::Backend::Cpu);
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

INSTANTIATE_TEST_SUITE_P(OddEven, OpSizes, ::testing::Values(1, 7, 8, 16, 33, 64, 100));

TEST(Ops, EmbeddingGatherAndBadId) {
    Tensor table = random_tensor({5, 4}, 19);
    Tensor out = Tensor::empty({3, 4});
    ops::embedding({4, 0, 4}, table, out);
    for (int c = 0; c < 4; ++c) {
        EXPECT_EQ(out.f32()[c], table.f32()[16 + c]);
        EXPECT_EQ(out.f32()[4 + c], table.f32()[c]);
    }
    EXPECT_THROW(ops::embedding({5, 0, 1}, table, out), Error);
}

TEST(Ops, ShapeErrorsNameTheOperand) {
    Tensor x = random_tensor({3, 4}, 20), w = random_tensor({5, 6}, 21), out = Tensor::empty({3, 5});
    try {
        ops::linear(x, w, nullptr, out);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("[linear] x: expected last dim 6"), std::string::npos)
            << e.what();
    }
}
