// Loader accounting and name maps: every fixture loads with only known-ignorable tensors left
// unread; a copy with an extra or renamed tensor fails naming it; the triangle multiplication's
// Boltz-2 name map loads the same block from the fused layout.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "bioinfer/error.h"
#include "core/threads.h"
#include "io/atomic_file.h"
#include "io/model_dir.h"
#include "io/safetensors.h"
#include "models/esmfold/esmfold.h"
#include "models/language_model.h"
#include "nn/triangle.h"
#include "test_util.h"

using namespace bioinfer;
namespace fs = std::filesystem;
using test::error_of;

namespace {

bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

// A fixture checkpoint: its config and readable tensors, and how to load it.
struct Checkpoint {
    std::string name;
    nlohmann::json config;  // empty: a bare torch checkpoint
    std::map<std::string, Tensor> tensors;
    bool folding = false;
    // The tensors the loader leaves unread in the fixture itself (all known-ignorable).
    std::set<std::string> unread;
};

const char* const kLayerInvFreq = "esm.encoder.layer.*.attention.self.rotary_embeddings.inv_freq";

std::vector<Checkpoint> fixtures() {
    const std::string root = BIOINFER_FIXTURES;
    const std::vector<std::tuple<std::string, std::string, bool, std::set<std::string>>> list = {
        // transformers 5's save_pretrained: one rotary copy under a literal '*'
        {"esm2_tiny", "esm2_tiny", false, {kLayerInvFreq}},
        // legacy per-layer fp16 copies: layer 0's is read
        {"esm2_tiny_hd12",
         "esm2_tiny_hd12",
         false,
         {"esm.encoder.layer.1.attention.self.rotary_embeddings.inv_freq"}},
        {"esmc_tiny", "esmc_tiny", false, {}},
        {"esmc_tiny_hd10", "esmc_tiny_hd10", false, {}},
        {"esmc_tiny_pth", "esmc_tiny_pth", false, {}},
        // the I64 af2_to_esm buffer is never readable
        {"esmfold_tiny", "esmfold_tiny", true, {"af2_to_esm", kLayerInvFreq}},
    };
    std::vector<Checkpoint> out;
    for (auto& [name, dir, folding, unread] : list) {
        const io::ModelDir m = io::ModelDir::open(root + "/" + dir);
        Checkpoint c{name, m.config(), {}, folding, unread};
        for (const std::string& n : m.names()) c.tensors[n] = m.get_raw(n);
        out.push_back(std::move(c));
    }
    return out;
}

const std::vector<Checkpoint>& all_fixtures() {
    static const std::vector<Checkpoint> f = fixtures();
    return f;
}

void load(const io::ModelDir& m, bool folding) {
    if (folding)
        esmfold::EsmFoldModel::load(m);
    else
        lm::load(m);
}

io::ModelDir copy_of(const Checkpoint& c, std::map<std::string, Tensor> tensors) {
    return io::ModelDir::from_tensors(c.name + " (copy)", c.config, std::move(tensors));
}

// The fixture's tensors with `from` renamed to `to`.
std::map<std::string, Tensor> renamed(const Checkpoint& c, const std::string& from,
                                      const std::string& to) {
    std::map<std::string, Tensor> t = c.tensors;
    t[to] = t.at(from);
    t.erase(from);
    return t;
}

// The name with one more character in its last component: "a.b.weight" -> "a.b.weightx".
std::string misspelt(const std::string& n) {
    return n + "x";
}

// Loads are tiny and many here: one thread, so a busy machine's oversubscribed OpenMP barriers
// do not dominate (restored after the test).
struct OneThread {
    int prev = num_threads();
    OneThread() { set_num_threads(1); }
    ~OneThread() { set_num_threads(prev); }
};

}  // namespace

TEST(NameMatches, Globs) {
    EXPECT_TRUE(io::name_matches("a.*.b", "a.0.b"));
    EXPECT_TRUE(io::name_matches("a.*.b", "a.10.x.b"));
    EXPECT_TRUE(io::name_matches("a.*.b", "a.*.b"));
    EXPECT_FALSE(io::name_matches("a.*.b", "a.0.bx"));
    EXPECT_FALSE(io::name_matches("a.*.b", "a.b"));
    EXPECT_TRUE(io::name_matches("classifier.*", "classifier.dense.weight"));
    EXPECT_FALSE(io::name_matches("classifier.*", "esm.classifier.weight"));
    EXPECT_TRUE(io::name_matches("x", "x"));
    EXPECT_FALSE(io::name_matches("x", "xy"));
    EXPECT_TRUE(io::name_matches("*", ""));
}

