// The backend seam: a kernel table registered at run time under a new name (here the reference's
// kernels behind counting wrappers) carries whole models end to end, on the calling thread and on
// workers, and matches the upstream fixtures; the backends already registered see none of it. A
// table with the core entries alone (the model-specific ones composed by ops) does the same.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "backend/ref/ref_kernels.h"
#include "backend/registry.h"
#include "io/model_dir.h"
#include "models/esm_alphabet.h"
#include "models/esmfold/esmfold.h"
#include "models/language_model.h"
#include "ops/ops.h"
#include "runtime/jobs.h"
#include "test_util.h"

using namespace bioinfer;

namespace {

std::atomic<int64_t> g_linear{0}, g_attention{0}, g_layer_norm{0}, g_other{0};
using C = const kernels::Context&;

// The reference table under another name, counting the kernels a language model runs most.
const kernels::KernelTable& counting_table() {
    static const kernels::KernelTable t = [] {
        kernels::KernelTable k = kernels::ref_kernels();
        k.name = "ref-counting";
        k.linear = [](C c, const float* x, const float* w, const void* p, const float* b, float* y,
                      int64_t M, int64_t K, int64_t N, Act act, float s, bool acc) {
            ++g_linear;
            kernels::ref_kernels().linear(c, x, w, p, b, y, M, K, N, act, s, acc);
        };
        k.attention = [](C c, const float* q, const float* kk, const float* v, float* out,
                         const int64_t* cu, int64_t B, int64_t H, int64_t Hkv, int64_t Dh, float scale,
                         bool causal, const uint8_t* valid, float* probs, int64_t P, const float* bias,
                         int64_t bias_stride) {
            ++g_attention;
            kernels::ref_kernels().attention(c, q, kk, v, out, cu, B, H, Hkv, Dh, scale, causal, valid,
                                             probs, P, bias, bias_stride);
        };
        k.layer_norm = [](C c, const float* x, const float* g, const float* b, float* y, int64_t rows,
                          int64_t d, float eps) {
            ++g_layer_norm;
            kernels::ref_kernels().layer_norm(c, x, g, b, y, rows, d, eps);
        };
        k.embedding = [](C c, const int32_t* ids, int64_t n, const float* table, int64_t D, float* out,
                         bool acc) {
            ++g_other;
            kernels::ref_kernels().embedding(c, ids, n, table, D, out, acc);
        };
        return k;
    }();
    return t;
}

const backend::Backend& counting_backend() {
    static const backend::Backend* b = [] {
        backend::register_backend({"ref-counting", kHost, &counting_table()});
        return &backend::get("ref-counting");
    }();
    return *b;
}

int64_t calls() { return g_linear + g_attention + g_layer_norm + g_other; }

// ESM-2's forward on the fixture's cases: every hidden state and the logits against transformers.
void expect_esm2_parity(lm::LanguageModel& model, const test::ParityFixture& f, const std::string& tag) {
    std::vector<std::vector<int32_t>> toks;
    for (auto& c : f.cases) toks.push_back(esm::with_specials(model.tokenize(c.sequence, c.id)));
    lm::Request req;
    const int layers = f.meta["num_layers"];
    for (int l = 0; l <= layers; ++l) req.layers.push_back(l);
    req.logits = true;
    req.contacts = true;
    const lm::Output out = model.forward(toks, req);
    for (size_t b = 0; b < f.cases.size(); ++b) {
        const int64_t r0 = out.offsets[b], n = out.offsets[b + 1] - r0;
        for (int l = 0; l <= layers; ++l) {
            const Tensor& h = out.hidden.at(l);
            const Tensor ref = f.get(f.cases[b].id + ".hidden." + std::to_string(l));
            auto s = test::stats(h.f32() + r0 * h.size(1), ref.f32(), n * h.size(1));
            EXPECT_GE(s.pcc, 0.99999) << tag << " hidden." << l;
            EXPECT_LE(s.rel_l2, 1e-5) << tag << " hidden." << l;
        }
        const Tensor ref = f.get(f.cases[b].id + ".logits");
        auto s = test::stats(out.logits.f32() + r0 * out.logits.size(1), ref.f32(), ref.numel());
        EXPECT_LE(s.rel_l2, 1e-5) << tag << " logits";
        auto sc = test::stats(out.contacts[b].f32(), f.get(f.cases[b].id + ".contacts").f32(),
                              out.contacts[b].numel());
        EXPECT_LE(sc.max_abs, 1e-5) << tag << " contacts";
    }
}

}  // namespace

