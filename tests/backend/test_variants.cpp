// Every kernel variant the tuned table can select, forced one at a time, against the reference
// kernels: attention tilings and the materialised form (with causal masks and grouped-query heads),
// the softmax and layer-norm algorithms, serial and parallel elementwise ops, the own GEMM
// provider's blockings and the separate activation after a GEMM.
#include <gtest/gtest.h>

#include <string>

#include "backend/tuning/tuned_table.h"
#include "bioinfer/error.h"
#include "ops/ops.h"
#include "test_util.h"

using namespace bioinfer;
using bioinfer::test::compare;
using bioinfer::test::random_tensor;

namespace {

tuning::Choice variant(const char* name, std::map<std::string, int64_t> params = {}) {
    return tuning::Choice{name, std::move(params)};
}

}  // namespace

TEST(Variants, AttentionTilingsCausalAndGroupedHeads) {
    const int64_t B = 2, L = 203, Dh = 24;
    const std::vector<tuning::Choice> variants{
        variant("tiled", {{"q_block", 32}, {"k_block", 64}}),
        variant("tiled", {{"q_block", 64}, {"k_block", 128}}),
        variant("tiled", {{"q_block", 128}, {"k_block", 256}}),
        variant("tiled", {{"q_block", 7}, {"k_block", 40}}),  // odd sizes: k_block rounds to vectors
        variant("materialised")};
    for (auto [H, Hkv] : {std::pair<int64_t, int64_t>{4, 4}, {4, 2}, {6, 1}})
        for (int mode = 0; mode < 3; ++mode) {  // plain, causal, pair-biased (shared by the batch)
            const bool causal = mode == 1;
            Tensor bias = random_tensor({H, L, L}, 54, 0.0f, 2.0f);
            Tensor q = random_tensor({B, L, H * Dh}, 51, 0.0f, 2.0f),
                   k = random_tensor({B, L, Hkv * Dh}, 52), v = random_tensor({B, L, Hkv * Dh}, 53);
            std::vector<uint8_t> valid(size_t(B * L), 1);
            for (int64_t t = 150; t < L; ++t) valid[size_t(L + t)] = 0;  // sequence 1 padded
            valid[size_t(L + 0)] = 0;  // and its first key masked: causal row 0 sees nothing
            const ops::AttentionOpts opts{
                .kv_heads = Hkv, .causal = causal, .bias = mode == 2 ? &bias : nullptr};
            Tensor ref = Tensor::empty({B, L, H * Dh});
            ops::set_backend("ref");
            ops::attention(q, k, v, H, 0.25f, valid, ref, nullptr, opts);
            ops::set_backend("cpu");
            for (const auto& c : variants) {
                tuning::Force f("attention", c);
                Tensor got = Tensor::empty({B, L, H * Dh});
                ops::attention(q, k, v, H, 0.25f, valid, got, nullptr, opts);
                compare(got, ref, 2e-5, 2e-5,
                        "attention " + c.variant + " q" + std::to_string(c.param("q_block", 0)) +
                            " k" + std::to_string(c.param("k_block", 0)) + " H" +
                            std::to_string(H) + "/" + std::to_string(Hkv) +
                            (causal ? " causal" : "") + (mode == 2 ? " biased" : ""));
            }
            // Probabilities under a causal mask: the upper triangle is exactly zero.
            Tensor p = Tensor::empty({B, H, L, L}), o = Tensor::empty({B, L, H * Dh});
            ops::attention(q, k, v, H, 0.25f, valid, o, &p, opts);
            compare(o, ref, 2e-5, 2e-5, "attention with probs");
            if (causal) {
                for (int64_t i = 0; i < L; ++i)
                    for (int64_t j = i + 1; j < L; ++j) ASSERT_EQ(p.f32()[i * L + j], 0.0f);
            }
        }
}

TEST(Variants, SoftmaxThreePassAndOnline) {
    for (int64_t cols : {1, 15, 16, 17, 100, 1024}) {
        Tensor x = random_tensor({5, cols}, 61, 0.0f, 4.0f);
        std::vector<uint8_t> keep(size_t(cols), 1);
        for (int64_t c = 0; c < cols; c += 3) keep[size_t(c)] = 0;
        Tensor add = random_tensor({cols}, 62);
        Tensor ref = x.clone();
        ops::set_backend("ref");
        ops::softmax(ref, &add, keep.data());
        ops::set_backend("cpu");
        for (const char* v : {"three_pass", "online"}) {
            tuning::Force f("softmax", variant(v));
            Tensor got = x.clone();
            ops::softmax(got, &add, keep.data());
            compare(got, ref, 1e-6, 1e-5, std::string("softmax ") + v + " cols " + std::to_string(cols));
        }
    }
}

