// The kernels' defaults and the op sweep's library: with an empty tuned table every kernel the
// sweep measures runs the variant the sweep calls its default; choices resolve against the
// defaults; the winners of a results file go to the table path given, and the report reads them.
#include <gtest/gtest.h>

#include <tuple>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backend/tuning/defaults.h"
#include "backend/tuning/tuned_table.h"
#include "bioinfer/error.h"
#include "io/atomic_file.h"
#include "sweep/sweep.h"
#include "sweep/sweep_ops.h"
#include "test_util.h"

using namespace bioinfer;
namespace sw = bioinfer::tuning::sweep;
namespace fs = std::filesystem;

namespace {

// What the kernels chose while the observer was set (kernels may ask from any thread).
std::mutex g_seen_mu;
std::vector<std::pair<std::string, tuning::Choice>> g_seen;

void observe(const char* op, const tuning::Choice& c) {
    std::lock_guard<std::mutex> lock(g_seen_mu);
    g_seen.emplace_back(op, c);
}

// The empty table (BIOINFER_TUNED_TABLE=none) for the life of the guard.
struct EmptyTable {
    tuning::Table none = tuning::load_table("none");
    EmptyTable() { tuning::set_table_override(&none); }
    ~EmptyTable() { tuning::set_table_override(nullptr); }
};

std::string key(const std::string& variant, const std::map<std::string, int64_t>& params) {
    return sw::variant_key(variant, params);
}

}  // namespace

// For every table op the sweep knows, at its tiny shapes: the kernels, given no table entry, ask
// for that op and get the sweep's default (variant and parameters), and compute the same bits as
// with that default forced by name.
TEST(TuningDefaults, KernelsRunTheSweepsDefaultsWithAnEmptyTable) {
    std::set<std::string> sweep_ops;
    for (const sw::OpSweep& op : sw::op_sweeps())
        for (const std::string& set : sw::shape_sets())
            for (const sw::Shape& s : op.shapes(set))
                for (const std::string dt : {"fp32", "bf16"})
                    for (const sw::Variant& v : op.variants(s.dims, dt))
                        sweep_ops.insert(v.table_op);
    // matmul, matmul_act, attention, layer_norm, rotary, softmax, the activations, the pair ops
    ASSERT_GE(sweep_ops.size(), 12u);

    EmptyTable empty;
    std::set<std::string> asked_for;
    for (const sw::OpSweep& op : sw::op_sweeps()) {
        std::vector<sw::Shape> shapes = op.shapes("tiny");
        // Elementwise kernels ask only when the work spans more than one chunk (4096 values);
        // the tiny activations do not, so add some that do (gelu, tanh-gelu, swiglu).
        if (op.name == "activation")
            for (int64_t fn : {1, 2, 3})
                shapes.push_back({"test", "test n=12295", {{"fn", fn}, {"n", 3 * 4096 + 7}}});
        for (const sw::Shape& s : shapes) {
            std::set<std::string> table_ops;
            for (const sw::Variant& v : op.variants(s.dims, "fp32")) table_ops.insert(v.table_op);
            const auto c = op.make(s.dims, "fp32");
            for (const std::string& table_op : table_ops) {
                const std::string what = op.name + " " + s.label + " " + table_op;
                const sw::Variant dv = sw::default_variant(table_op);
                EXPECT_EQ(dv.table_op, table_op) << what;
                g_seen.clear();
                tuning::set_choice_observer(observe);
                auto call = c->prepare(dv);
                call();
                tuning::set_choice_observer(nullptr);
                const Agreement by_default = c->check();
                size_t asked = 0;
                for (const auto& [seen_op, choice] : g_seen) {
                    if (seen_op != table_op) continue;
                    ++asked;
                    EXPECT_EQ(key(choice.variant, choice.params), key(dv.name, dv.params)) << what;
                }
                if (asked > 0) asked_for.insert(table_op);
                {
                    tuning::Force f(table_op, tuning::Choice{dv.name, dv.params});
                    auto forced_call = c->prepare(dv);
                    forced_call();
                }
                const Agreement forced = c->check();
                EXPECT_EQ(by_default.max_abs, forced.max_abs) << what;
                EXPECT_EQ(by_default.rel_l2, forced.rel_l2) << what;
            }
        }
    }
    for (const std::string& op : sweep_ops)
        EXPECT_TRUE(asked_for.count(op))
            << op << ": the kernels never asked the tuned table for it";
}

