// Direct parity of the shared transformer blocks (src/nn/transformer): the pre-LN blocks, final
// LayerNorm and masked-LM head of the ESM-2 and ESM C fixtures
// (tools/reference/make_esm2_fixtures.py, make_esmc_fixtures.py), loaded with the blocks' own
// loaders and run on the reference's own hidden states. Every case of a fixture goes through one
// packed batch, so each sequence's attention and rotary positions are its own. The model-level
// settings the blocks leave to their model (heads, scales, rotary frequencies) are set here from
// config.json as upstream defines them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/model_dir.h"
#include "models/esmc.h"
#include "nn/transformer.h"
#include "ops/ops.h"
#include "test_util.h"

using namespace bioinfer;

namespace {

// The worst agreement over one test's comparisons, printed when the test ends.
struct Worst {
    std::string what;
    test::Stats s{1, 0, 0};
    ~Worst() {
        std::printf("[ parity   ] %s: worst PCC %.9f, rel L2 %.2e, max-abs %.2e\n", what.c_str(),
                    s.pcc, s.rel_l2, s.max_abs);
    }
};

// The language-model bar (docs/parity.md): fp32 PCC >= 0.99999, relative L2 <= 1e-5,
// max-abs <= 2e-5.
void expect_parity(const Tensor& got, const Tensor& ref, const std::string& what, Worst& worst) {
    ASSERT_EQ(shape_str(got.shape()), shape_str(ref.shape())) << what;
    const test::Stats s = test::stats(got.f32(), ref.f32(), got.numel());
    worst.s.pcc = std::min(worst.s.pcc, s.pcc);
    worst.s.rel_l2 = std::max(worst.s.rel_l2, s.rel_l2);
    worst.s.max_abs = std::max(worst.s.max_abs, s.max_abs);
    EXPECT_GE(s.pcc, 0.99999) << what << " (rel L2 " << s.rel_l2 << ", max-abs " << s.max_abs
                              << ")";
    EXPECT_LE(s.rel_l2, 1e-5) << what << " (PCC " << s.pcc << ")";
    EXPECT_LE(s.max_abs, 2e-5) << what;
}

// One fixture's encoder, block by block, as transformers' EsmForMaskedLM (model_type "esm") or
// EsmcForMaskedLM ("esmc") defines it.
struct Encoder {
    test::ParityFixture fixture;
    io::ModelDir dir;
    int64_t layers = 0, vocab = 0;
    std::vector<nn::PreLnBlock> blocks;
    nn::LayerNorm final_ln;
    nn::Rotary rotary;
    nn::MaskedLmHead head;
};

Encoder load_encoder(const std::string& name) {
    Encoder e;
    e.fixture = test::load_parity_fixture(name);
    e.dir = io::ModelDir::open(e.fixture.dir);
    const nlohmann::json& c = e.dir.config();
    const std::string type = c.at("model_type");
    const int64_t D = c.at("hidden_size"), F = c.at("intermediate_size"),
                  H = c.at("num_attention_heads"), Dh = D / H;
    e.layers = c.at("num_hidden_layers");
    e.vocab = c.at("vocab_size");
    EXPECT_EQ(e.layers, int64_t(e.fixture.meta.at("num_layers"))) << name;
    // ESM C's configs carry no eps: every LayerNorm there is torch's default, 1e-5.
    const float eps = float(c.value("layer_norm_eps", 1e-5));
    double theta = c.value("rope_theta", 10000.0);
    if (c.contains("rope_parameters")) theta = c.at("rope_parameters").value("rope_theta", theta);
    // 1 / theta^(2i / Dh), as both upstreams compute their rotary frequencies
    Tensor inv_freq = Tensor::empty({Dh / 2});
    for (int64_t i = 0; i < Dh / 2; ++i)
        inv_freq.f32()[i] = 1.0f / std::pow(float(theta), float(2 * i) / float(Dh));
    if (type == "esm") {
        const std::string p = "esm.";
        for (int64_t l = 0; l < e.layers; ++l) {
            nn::PreLnBlock b =
                nn::PreLnBlock::load(e.dir, p + "encoder.layer." + std::to_string(l) + ".",
                                     nn::PreLnBlockNames{}, D, F, eps);
            b.attn.heads = H;
            // EsmSelfAttention scales q by 1 / sqrt(Dh) before rotary
            b.attn.q_scale = 1.0f / std::sqrt(float(Dh));
            e.blocks.push_back(std::move(b));
        }
        e.final_ln = nn::LayerNorm::load(e.dir, p + "encoder.emb_layer_norm_after", D, eps);
        // The checkpoint's own frequencies where it stores them (upstream runs with its buffer):
        // the model-level one, or layer 0's (under a literal '*' in transformers 5's files).
        for (const std::string& k :
             {p + "rotary_embeddings.inv_freq",
              p + "encoder.layer.0.attention.self.rotary_embeddings.inv_freq",
              p + "encoder.layer.*.attention.self.rotary_embeddings.inv_freq"})
            if (e.dir.has(k)) {
                inv_freq = e.dir.get_f32(k, {Dh / 2});
                break;
            }
        // EsmLMHead: its decoder tied to the word embeddings unless stored, its bias beside it
        const Tensor dec =
            e.dir.has("lm_head.decoder.weight")
                ? e.dir.get_f32("lm_head.decoder.weight", {e.vocab, D})
                : e.dir.get_f32(p + "embeddings.word_embeddings.weight", {e.vocab, D});
        e.head.dense = nn::Linear::load(e.dir, "lm_head.dense", D, D);
        e.head.ln = nn::LayerNorm::load(e.dir, "lm_head.layer_norm", D, eps);
        e.head.decoder = nn::Linear::from(dec, e.dir.get_f32("lm_head.bias", {e.vocab}));
    } else {
        EXPECT_EQ(type, "esmc") << name;
        const esm::EsmcLayout n = esm::EsmcLayout::hf("esmc.");
        // both residual branches scaled by 1 / sqrt(layers / 36); scores by 1 / sqrt(Dh)
        const float s = 1.0f / std::sqrt(float(e.layers) / 36.0f);
        for (int64_t l = 0; l < e.layers; ++l) {
            nn::PreLnBlock b =
                nn::PreLnBlock::load(e.dir, n.layer + std::to_string(l) + ".", n.block, D, F, eps);
            EXPECT_EQ(int(b.ffn.act), int(nn::FeedForward::Act::SwiGlu)) << name;
            b.attn.heads = H;
            b.attn.score_scale = 1.0f / std::sqrt(float(Dh));
            b.residual_scale = s;
            e.blocks.push_back(std::move(b));
        }
        e.final_ln = nn::LayerNorm::load(e.dir, n.final_norm, D, eps, /*bias=*/false);
        e.head = nn::MaskedLmHead::load(e.dir, n.head, D, e.vocab, eps);
    }
    e.rotary.inv_freq = inv_freq;
    return e;
}

// Every case's reference tensor `key` (<id>.<key>) stacked into one packed batch, and its context.
struct Packed {
    nn::BatchCtx ctx;
    Tensor x;
};

Packed pack(const Encoder& e, const std::string& key) {
    Packed p;
    p.ctx.cu_seqlens = {0};
    std::vector<Tensor> parts;
    for (const auto& c : e.fixture.cases) {
        parts.push_back(e.fixture.get(c.id + "." + key));
        p.ctx.cu_seqlens.push_back(p.ctx.cu_seqlens.back() + parts.back().size(0));
        p.ctx.longest = std::max(p.ctx.longest, parts.back().size(0));
    }
    p.x = Tensor::empty({p.ctx.rows(), parts[0].size(1)});
    for (size_t b = 0; b < parts.size(); ++b) {
        Tensor dst = p.x.narrow0(p.ctx.cu_seqlens[b], p.ctx.cu_seqlens[b + 1]);
        ops::copy(parts[b], dst);
    }
    return p;
}

// Sequence b's rows of a packed tensor.
Tensor rows_of(const Tensor& t, const nn::BatchCtx& ctx, size_t b) {
    return t.narrow0(ctx.cu_seqlens[b], ctx.cu_seqlens[b + 1]).clone();
}

class NnTransformer : public ::testing::TestWithParam<std::string> {};

// Block l on the reference's hidden.l gives hidden.(l+1); the last block, then the final
// LayerNorm, gives the last hidden state (after the final norm, as docs/parity.md numbers them).
TEST_P(NnTransformer, EachBlockMapsReferenceHiddenStateToTheNext) {
    Encoder e = load_encoder(GetParam());
    ASSERT_EQ(int64_t(e.blocks.size()), e.layers);
    Worst worst{GetParam() + " blocks"};
    for (int64_t l = 0; l < e.layers; ++l) {
        Packed p = pack(e, "hidden." + std::to_string(l));
        e.rotary.ensure(p.ctx.longest);
        p.ctx.rotary = &e.rotary;
        nn::pre_ln_block(e.blocks[size_t(l)], p.ctx, p.x, nullptr);
        Tensor out = p.x;
        if (l + 1 == e.layers) {
            out = Tensor::empty(p.x.shape());
            e.final_ln(p.x, out);
        }
        for (size_t b = 0; b < e.fixture.cases.size(); ++b) {
            const std::string k = e.fixture.cases[b].id + ".hidden." + std::to_string(l + 1);
            expect_parity(rows_of(out, p.ctx, b), e.fixture.get(k),
                          GetParam() + " block " + std::to_string(l) + " -> " + k, worst);
        }
    }
}

// Block 0's intermediates on the reference's embedding output: the attention LayerNorm, the
// attention context before the output projection (q/k/v, q/k LayerNorm, scales, rotary and
// softmax), the residual stream after attention, and the activated FFN input to its down
// projection.
TEST_P(NnTransformer, BlockIntermediatesMatchLayer0) {
    Encoder e = load_encoder(GetParam());
    Worst worst{GetParam() + " layer0 intermediates"};
    Packed p = pack(e, "hidden.0");
    e.rotary.ensure(p.ctx.longest);
    p.ctx.rotary = &e.rotary;
    std::map<std::string, Tensor> taps;
    p.ctx.tap = [&](const std::string& n, const Tensor& t) { taps[n] = t.clone(); };
    nn::pre_ln_block(e.blocks[0], p.ctx, p.x, nullptr);
    for (const char* n : {"attn_ln", "attn_ctx", "attn_out", "ffn_up"}) {
        ASSERT_TRUE(taps.count(n)) << n;
        for (size_t b = 0; b < e.fixture.cases.size(); ++b) {
            const std::string k = e.fixture.cases[b].id + ".layer0." + n;
            expect_parity(rows_of(taps.at(n), p.ctx, b), e.fixture.get(k), GetParam() + " " + k,
                          worst);
        }
    }
}

// The same block without its rotary tables must miss the reference's attention context: the
// comparison above sees the positions.
TEST_P(NnTransformer, AttentionWithoutRotaryMissesTheReference) {
    Encoder e = load_encoder(GetParam());
    Packed p = pack(e, "hidden.0");
    Tensor ctxv;
    p.ctx.tap = [&](const std::string& n, const Tensor& t) {
        if (n == "attn_ctx") ctxv = t.clone();
    };
    nn::pre_ln_block(e.blocks[0], p.ctx, p.x, nullptr);  // ctx.rotary null: no rotary
    ASSERT_TRUE(ctxv.defined());
    const Packed ref = pack(e, "layer0.attn_ctx");
    const test::Stats s = test::stats(ctxv.f32(), ref.x.f32(), ctxv.numel());
    std::printf("[ off bar  ] %s attn_ctx without rotary: PCC %.6f, rel L2 %.3g\n",
                GetParam().c_str(), s.pcc, s.rel_l2);
    EXPECT_FALSE(s.pcc >= 0.99999 && s.rel_l2 <= 1e-5) << "attention ignores rotary";
}

// The stack as one call (encoder_stack) from the reference's embedding output: every hidden
// state it is asked to keep.
TEST_P(NnTransformer, EncoderStackKeepsEveryHiddenState) {
    Encoder e = load_encoder(GetParam());
    Worst worst{GetParam() + " encoder_stack"};
    Packed p = pack(e, "hidden.0");
    e.rotary.ensure(p.ctx.longest);
    p.ctx.rotary = &e.rotary;
    nn::StackRequest req;
    for (int l = 0; l <= int(e.layers); ++l) req.layers.push_back(l);
    std::map<int, Tensor> hidden;
    const Tensor last = nn::encoder_stack(e.blocks, e.final_ln, p.ctx, p.x, req, hidden);
    ASSERT_EQ(int64_t(hidden.size()), e.layers + 1);
    for (size_t b = 0; b < e.fixture.cases.size(); ++b) {
        const std::string& id = e.fixture.cases[b].id;
        for (int l = 0; l <= int(e.layers); ++l) {
            const std::string k = id + ".hidden." + std::to_string(l);
            expect_parity(rows_of(hidden.at(l), p.ctx, b), e.fixture.get(k),
                          GetParam() + " stack " + k, worst);
        }
        expect_parity(rows_of(last, p.ctx, b),
                      e.fixture.get(id + ".hidden." + std::to_string(e.layers)),
                      GetParam() + " stack output " + id, worst);
    }
}

// The masked-LM head on the reference's last hidden state gives its logits, with the same
// argmax at every position.
TEST_P(NnTransformer, MaskedLmHeadMatchesLogits) {
    Encoder e = load_encoder(GetParam());
    ASSERT_TRUE(e.head.defined());
    Worst worst{GetParam() + " masked-LM head"};
    for (const auto& c : e.fixture.cases) {
        const Tensor x = e.fixture.get(c.id + ".hidden." + std::to_string(e.layers));
        const Tensor ref = e.fixture.get(c.id + ".logits");
        ASSERT_EQ(ref.size(1), e.vocab) << c.id;
        Tensor logits = Tensor::empty({x.size(0), e.vocab});
        e.head(x, logits);
        expect_parity(logits, ref, GetParam() + " " + c.id + " logits", worst);
        for (int64_t t = 0; t < x.size(0); ++t) {
            const float* g = logits.f32() + t * e.vocab;
            const float* r = ref.f32() + t * e.vocab;
            EXPECT_EQ(std::max_element(g, g + e.vocab) - g, std::max_element(r, r + e.vocab) - r)
                << GetParam() << " " << c.id << " logits argmax at " << t;
        }
    }
}

}  // namespace

// The fixtures with a config.json (esmc_tiny_pth, the esm package's state dict, stores no head
// count; LmParity covers it through the model).
INSTANTIATE_TEST_SUITE_P(Fixtures, NnTransformer,
                         ::testing::Values("esm2_tiny", "esm2_tiny_hd12", "esmc_tiny",
                                           "esmc_tiny_hd10"));
