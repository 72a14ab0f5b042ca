// The op sweep: runs every variant of the ops in sweep_ops.h at their shapes, admits each on its
// agreement with a reference, times it warm and writes one results JSON per sub-sweep; reads
// results back to report the winners against a tuned table and to write them into a table file.
#pragma once
#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/tuning/tuned_table.h"
#include "sweep/sweep_ops.h"

namespace bioinfer::tuning::sweep {

// The results files' format (read back only at this version).
constexpr int kSchemaVersion = 1;

// A sub-sweep by name (matmul, attention, ...); null when there is none.
const OpSweep* find_op_sweep(const std::string& name);

struct Options {
    std::vector<const OpSweep*> ops;  // the sub-sweeps, in order
    std::vector<std::string> sets;    // shape sets (shape_sets())
    std::vector<std::string> dtypes;  // "fp32", "bf16"
    int iters = 3;                    // back-to-back calls per timing
    int reps = 5;                     // timings per variant; the minimum counts
    std::string out_dir;              // one <sweep>-<sets>.json per sub-sweep goes here
    nlohmann::json arguments;         // how the sweep was asked for, recorded as given
};

// Every case (shape x dtype) and variant the options name, as a JSON document; runs nothing.
nlohmann::json plan_document(const Options& o);

struct RunSummary {
    std::vector<std::string> files;  // the results files written
    size_t errors = 0;               // variants that failed (recorded, not thrown)
};
// Measures the machine's peaks, then runs, checks and times every variant and writes the
// results; the active tuned table is loaded first, so a bad one fails before anything runs.
// `log` gets one progress line at a time.
RunSummary run(const Options& o, const std::function<void(const std::string&)>& log);

// A sweep results file, checked to be one this build reads.
nlohmann::json read_results(const std::string& path);
// The winner per tuned-table decision (op, dtype, lookup shape) of a results file's rows.
nlohmann::json stages_from_rows(const nlohmann::json& rows);
// A results document's winners against `table` (kernel defaults where it has no entry): the
// text of `bioinfer bench sweep --report`.
std::string report(const nlohmann::json& results, const Table& table);

struct TableUpdate {
    size_t entries = 0;  // entries in the table written
    size_t fresh = 0;    // of which from these results files
};
// Writes the winners of `results_files` into the table file `table_path` (starting from it when
// it exists; an entry for the same kernels, op, dtype and shape is replaced). Atomic.
TableUpdate update_table(const std::vector<std::string>& results_files,
                         const std::string& table_path);

}  // namespace bioinfer::tuning::sweep
