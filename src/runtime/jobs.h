// What embed and predict share as batch jobs over many targets: the per-target outcome, the
// results.json summary and exit status, skipping done work, and the workers that run targets.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/progress.h"

namespace bioinfer::runtime {

struct TargetResult {
    std::string id, source;
    std::string status = "pending";  // ok | skipped | failed
    std::string error;
    double seconds = 0;
    nlohmann::json files = nlohmann::json::object();
};

// 0: every target succeeded (or was already done), 1: every target failed, 2: some failed.
int exit_status(const std::vector<TargetResult>& results);

// Writes <out_dir>/results.json (atomically): the job, counts, and every target in input order
// with its status, error and run time.
void write_results(const std::string& out_dir, const std::string& tool, const nlohmann::json& job,
                   const std::vector<TargetResult>& results, double seconds);

// One line for the end of a run: "predict: 3 done, 1 skipped, 2 failed (see out/results.json)".
std::string results_summary(const std::string& tool, const std::vector<TargetResult>& results,
                            const std::string& out_dir);

// The job's progress: the caller's `given` (it showed the weights loading, whose time is noted
// here) or a new one kept in `own`. Reports the targets already settled before any work (failed
// at input, skipped as done) and sets the totals.
Progress& start_job_progress(Progress* given, std::unique_ptr<Progress>& own, const ProgressOptions& o,
                             const std::vector<TargetResult>& results, int64_t total_tokens,
                             const std::string& model_label, double load_seconds);

// A worker runs targets with its own threads and the model resident. On the CPU, workers split
// the cores and share the one read-only copy of the weights; an accelerator backend gets one
// worker per device, each with its weights in that device's memory.
struct Worker {
    int index = 0;
    std::string device = "cpu";
    int threads = 1;
};

// `workers` CPU workers over `threads` cores (0: all); each gets threads / workers (at least 1).
std::vector<Worker> cpu_workers(int workers, int threads);

// `workers`, or one worker on the process's threads when empty.
std::vector<Worker> workers_or_default(const std::vector<Worker>& workers);

// Runs tasks 0..n-1: each worker takes the next task when it is free (so tasks start in order).
// A worker's thread uses worker.threads threads for its kernels. `task` reports its own failures;
// an exception that escapes it stops the other workers after their current task and is rethrown.
void run_on_workers(const std::vector<Worker>& workers, size_t n,
                    const std::function<void(const Worker&, size_t)>& task);

}  // namespace bioinfer::runtime
