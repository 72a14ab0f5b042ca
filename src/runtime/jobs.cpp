// Batch-job plumbing shared by embed and predict.
#include "runtime/jobs.h"

#include <atomic>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>

#include "bioinfer/error.h"
#include "core/threads.h"
#include "io/atomic_file.h"

namespace bioinfer::runtime {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Counts {
    int64_t ok = 0, skipped = 0, failed = 0;
};

Counts count(const std::vector<TargetResult>& results) {
    Counts c;
    for (const auto& r : results) {
        if (r.status == "ok") ++c.ok;
        else if (r.status == "skipped") ++c.skipped;
        else ++c.failed;
    }
    return c;
}

}  // namespace

int exit_status(const std::vector<TargetResult>& results) {
    const Counts c = count(results);
    if (c.failed == 0) return 0;
    return c.ok + c.skipped == 0 ? 1 : 2;
}

void write_results(const std::string& out_dir, const std::string& tool, const json& job,
                   const std::vector<TargetResult>& results, double seconds) {
    const Counts c = count(results);
    json targets = json::array();
    for (const auto& r : results) {
        json t = {{"id", r.id}, {"source", r.source}, {"status", r.status}, {"runtime_s", r.seconds}};
        if (!r.error.empty()) t["error"] = r.error;
        if (!r.files.empty()) t["files"] = r.files;
        targets.push_back(t);
    }
    json out = {{"tool", tool},
                {"job", job},
                {"counts", {{"total", results.size()}, {"ok", c.ok}, {"skipped", c.skipped}, {"failed", c.failed}}},
                {"exit_status", exit_status(results)},
                {"runtime_s", seconds},
                {"targets", targets}};
    fs::create_directories(out_dir);
    io::write_file_atomic((fs::path(out_dir) / "results.json").string(), out.dump(2) + "\n");
}

std::string results_summary(const std::string& tool, const std::vector<TargetResult>& results,
                            const std::string& out_dir) {
    const Counts c = count(results);
    std::string s = cat(tool, ": ", c.ok, " done");
    if (c.skipped) s += cat(", ", c.skipped, " skipped (already done; --override redoes them)");
    if (c.failed) s += cat(", ", c.failed, " failed");
    return s + " (" + (fs::path(out_dir) / "results.json").string() + ")";
}

Progress& start_job_progress(Progress* given, std::unique_ptr<Progress>& own, const ProgressOptions& o,
                             const std::vector<TargetResult>& results, int64_t total_tokens,
                             const std::string& model_label, double load_seconds) {
    if (!given) own = std::make_unique<Progress>(o, 0);
    Progress& p = given ? *given : *own;
    p.set_total(int64_t(results.size()), total_tokens);
    if (load_seconds >= 0) p.note(cat("loaded ", model_label, " in ", format_duration(load_seconds)));
    for (const auto& r : results) {
        if (r.status == "failed") p.failed(r.id, r.error, 0);
        if (r.status == "skipped") p.skipped(r.id, 0);
    }
    return p;
}

std::vector<Worker> workers_or_default(const std::vector<Worker>& workers) {
    return workers.empty() ? std::vector<Worker>{{0, "cpu", num_threads()}} : workers;
}

std::vector<Worker> cpu_workers(int workers, int threads) {
    BI_CHECK(workers >= 1, "--workers", "expected at least 1, got ", workers);
    if (threads <= 0) threads = int(std::thread::hardware_concurrency());
    if (threads <= 0) threads = 1;
    std::vector<Worker> w;
    for (int i = 0; i < workers; ++i) {
        // the remainder goes to the first workers
        const int t = threads / workers + (i < threads % workers ? 1 : 0);
        w.push_back({i, "cpu", std::max(1, t)});
    }
    return w;
}

void run_on_workers(const std::vector<Worker>& workers, size_t n,
                    const std::function<void(const Worker&, size_t)>& task) {
    if (workers.size() == 1) {  // in this thread: the thread count set for the process applies
        set_num_threads(workers[0].threads);
        for (size_t i = 0; i < n; ++i) task(workers[0], i);
        return;
    }
    std::atomic<size_t> next{0};
    std::atomic<bool> stop{false};
    std::exception_ptr first;
    std::mutex mu;
    std::vector<std::thread> threads;
    for (const Worker& w : workers) {
        threads.emplace_back([&, w] {
            set_num_threads(w.threads);  // this thread's OpenMP team size
            while (!stop) {
                const size_t i = next++;
                if (i >= n) break;
                try {
                    task(w, i);
                } catch (...) {
                    std::lock_guard<std::mutex> lock(mu);
                    if (!first) first = std::current_exception();
                    stop = true;
                }
            }
        });
    }
    for (auto& t : threads) t.join();
    if (first) std::rethrow_exception(first);
}

}  // namespace bioinfer::runtime