TEST(ModelDir, RecordsWhatWasRead) {
    std::map<std::string, Tensor> t{
        {"a", Tensor::zeros({2})}, {"b", Tensor::zeros({2})}, {"c.weight", Tensor::zeros({2})}};
    const io::ModelDir m = io::ModelDir::from_tensors("mem", nlohmann::json::object(), t);
    EXPECT_EQ(m.unconsumed(), (std::vector<std::string>{"a", "b", "c.weight"}));
    EXPECT_TRUE(m.has("a"));  // has() reads nothing
    m.get_f32("a", {2});
    EXPECT_EQ(m.unconsumed(), (std::vector<std::string>{"b", "c.weight"}));
    EXPECT_THROW(m.get("b", {3}), Error);  // a failed read does not count
    const io::ModelDir copy = m;           // a copy carries its own record
    m.get_raw("b");
    EXPECT_EQ(copy.unconsumed(), (std::vector<std::string>{"b", "c.weight"}));
    EXPECT_EQ(m.check_consumed({"c.*"}, "test"), (std::vector<std::string>{"c.weight"}));
    const std::string e = error_of([&] { copy.check_consumed({"c.*"}, "test"); });
    EXPECT_TRUE(contains(e, "[mem] tensor 'b' is not used by the test loader")) << e;
}

TEST(ModelDir, ErrorListsTheFirstNamesAndTheCount) {
    std::map<std::string, Tensor> t;
    for (int i = 0; i < 12; ++i) t[cat("t", char('a' + i))] = Tensor::zeros({1});
    const io::ModelDir m = io::ModelDir::from_tensors("mem", nlohmann::json::object(), t);
    const std::string e = error_of([&] { m.check_consumed({}, "test"); });
    EXPECT_TRUE(contains(e, "12 tensors 'ta', 'tb'")) << e;
    EXPECT_TRUE(contains(e, "'th' and 4 more are not used")) << e;
}

// Each fixture loads from its directory, leaving exactly its known-ignorable tensors unread.
TEST(Loader, FixturesLeaveOnlyIgnorableTensors) {
    const OneThread one;
    for (const Checkpoint& c : all_fixtures()) {
        const io::ModelDir m = io::ModelDir::open(std::string(BIOINFER_FIXTURES) + "/" + c.name);
        ASSERT_NO_THROW(load(m, c.folding)) << c.name;
        const std::vector<std::string> left = m.unconsumed();
        EXPECT_EQ(std::set<std::string>(left.begin(), left.end()), c.unread) << c.name;
        // The in-memory copy the tests below start from loads too.
        ASSERT_NO_THROW(load(copy_of(c, c.tensors), c.folding)) << c.name;
    }
}

TEST(Loader, ExtraTensorFailsNamingIt) {
    const OneThread one;
    for (const Checkpoint& c : all_fixtures()) {
        std::map<std::string, Tensor> t = c.tensors;
        t["extra.weight"] = Tensor::zeros({4});
        std::string e = error_of([&] { load(copy_of(c, t), c.folding); });
        EXPECT_TRUE(contains(e, "'extra.weight'") && contains(e, "not used"))
            << c.name << ": " << e;

        // A block beyond the configured depth: block 0's first weight again as block 99's.
        std::string extra;
        for (const auto& [name, tensor] : c.tensors) {
            if (contains(name, "inv_freq")) continue;
            for (const std::string k : {"layer.0.", "layers.0.", "blocks.0."})
                if (const size_t at = name.find(k); at != std::string::npos && extra.empty())
                    extra = name.substr(0, at) + k.substr(0, k.size() - 2) + "99." +
                            name.substr(at + k.size());
            if (!extra.empty()) {
                t = c.tensors;
                t[extra] = tensor;
                break;
            }
        }
        ASSERT_FALSE(extra.empty()) << c.name;
        e = error_of([&] { load(copy_of(c, t), c.folding); });
        EXPECT_TRUE(contains(e, "'" + extra + "'")) << c.name << ": " << e;
    }
}