// The defaults themselves, written out: what each kernel ran before the table existed (the
// fallbacks the kernels and the sweep each restated until defaults.cpp became their one home).
// The test above holds the kernels to defaults.cpp; this one holds defaults.cpp to these values,
// so a default cannot change unnoticed.
TEST(TuningDefaults, DefaultsAreTheKernelsPlainChoices) {
    using P = std::map<std::string, int64_t>;
    const std::vector<std::tuple<std::string, std::string, P>> want{
        {"matmul", "onednn_packed", {}},
        {"matmul_fold", "onednn_packed", {}},
        {"matmul_act", "fused", {}},
        {"attention", "tiled", {{"q_block", 64}, {"k_block", 128}}},
        {"softmax", "three_pass", {}},
        {"layer_norm", "two_pass", {{"parallel", 1}}},
        {"trimul", "chunked", {{"chunk", 0}}},
        {"triatt", "chunked", {{"chunk", 0}}},
        {"pair_mlp", "chunked", {{"chunk", 0}}},
        {"rotary", "simd", {{"parallel", 1}}},
        {"gelu", "simd", {{"parallel", 1}}},
        {"gelu_tanh", "simd", {{"parallel", 1}}},
        {"swiglu", "simd", {{"parallel", 1}}},
    };
    for (const auto& [op, variant, params] : want) {
        const sw::Variant dv = sw::default_variant(op);
        EXPECT_EQ(dv.name, variant) << op;
        for (const auto& [k, v] : params) {
            ASSERT_TRUE(dv.params.count(k)) << op << " lacks " << k;
            EXPECT_EQ(dv.params.at(k), v) << op << " " << k;
        }
    }
}

TEST(TuningDefaults, ChoicesResolveAgainstTheDefaults) {
    using tuning::Choice;
    using tuning::resolve;
    EXPECT_EQ(resolve("attention", {}).variant, tuning::default_choice("attention").variant);
    const Choice partial = resolve("attention", {"tiled", {{"q_block", 32}}});
    EXPECT_EQ(partial.param("q_block"), 32);
    EXPECT_EQ(partial.param("k_block"), tuning::default_choice("attention").param("k_block"));
    // A non-default variant without parameters takes the op default's (the kernel reads them).
    EXPECT_EQ(resolve("attention", {"materialised", {}}).param("q_block"),
              tuning::default_choice("attention").param("q_block"));
    EXPECT_EQ(resolve("layer_norm", {"one_pass", {}}).param("parallel"), 1);
    // The own GEMM's blocking where the entry names none, and only that.
    const Choice own = resolve("matmul", {"own_packed", {{"n_block", 128}}});
    EXPECT_EQ(own.param("m_block"), 96);
    EXPECT_EQ(own.param("n_block"), 128);
    EXPECT_EQ(own.param("k_block"), 256);
    EXPECT_TRUE(resolve("matmul", {}).params.empty());
    // A forced choice is resolved too.
    {
        tuning::Force f("softmax", {"online", {}});
        EXPECT_EQ(tuning::choose("cpu-avx2", "softmax", "fp32", {{"rows", 4}, {"cols", 8}}).variant,
                  "online");
    }
    // Every op with a default resolves an empty choice to it.
    for (const std::string& op : tuning::default_ops()) {
        const Choice& d = tuning::default_choice(op);
        EXPECT_FALSE(d.variant.empty()) << op;
        EXPECT_EQ(key(resolve(op, {}).variant, resolve(op, {}).params), key(d.variant, d.params))
            << op;
    }
    EXPECT_NE(
        test::error_of([] { tuning::default_choice("no_such_op"); }).find("no default choice"),
        std::string::npos);
    EXPECT_NE(test::error_of([] {
                  (void)Choice{"simd", {}}.param("parallel");
              }).find("no parameter 'parallel'"),
              std::string::npos);
}