TEST(BackendSeam, RegisteredTableRunsAModelEndToEnd) {
    const backend::Backend& b = counting_backend();
    EXPECT_EQ(&backend::get("ref-counting"), &b);
    bool listed = false;
    for (const backend::Backend* x : backend::backends()) listed |= x == &b;
    EXPECT_TRUE(listed) << "a registered backend is listed";
    EXPECT_THROW(backend::register_backend({"ref-counting", kHost, &counting_table()}), Error);
    EXPECT_THROW(backend::get("no-such-backend"), Error);

    const test::ParityFixture f = test::load_parity_fixture("esm2_tiny");
    // The process default: load (weights are packed for, and read by, this backend) and run.
    ops::set_backend("ref-counting");
    EXPECT_STREQ(ops::backend_name(), "ref-counting");
    auto model = lm::load(io::ModelDir::open(f.dir));
    const int64_t before = calls();
    expect_esm2_parity(*model, f, "default backend");
    EXPECT_GT(g_linear, 0);
    EXPECT_GT(g_attention, 0);
    EXPECT_GT(g_layer_norm, 0);
    EXPECT_GT(g_other, 0);
    EXPECT_GT(calls(), before);
    ops::set_backend("cpu");

    // The built-in CPU backend runs the same model without touching the registered table.
    auto cpu_model = lm::load(io::ModelDir::open(f.dir));
    const int64_t settled = calls();
    expect_esm2_parity(*cpu_model, f, "cpu backend");
    EXPECT_EQ(calls(), settled) << "the cpu backend's calls went through the registered table";
}

TEST(BackendSeam, WorkersRunOnTheCallersBackend) {
    const backend::Backend& b = counting_backend();
    const test::ParityFixture f = test::load_parity_fixture("esm2_tiny");
    // Two workers on their own threads, launched from a thread scoped to the registered backend:
    // each runs the whole forward on it.
    const ops::BackendScope scope(b);
    auto model = lm::load(io::ModelDir::open(f.dir));
    const int64_t before = g_linear;
    std::atomic<int> ran{0};
    std::vector<std::string> seen(2);
    runtime::run_on_workers(runtime::cpu_workers(2, 2), 2, [&](const runtime::Worker& w, size_t i) {
        seen[i] = ops::backend_name();
        expect_esm2_parity(*model, f, "worker " + std::to_string(w.index));
        ++ran;
    });
    EXPECT_EQ(ran, 2);
    for (const std::string& s : seen) EXPECT_EQ(s, "ref-counting");
    EXPECT_GT(g_linear, before);
}

// A new backend starts from the core entries: the CPU's table without the model-specific ones
// carries ESM-2 (token dropout, the contact head's APC) to the upstream fixture's bars, and
// ESMFold's structure module (IPA, the frame update, the angles' normalisation, atoms from
// torsions) to the full table's coordinates and confidences. ESMFold runs without recycling
// here: a recycled pass bins the previous pass's distances, and a difference in the last bit
// moves a distance that sits on a bin edge into the next bin (the full tables agree to the bit).
TEST(BackendSeam, CoreEntriesAloneCarryTheModels) {
    const std::string& core = test::core_only_backend();
    {
        const ops::BackendScope scope(core);
        EXPECT_STREQ(ops::backend_name(), "cpu-core");
        const test::ParityFixture f = test::load_parity_fixture("esm2_tiny");
        auto model = lm::load(io::ModelDir::open(f.dir));
        expect_esm2_parity(*model, f, "core entries");
    }
    const test::ParityFixture f = test::load_parity_fixture("esmfold_tiny");
    esmfold::FoldOptions opts;
    opts.num_recycles = 0;
    std::vector<esmfold::FoldOutput> full, composed;
    for (const std::string& b : {std::string("cpu"), core}) {
        const ops::BackendScope scope(b);
        auto model = esmfold::EsmFoldModel::load(io::ModelDir::open(f.dir));
        for (const auto& c : f.cases)
            (b == core ? composed : full)
                .push_back(model->fold(esmfold::encode_sequence(c.sequence, c.id).target, opts));
    }
    for (size_t k = 0; k < f.cases.size(); ++k) {
        SCOPED_TRACE(f.cases[k].id);
        const esmfold::FoldOutput &want = full[k], &got = composed[k];
        // coordinates within 1e-4 of their spread (eight blocks of rounding differences), angles
        // and confidences to 1e-4
        const Tensor& ref = want.structure.positions;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < ref.numel(); ++i) mean += ref.f32()[i];
        mean /= double(ref.numel());
        for (int64_t i = 0; i < ref.numel(); ++i) var += std::pow(ref.f32()[i] - mean, 2);
        const double spread = std::sqrt(var / double(ref.numel()));
        for (const auto& [what, g, w] :
             {std::tuple<const char*, const Tensor*, const Tensor*>{
                  "frames", &got.structure.frames, &want.structure.frames},
              {"atom14", &got.structure.positions, &want.structure.positions},
              {"atom37", &got.atom37, &want.atom37}}) {
            ASSERT_EQ(g->numel(), w->numel()) << what;
            EXPECT_LE(test::stats(g->f32(), w->f32(), w->numel()).max_abs, 1e-4 * spread) << what;
        }
        const auto angles = test::stats(got.structure.angles.f32(), want.structure.angles.f32(),
                                        want.structure.angles.numel());
        EXPECT_LE(angles.max_abs, 1e-4) << "angles";
        test::compare(got.plddt, want.plddt, 1e-4, 0, "plddt");
        EXPECT_NEAR(got.ptm, want.ptm, 1e-4) << "ptm";
        test::compare(got.pae, want.pae, 1e-4, 1e-5, "pae");
    }
}