// Renaming any one tensor fails: the load names the new name (a tensor nothing reads) or, where
// the old name is required, the missing old name as before.
// (A LayerNorm stored under the legacy gamma / beta names is reported as its ".weight" / ".bias".)
TEST(Loader, EveryRenamedTensorFailsNamingIt) {
    const OneThread one;
    for (const Checkpoint& c : all_fixtures()) {
        int named_new = 0;
        for (const auto& [name, tensor] : c.tensors) {
            const std::string to = misspelt(name);
            const std::string e =
                error_of([&] { load(copy_of(c, renamed(c, name, to)), c.folding); });
            const bool new_named = contains(e, "'" + to + "'");
            named_new += new_named;
            const std::string module = name.substr(0, name.rfind('.') + 1);
            EXPECT_TRUE(
                new_named || contains(e, "missing tensor '" + name + "'") ||
                (contains(name, ".gamma") && contains(e, "missing tensor '" + module + "weight'")))
                << c.name << ": renaming '" << name << "': " << e;
        }
        EXPECT_GT(named_new, 0) << c.name;
    }
}

// Renames that used to pass silently (an optional tensor under a wrong name, the tied decoder,
// a rotary copy) now fail naming the new name.
TEST(Loader, RenamedOptionalTensorsFailNamingTheNewName) {
    const OneThread one;
    const std::map<std::string, std::vector<std::string>> optional = {
        {"esm2_tiny",
         {"lm_head.dense.weight", "esm.contact_head.regression.weight", kLayerInvFreq}},
        {"esm2_tiny_hd12",
         {"lm_head.decoder.weight",
          "esm.encoder.layer.0.attention.self.rotary_embeddings.inv_freq"}},
        {"esmc_tiny", {"lm_head.dense.weight"}},
        {"esmc_tiny_pth", {"sequence_head.0.weight"}},
        {"esmfold_tiny", {"esm.contact_head.regression.weight"}},
    };
    for (const Checkpoint& c : all_fixtures()) {
        if (!optional.count(c.name)) continue;
        for (const std::string& name : optional.at(c.name)) {
            ASSERT_TRUE(c.tensors.count(name)) << c.name << " lacks " << name;
            const std::string to = misspelt(name);
            const std::string e =
                error_of([&] { load(copy_of(c, renamed(c, name, to)), c.folding); });
            EXPECT_TRUE(contains(e, "'" + to + "'") && contains(e, "not used"))
                << c.name << ": renaming '" << name << "': " << e;
        }
    }
}

// Tensors upstream checkpoints may hold and bioinfer does not need load fine and are reported.
TEST(Loader, IgnorableExtrasLoad) {
    const OneThread one;
    const std::map<std::string, std::vector<std::string>> extras = {
        {"esm2_tiny",
         {"esm.embeddings.position_ids", "esm.embeddings.position_embeddings.weight",
          "esm.encoder.layer.2.attention.self.rotary_embeddings.inv_freq",
          "esm.pooler.dense.weight", "esm.pooler.dense.bias", "classifier.dense.weight",
          "classifier.out_proj.bias"}},
        {"esmc_tiny", {"esmc.rotary_emb.inv_freq", "classifier.weight"}},
        {"esmc_tiny_pth", {"transformer.blocks.1.attn.rotary.inv_freq"}},
        {"esmfold_tiny",
         {"af2_to_esm", "esm.embeddings.position_ids",
          "esm.encoder.layer.1.attention.self.rotary_embeddings.inv_freq"}},
    };
    for (const Checkpoint& c : all_fixtures()) {
        if (!extras.count(c.name)) continue;
        std::map<std::string, Tensor> t = c.tensors;
        for (const std::string& n : extras.at(c.name)) t[n] = Tensor::zeros({4});
        const io::ModelDir m = copy_of(c, t);
        ASSERT_NO_THROW(load(m, c.folding)) << c.name;
        const std::vector<std::string> left = m.unconsumed();
        for (const std::string& n : extras.at(c.name))
            EXPECT_TRUE(std::count(left.begin(), left.end(), n)) << c.name << ": " << n;
    }
    // Not ignorable in another model: ESMFold runs no classifier, ESM C has no pooler.
    for (const Checkpoint& c : all_fixtures()) {
        std::string n;
        if (c.folding) n = "classifier.weight";
        if (c.name == "esmc_tiny") n = "esmc.pooler.dense.weight";
        if (n.empty()) continue;
        std::map<std::string, Tensor> t = c.tensors;
        t[n] = Tensor::zeros({4});
        EXPECT_TRUE(contains(error_of([&] { load(copy_of(c, t), c.folding); }), "'" + n + "'"));
    }
}