TEST(Variants, LayerNormAlgorithmsAndThreading) {
    for (int64_t d : {7, 64, 320, 1153}) {
        Tensor x = random_tensor({37, d}, 71, 0.5f, 2.0f), g = random_tensor({d}, 72),
               b = random_tensor({d}, 73);
        Tensor ref = Tensor::empty({37, d});
        ops::set_backend("ref");
        ops::layer_norm(x, g, b, 1e-5f, ref);
        ops::set_backend("cpu");
        for (const char* v : {"two_pass", "one_pass"})
            for (int64_t par : {0, 1}) {
                tuning::Force f("layer_norm", variant(v, {{"parallel", par}}));
                Tensor got = Tensor::empty({37, d});
                ops::layer_norm(x, g, b, 1e-5f, got);
                compare(got, ref, 1e-4, 1e-4, std::string("layer_norm ") + v);
            }
    }
}

TEST(Variants, ElementwiseSerialAndParallel) {
    for (int64_t n : {1, 17, 4096, 4097, 20000}) {
        Tensor x = random_tensor({n}, 81, 0.0f, 3.0f), u = random_tensor({n}, 82);
        Tensor r_gelu = Tensor::empty({n}), r_tanh = Tensor::empty({n}), r_swi = Tensor::empty({n});
        ops::set_backend("ref");
        ops::gelu(x, r_gelu);
        ops::gelu_tanh(x, r_tanh);
        ops::swiglu(x, u, r_swi);
        ops::set_backend("cpu");
        for (int64_t par : {0, 1}) {
            const auto c = variant("simd", {{"parallel", par}});
            Tensor got = Tensor::empty({n});
            {
                tuning::Force f("gelu", c);
                ops::gelu(x, got);
                compare(got, r_gelu, 1e-6, 1e-5, "gelu");
            }
            {
                tuning::Force f("gelu_tanh", c);
                ops::gelu_tanh(x, got);
                compare(got, r_tanh, 1e-6, 1e-5, "gelu_tanh");
            }
            {
                tuning::Force f("swiglu", c);
                ops::swiglu(x, u, got);
                compare(got, r_swi, 1e-6, 1e-5, "swiglu");
            }
        }
    }
}

TEST(Variants, RotarySerialAndParallel) {
    const int64_t L = 77, H = 3, Dh = 40;
    Tensor x = random_tensor({1, L, H, Dh}, 91), inv = random_tensor({Dh / 2}, 92, 0.1f, 0.01f);
    Tensor cos = Tensor::empty({L, Dh / 2}), sin = Tensor::empty({L, Dh / 2});
    ops::rotary_tables(inv, L, cos, sin);
    Tensor ref = x.clone();
    ops::set_backend("ref");
    ops::rotary(ref, cos, sin);
    ops::set_backend("cpu");
    for (int64_t par : {0, 1}) {
        tuning::Force f("rotary", variant("simd", {{"parallel", par}}));
        Tensor got = x.clone();
        ops::rotary(got, cos, sin);
        compare(got, ref, 1e-6, 1e-6, "rotary");
        Tensor got2 = x.clone().reshape({L, H, Dh});  // one packed sequence
        ops::rotary_varlen(got2, {0, L}, cos, sin);
        compare(got2, ref, 1e-6, 1e-6, "rotary_varlen");
    }
}