// --update-table and --report without the CLI: the table goes to the path given (created when
// missing, its other entries kept when not), the report names table and default choices.
TEST(SweepLibrary, UpdateTableWritesTheGivenPathAndReportReadsIt) {
    const fs::path dir =
        fs::temp_directory_path() / ("bioinfer_tuning_" + std::to_string(getpid()));
    fs::create_directories(dir);
    const auto row = [](const char* variant, double min_us, double mean_us) {
        return nlohmann::json{
            {"op", "softmax"},
            {"sweep", "softmax"},
            {"set", "tiny"},
            {"shape", {{"rows", 8}, {"cols", 33}}},
            {"label", "tiny 8x33"},
            {"table_shape", {{"rows", 8}, {"cols", 33}}},
            {"dtype", "fp32"},
            {"variant", variant},
            {"params", nlohmann::json::object()},
            {"selectable", true},
            {"status", "ok"},
            {"us", {{"min", min_us}, {"mean", mean_us}, {"reps", {min_us, mean_us}}}},
            {"pcc", 1.0},
            {"max_abs", 0.0},
            {"rel_l2", 0.0},
            {"admitted", true}};
    };
    const nlohmann::json results = {
        {"bench", "bioinfer bench sweep"},
        {"schema_version", sw::kSchemaVersion},
        {"sweep", "softmax"},
        {"machine", {{"cpu", "test cpu"}, {"kernels", "cpu-test"}}},
        {"rows", {row("three_pass", 10.0, 11.0), row("online", 5.0, 6.0)}}};
    const std::string results_path = (dir / "softmax-tiny.json").string();
    io::write_file_atomic(results_path, results.dump(1));
    const std::string table_path = (dir / "table.json").string();
    io::write_file_atomic(table_path, R"({"entries": [{"kernels": "cpu-other", "op": "softmax",
        "dtype": "fp32", "shape": {"rows": 8}, "variant": "online"}]})");

    const sw::TableUpdate u = sw::update_table({results_path}, table_path);
    EXPECT_EQ(u.entries, 2u);
    EXPECT_EQ(u.fresh, 1u);
    const tuning::Table t = tuning::load_table(table_path);
    EXPECT_EQ(
        tuning::lookup_in(t, "cpu-test", "softmax", "fp32", {{"rows", 8}, {"cols", 33}}).variant,
        "online");
    EXPECT_EQ(tuning::lookup_in(t, "cpu-other", "softmax", "fp32", {{"rows", 8}}).variant,
              "online");
    // Again: the entry for the same decision is replaced, not added.
    EXPECT_EQ(sw::update_table({results_path}, table_path).entries, 2u);
    // A table file that does not exist yet is created.
    const std::string fresh_path = (dir / "new" / "table.json").string();
    fs::create_directories(dir / "new");
    EXPECT_EQ(sw::update_table({results_path}, fresh_path).entries, 1u);

    const nlohmann::json doc = sw::read_results(results_path);
    const std::string with_table = sw::report(doc, t);
    EXPECT_NE(with_table.find("tuned table: " + table_path), std::string::npos) << with_table;
    EXPECT_NE(with_table.find("online (table)"), std::string::npos) << with_table;
    const std::string by_default = sw::report(doc, tuning::load_table("none"));
    EXPECT_NE(by_default.find(tuning::default_choice("softmax").variant + " (default)"),
              std::string::npos)
        << by_default;
    EXPECT_NE(by_default.find("2.00x"), std::string::npos) << by_default;  // 10 us -> 5 us
    EXPECT_NE(
        test::error_of([&] { sw::read_results(table_path); }).find("not a sweep results file"),
        std::string::npos);
    fs::remove_all(dir);
}