// The same check on a checkpoint on disk (safetensors + config.json).
TEST(Loader, ExtraTensorInASafetensorsDirectory) {
    const OneThread one;
    const Checkpoint& c = all_fixtures()[0];
    const fs::path dir =
        fs::temp_directory_path() / ("bioinfer_loader_" + std::to_string(getpid()));
    fs::create_directories(dir);
    std::map<std::string, Tensor> t = c.tensors;
    t["esm.encoder.layer.0.attention.self.query_extra.weight"] = Tensor::zeros({2, 2});
    io::write_safetensors((dir / "model.safetensors").string(), t);
    io::write_file_atomic((dir / "config.json").string(), c.config.dump());
    const std::string e = error_of([&] { lm::load(io::ModelDir::open(dir.string())); });
    fs::remove_all(dir);
    EXPECT_TRUE(
        contains(e, "[" + dir.string() +
                        "] tensor "
                        "'esm.encoder.layer.0.attention.self.query_extra.weight' is not used "
                        "by the ESM-2 loader"))
        << e;
}

// Boltz-2's fused triangle multiplication (p_in = [a_p; b_p], g_in = [a_g; b_g], g_out, p_out, no
// linear biases) loads through its name map into the block OpenFold's layout fills, and computes
// the same update.
TEST(NameMaps, TriangleMultiplicationBoltz2Layout) {
    const int64_t C = 8, L = 6;
    uint32_t seed = 1;
    const auto rnd = [&](const Shape& s, float mean = 0.0f) {
        return test::random_tensor(s, seed++, mean, 0.3f);
    };
    std::map<std::string, Tensor> openfold, boltz;
    for (auto [of, bz] :
         {std::pair{"layer_norm_in", "norm_in"}, std::pair{"layer_norm_out", "norm_out"}}) {
        const Tensor g = rnd({C}, 1.0f), b = rnd({C});
        openfold[cat("t.", of, ".weight")] = boltz[cat("t.", bz, ".weight")] = g;
        openfold[cat("t.", of, ".bias")] = boltz[cat("t.", bz, ".bias")] = b;
    }
    const auto fused = [&](const char* name, const char* a, const char* b) {
        const Tensor w = rnd({2 * C, C});
        boltz[cat("t.", name, ".weight")] = w;
        openfold[cat("t.", a, ".weight")] = w.narrow0(0, C).clone();
        openfold[cat("t.", b, ".weight")] = w.narrow0(C, 2 * C).clone();
    };
    fused("p_in", "linear_a_p", "linear_b_p");
    fused("g_in", "linear_a_g", "linear_b_g");
    for (auto [of, bz] : {std::pair{"linear_g", "g_out"}, std::pair{"linear_z", "p_out"}}) {
        const Tensor w = rnd({C, C});
        boltz[cat("t.", bz, ".weight")] = openfold[cat("t.", of, ".weight")] = w;
    }
    for (const char* n :
         {"linear_a_p", "linear_b_p", "linear_a_g", "linear_b_g", "linear_g", "linear_z"})
        openfold[cat("t.", n, ".bias")] = Tensor::zeros({C});

    const io::ModelDir mo =
        io::ModelDir::from_tensors("openfold", nlohmann::json::object(), openfold);
    const io::ModelDir mb = io::ModelDir::from_tensors("boltz2", nlohmann::json::object(), boltz);
    for (bool outgoing : {true, false}) {
        const auto a = nn::TriangleMultiplication::load(mo, "t", C, outgoing);
        const auto b = nn::TriangleMultiplication::load(mb, "t", C, outgoing,
                                                        nn::TriangleMultiplicationNames::boltz2());
        EXPECT_TRUE(mb.unconsumed().empty());
        Tensor za = rnd({L, L, C}), zb = za.clone();
        a.add_to(za);
        b.add_to(zb);
        float diff = 0;
        for (int64_t i = 0; i < za.numel(); ++i)
            diff = std::max(diff, std::abs(za.f32()[i] - zb.f32()[i]));
        EXPECT_LT(diff, 1e-6f) << (outgoing ? "outgoing" : "incoming");
    }
    // The default (OpenFold) map does not read Boltz-2's names.
    const std::string e = error_of([&] { nn::TriangleMultiplication::load(mb, "t", C, true); });
    EXPECT_TRUE(contains(e, "missing tensor 't.layer_norm_in.")) << e;
}