// The own GEMM provider (weights transposed at pack time) with blockings that do and do not
// divide the shape, every epilogue; bf16 storage computed in fp32 (widened panel by panel, also
// where the table names the own GEMM); the separate-activation form of a oneDNN GEMM.
TEST(Variants, LinearProvidersAndActivation) {
    // N = 600: two whole 256-row panels of a bf16 weight and a partial one.
    const int64_t M = 53, K = 300, N = 600;
    Tensor x = random_tensor({M, K}, 101), w = random_tensor({N, K}, 102, 0.0f, 0.1f),
           b = random_tensor({N}, 103), res = random_tensor({M, N}, 104);
    Tensor wb = Tensor::empty({N, K}, DType::BF16);
    for (int64_t i = 0; i < w.numel(); ++i)
        static_cast<uint16_t*>(wb.raw())[i] = f32_to_bf16(w.f32()[i]);
    Tensor w_rounded = Tensor::empty({N, K});  // the bf16-stored weights as fp32
    for (int64_t i = 0; i < w.numel(); ++i)
        w_rounded.f32()[i] = bf16_to_f32(static_cast<const uint16_t*>(wb.raw())[i]);
    struct Mode {
        Act act;
        float scale;
        bool accumulate;
    };
    for (const Mode& md : {Mode{Act::None, 1.0f, false}, Mode{Act::Gelu, 1.0f, false},
                           Mode{Act::GeluTanh, 0.5f, false}, Mode{Act::None, 0.7f, true}}) {
        const ops::Epilogue ep{.act = md.act, .scale = md.scale, .accumulate = md.accumulate};
        for (const Tensor* wsrc : {&w, &wb}) {
            const Tensor& wf = wsrc == &w ? w : w_rounded;
            const std::string stored = wsrc == &w ? "fp32" : "bf16";
            Tensor ref = res.clone();
            ops::set_backend("ref");
            ops::linear(x, wf, &b, ref, ep);
            ops::set_backend("cpu");
            {
                auto packed = ops::pack_linear_weight(*wsrc, DType::F32);  // the table's choice
                ASSERT_NE(packed, nullptr);
                Tensor got = res.clone();
                ops::linear(x, wf, &b, got, ep, packed.get());
                compare(got, ref, 1e-4, 1e-4, stored + " storage, default provider");
            }
            for (auto blk : {std::map<std::string, int64_t>{{"m_block", 96}, {"n_block", 256}, {"k_block", 256}},
                             {{"m_block", 10}, {"n_block", 33}, {"k_block", 70}}}) {
                std::shared_ptr<const ops::PackedWeight> packed;
                {
                    tuning::Force f("matmul", variant("own_packed", blk));
                    packed = ops::pack_linear_weight(*wsrc, DType::F32);
                }
                ASSERT_NE(packed, nullptr);
                Tensor got = res.clone();
                ops::linear(x, wf, &b, got, ep, packed.get());  // the forced choice lives in the pack
                compare(got, ref, 1e-4, 1e-4,
                        stored + " storage, own_packed m_block " + std::to_string(blk["m_block"]));
            }
            if (md.act != Act::None) {
                auto packed = ops::pack_linear_weight(*wsrc, DType::F32);
                tuning::Force f("matmul_act", variant("separate"));
                Tensor got = res.clone();
                ops::linear(x, wf, &b, got, ep, packed.get());
                compare(got, ref, 1e-4, 1e-4, "separate activation");
                Tensor got2 = res.clone();
                ops::linear(x, wf, &b, got2, ep);  // unpacked weights
                compare(got2, ref, 1e-4, 1e-4, "separate activation, unpacked");
            }
        }
    }
}

TEST(TunedTable, NearestEntryExactFlagsAndFallback) {
    const tuning::Table t = tuning::parse_table(R"({"entries": [
        {"kernels": "cpu-avx512", "op": "attention", "dtype": "fp32",
         "shape": {"seq": 128, "head_dim": 64, "causal": 0}, "variant": "tiled",
         "params": {"q_block": 32, "k_block": 64}},
        {"kernels": "cpu-avx512", "op": "attention", "dtype": "fp32",
         "shape": {"seq": 1024, "head_dim": 64, "causal": 0}, "variant": "materialised"},
        {"kernels": "cpu-avx512", "op": "attention", "dtype": "fp32",
         "shape": {"seq": 1024, "head_dim": 64, "causal": 1}, "variant": "tiled",
         "params": {"q_block": 128, "k_block": 256}},
        {"kernels": "cpu-avx2", "op": "attention", "dtype": "fp32",
         "shape": {"seq": 128, "head_dim": 64, "causal": 0}, "variant": "materialised"}]})",
                                                "test table");
    const auto at = [&](const char* kernels, int64_t seq, int64_t causal) {
        return tuning::lookup_in(t, kernels, "attention", "fp32",
                                 {{"seq", seq}, {"head_dim", 64}, {"causal", causal}});
    };
    EXPECT_EQ(at("cpu-avx512", 200, 0).variant, "tiled");  // nearer 128 than 1024 on a log scale
    EXPECT_EQ(at("cpu-avx512", 200, 0).param("q_block", 0), 32);
    EXPECT_EQ(at("cpu-avx512", 700, 0).variant, "materialised");
    EXPECT_EQ(at("cpu-avx512", 100, 1).param("k_block", 0), 256);  // the only causal entry
    EXPECT_EQ(at("cpu-avx2", 1000, 0).variant, "materialised");    // other ISA, other entries
    EXPECT_TRUE(at("ref", 128, 0).variant.empty());                // none: the kernel's default
    EXPECT_TRUE(tuning::lookup_in(t, "cpu-avx512", "softmax", "fp32", {{"rows", 4}}).variant.empty());
    EXPECT_TRUE(tuning::lookup_in(t, "cpu-avx512", "attention", "bf16", {{"seq", 128}}).variant.empty());
    EXPECT_EQ(at("cpu-avx512", 200, 0).param("missing", 7), 7);
}

