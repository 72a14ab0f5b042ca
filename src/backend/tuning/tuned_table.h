// The tuned table: which variant of a kernel (and with which parameters) runs at which shape,
// looked up at run time beside the kernels that read it. `bioinfer bench sweep --update-table`
// (the offline sweep, tools/sweep/) writes it from sweep results
// (src/backend/tuning/tuned_table.json, compiled into the binary); BIOINFER_TUNED_TABLE=FILE reads
// another at start-up, =none runs every kernel with its built-in default (defaults.h). Kernels ask
// once per call (tuning::choose), never inside a parallel region.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bioinfer::tuning {

// One shape dimension of a lookup. Exact dimensions (is_exact_dim) must match an entry exactly
// for it to apply; the others match the nearest entry on a log scale.
struct Dim {
    const char* name;
    int64_t value;
};
// The flags (causal, act) of every op, and a weight's (k, n) for "matmul" and "matmul_fold": its
// GEMM provider is chosen once per weight at load, and an entry timed for one weight shape says
// nothing about another (the nearest one on a log scale sent Boltz-2's 768 x 768 weights to the own
// GEMM tuned for 640 x 640, 25% slower than oneDNN at 128 tokens).
bool is_exact_dim(std::string_view op, std::string_view name);

struct Choice {
    std::string variant;  // empty: no entry applies, the kernel runs its default
    std::map<std::string, int64_t> params;
    int64_t param(const std::string& key, int64_t fallback) const {
        auto it = params.find(key);
        return it == params.end() ? fallback : it->second;
    }
    // A parameter of a resolved choice (defaults.h), which carries every one its kernel reads.
    int64_t param(const std::string& key) const;
    bool is(const char* v) const { return variant == v; }
};

struct Entry {
    std::string kernels, op, dtype;  // kernel table name ("cpu-avx512"), op, compute dtype
    std::map<std::string, int64_t> shape;
    Choice choice;
};

struct Table {
    std::vector<Entry> entries;
    std::string origin;  // where it came from, for messages and reports
};

// Parses a table document; errors name `where` and the offending entry.
Table parse_table(const std::string& text, const std::string& where);
// A table file, or "none": the empty table (every kernel runs its default).
Table load_table(const std::string& spec);
// The table the kernels read: the built-in one, or BIOINFER_TUNED_TABLE. Loaded on first use;
// load_active_table() does it eagerly so a bad file is a clear error before any kernel runs.
const Table& active_table();
void load_active_table();

// Makes lookups read `t` instead of the active table until set back to null (a benchmark
// comparing two tables in one process). `t` must outlive its use; not for concurrent use.
void set_table_override(const Table* t);

// The entry nearest to `shape` among those for this kernel table, op and dtype whose flag
// dimensions match; an empty Choice when there is none. A forced choice (below) wins.
Choice lookup(const char* kernels, const char* op, const char* dtype,
              std::initializer_list<Dim> shape);
Choice lookup_in(const Table& t, const std::string& kernels, const std::string& op,
                 const std::string& dtype, std::span<const Dim> shape);
inline Choice lookup_in(const Table& t, const std::string& kernels, const std::string& op,
                        const std::string& dtype, std::initializer_list<Dim> shape) {
    return lookup_in(t, kernels, op, dtype, std::span<const Dim>(shape.begin(), shape.size()));
}

// A sweep times one variant at a time by forcing it for an op; lookups for that op return it
// until the guard goes out of scope (guards nest, the innermost wins). Create and destroy guards
// outside parallel regions only (the sweep and the tests are the callers).
class Force {
public:
    Force(std::string op, Choice c);
    ~Force();
    Force(const Force&) = delete;
    Force& operator=(const Force&) = delete;
};

}  // namespace bioinfer::tuning
