// Batch-job plumbing shared by embed and predict.
#include "runtime/jobs.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
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
        if (r.status == "elsewhere") continue;
        if (r.status == "ok") ++c.ok;
        else if (r.status == "skipped") ++c.skipped;
        else ++c.failed;
    }
    return c;
}

}  // namespace

TargetResult target_result(size_t index, const std::string& id, const std::string& source, const std::string& error) {
    TargetResult t;
    t.id = id;
    t.source = source;
    t.error = error;
    t.status = error.empty() ? "pending" : "failed";
    t.index = int64_t(index);
    return t;
}

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
        if (r.status == "elsewhere") continue;
        json t = {{"index", r.index}, {"id", r.id}, {"source", r.source}, {"status", r.status},
                  {"runtime_s", r.seconds}};
        if (!r.error.empty()) t["error"] = r.error;
        if (!r.files.empty()) t["files"] = r.files;
        if (!r.duplicate_of.empty()) t["duplicate_of"] = r.duplicate_of;
        targets.push_back(t);
    }
    json out = {{"tool", tool},
                {"job", job},
                {"counts", {{"total", c.ok + c.skipped + c.failed}, {"ok", c.ok}, {"skipped", c.skipped}, {"failed", c.failed}}},
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

Shard shard_from(const std::string& flag) {
    Shard s;
    auto num = [](const std::string& v, const std::string& what) {
        size_t used = 0;
        long long n = -1;
        try {
            n = std::stoll(v, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        BI_CHECK(used == v.size() && used > 0 && n >= 0 && n < (1 << 30), what, "expected a number, got '", v, "'");
        return int(n);
    };
    auto env = [](const char* k) { return std::getenv(k) ? std::string(std::getenv(k)) : std::string(); };
    if (!flag.empty()) {
        const size_t slash = flag.find('/');
        BI_CHECK(slash != std::string::npos, "--shard", "expected I/N (0 <= I < N), got '", flag, "'");
        s.index = num(flag.substr(0, slash), "--shard");
        s.count = num(flag.substr(slash + 1), "--shard");
        s.from = "--shard";
    } else if (!env("OMPI_COMM_WORLD_SIZE").empty()) {
        s.index = num(env("OMPI_COMM_WORLD_RANK"), "OMPI_COMM_WORLD_RANK");
        s.count = num(env("OMPI_COMM_WORLD_SIZE"), "OMPI_COMM_WORLD_SIZE");
        s.from = "MPI";
    } else if (!env("PMI_SIZE").empty()) {
        s.index = num(env("PMI_RANK"), "PMI_RANK");
        s.count = num(env("PMI_SIZE"), "PMI_SIZE");
        s.from = "MPI";
    } else if (!env("SLURM_ARRAY_TASK_COUNT").empty()) {
        const int min = env("SLURM_ARRAY_TASK_MIN").empty() ? 0 : num(env("SLURM_ARRAY_TASK_MIN"), "SLURM_ARRAY_TASK_MIN");
        s.index = num(env("SLURM_ARRAY_TASK_ID"), "SLURM_ARRAY_TASK_ID") - min;
        s.count = num(env("SLURM_ARRAY_TASK_COUNT"), "SLURM_ARRAY_TASK_COUNT");
        s.from = "Slurm array";
    }
    BI_CHECK(s.count >= 1 && s.index >= 0 && s.index < s.count, s.from.empty() ? "--shard" : s.from,
             "shard ", s.index, " of ", s.count, " is out of range (0 <= I < N)");
    if (s.count == 1) s.from.clear();
    return s;
}

std::vector<size_t> rank_by_cost(const std::vector<int64_t>& cost) {
    std::vector<size_t> order(cost.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cost[a] > cost[b]; });
    return order;
}

std::vector<size_t> deal(const std::vector<int64_t>& cost, const Shard& s) {
    const std::vector<size_t> order = rank_by_cost(cost);
    std::vector<size_t> mine;
    for (size_t k = size_t(s.index); k < order.size(); k += size_t(s.count)) mine.push_back(order[k]);
    std::sort(mine.begin(), mine.end());
    return mine;
}

std::string shard_dir(const std::string& out_dir, const Shard& s) {
    if (!s.sharded()) return out_dir;
    return (fs::path(out_dir) / cat("shard-", s.index, "-of-", s.count)).string();
}

std::vector<size_t> dedup_groups(const std::vector<std::string>& keys) {
    std::map<std::string, size_t> first;
    std::vector<size_t> rep(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
        rep[i] = i;
        if (keys[i].empty()) continue;
        auto [it, added] = first.emplace(keys[i], i);
        rep[i] = it->second;
    }
    return rep;
}

Journal::Journal(const std::string& out_dir) {
    fs::create_directories(out_dir);
    const std::string path = (fs::path(out_dir) / "journal.jsonl").string();
    f_.reset(std::fopen(path.c_str(), "a"));
    BI_CHECK(f_ != nullptr, path, "cannot open the journal for writing");
}

void Journal::add(const std::vector<const TargetResult*>& rs) {
    if (rs.empty()) return;
    std::string lines;
    for (const TargetResult* r : rs) {
        json j = {{"index", r->index}, {"id", r->id}, {"status", r->status}, {"files", r->files}};
        if (!r->duplicate_of.empty()) j["duplicate_of"] = r->duplicate_of;
        if (!r->error.empty()) j["error"] = r->error;
        lines += j.dump() + "\n";
    }
    std::lock_guard<std::mutex> lock(mu_);
    std::fputs(lines.c_str(), f_.get());
    std::fflush(f_.get());
    ::fsync(fileno(f_.get()));
}

Progress& start_job_progress(Progress* given, std::unique_ptr<Progress>& own, const ProgressOptions& o,
                             const std::vector<TargetResult>& results, int64_t total_tokens,
                             const std::string& model_label, double load_seconds) {
    if (!given) own = std::make_unique<Progress>(o, 0);
    Progress& p = given ? *given : *own;
    int64_t mine = 0;
    for (const auto& r : results) mine += r.status != "elsewhere";
    p.set_total(mine, total_tokens);
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
    std::atomic<size_t> counter{0};
    run_on_workers_pulled(workers, [&]() -> int64_t {
        const size_t i = counter++;
        return i < n ? int64_t(i) : -1;
    }, task);
}

void run_on_workers_pulled(const std::vector<Worker>& workers, const std::function<int64_t()>& next,
                           const std::function<void(const Worker&, size_t)>& task) {
    if (workers.size() == 1) {  // in this thread: the thread count set for the process applies
        set_num_threads(workers[0].threads);
        for (int64_t i = next(); i >= 0; i = next()) task(workers[0], size_t(i));
        return;
    }
    std::atomic<bool> stop{false};
    std::exception_ptr first;
    std::mutex mu;
    std::vector<std::thread> threads;
    for (const Worker& w : workers) {
        threads.emplace_back([&, w] {
            set_num_threads(w.threads);  // this thread's OpenMP team size
            while (!stop) {
                const int64_t i = next();
                if (i < 0) break;
                try {
                    task(w, size_t(i));
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