// A weight's GEMM provider comes from an entry for exactly its (k, n): one timed for another
// weight shape does not carry over, while matmul_act's token count still matches the nearest.
TEST(TunedTable, MatmulWeightShapeMustMatchExactly) {
    const tuning::Table t = tuning::parse_table(R"({"entries": [
        {"kernels": "cpu-avx512", "op": "matmul", "dtype": "fp32", "shape": {"k": 640, "n": 640},
         "variant": "own_packed", "params": {"m_block": 48, "n_block": 512, "k_block": 128}},
        {"kernels": "cpu-avx512", "op": "matmul_act", "dtype": "fp32",
         "shape": {"m": 2048, "k": 640, "n": 640, "act": 1}, "variant": "separate"}]})",
                                                "test table");
    const auto mm = [&](int64_t k, int64_t n) {
        return tuning::lookup_in(t, "cpu-avx512", "matmul", "fp32", {{"k", k}, {"n", n}}).variant;
    };
    EXPECT_EQ(mm(640, 640), "own_packed");
    EXPECT_TRUE(mm(768, 768).empty());  // the nearest entry on a log scale, but not this weight
    EXPECT_TRUE(mm(640, 768).empty());
    EXPECT_EQ(tuning::lookup_in(t, "cpu-avx512", "matmul_act", "fp32",
                                {{"m", 128}, {"k", 768}, {"n", 768}, {"act", 1}})
                  .variant,
              "separate");
    EXPECT_TRUE(tuning::is_exact_dim("matmul", "k") && tuning::is_exact_dim("attention", "causal"));
    EXPECT_FALSE(tuning::is_exact_dim("matmul_act", "k") || tuning::is_exact_dim("gelu", "n"));
}

TEST(TunedTable, BadTablesNameTheEntry) {
    const auto err = [](const std::string& text) {
        try {
            tuning::parse_table(text, "t.json");
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(err("{").find("[t.json] not valid JSON"), std::string::npos);
    EXPECT_NE(err("{\"entries\": 3}").find("'entries' array"), std::string::npos);
    EXPECT_NE(err(R"({"entries": [{"kernels": "k", "op": "o", "dtype": "fp32"}]})").find("entry 0"),
              std::string::npos);
    EXPECT_NE(err(R"({"entries": [{"kernels": "k", "op": "o", "dtype": "fp32", "variant": "v",
                       "params": {"q_block": "big"}}]})")
                  .find("'q_block' must be an integer"),
              std::string::npos);
    // The built-in table parses (it is compiled in; a broken one would fail every lookup).
    EXPECT_NO_THROW(tuning::load_active_table());
}

TEST(TunedTable, ForcedChoicesNestAndUnwind) {
    const auto q_block = [] {
        return tuning::lookup("cpu-avx512", "attention", "fp32", {{"seq", 64}}).param("q_block", -1);
    };
    const int64_t before = q_block();
    {
        tuning::Force a("attention", {"tiled", {{"q_block", 16}}});
        EXPECT_EQ(q_block(), 16);
        {
            tuning::Force b("attention", {"tiled", {{"q_block", 8}}});
            tuning::Force other("softmax", {"online", {}});
            EXPECT_EQ(q_block(), 8);
        }
        EXPECT_EQ(q_block(), 16);
    }
    EXPECT_EQ(q_block(), before);
}
