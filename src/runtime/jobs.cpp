// Batch-job plumbing shared by embed and predict.
#include "runtime/jobs.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "bioinfer/error.h"
#include "core/threads.h"
#include "io/atomic_file.h"
#include "ops/ops.h"
#include "runtime/target_queue.h"

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

void print_results_summary(const std::string& tool, const std::vector<TargetResult>& results,
                           const std::string& out_dir, bool quiet) {
    std::string line = results_summary(tool, results, out_dir);
    if (quiet) {
        auto first = std::find_if(results.begin(), results.end(),
                                  [](const TargetResult& r) { return r.status == "failed"; });
        if (first == results.end()) return;
        line += cat("; first failure: ", first->id, ": ", first->error);
    }
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
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
    return workers.empty() ? std::vector<Worker>{{0, kHost, num_threads()}} : workers;
}

std::vector<Worker> cpu_workers(int workers, int threads) {
    BI_CHECK(workers >= 1, "--workers", "expected at least 1, got ", workers);
    if (threads <= 0) threads = usable_cpus();
    std::vector<Worker> w;
    for (int i = 0; i < workers; ++i) {
        // the remainder goes to the first workers
        const int t = threads / workers + (i < threads % workers ? 1 : 0);
        w.push_back({i, kHost, std::max(1, t)});
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

namespace {

// The backend a worker's ops run on: on the host, the caller's (the process default, e.g. the
// reference in tests, or its scope's); on an accelerator, that device's backend.
const backend::Backend& worker_backend(const Worker& w) {
    const backend::Backend& caller = ops::current_backend();
    return w.device.is_host() && caller.device.is_host() ? caller : backend::for_device(w.device);
}

}  // namespace

void run_on_workers_pulled(const std::vector<Worker>& workers, const std::function<int64_t()>& next,
                           const std::function<void(const Worker&, size_t)>& task) {
    if (workers.size() == 1) {  // in this thread: the thread count set for the process applies
        set_num_threads(workers[0].threads);
        const ops::BackendScope scope(worker_backend(workers[0]));
        for (int64_t i = next(); i >= 0; i = next()) task(workers[0], size_t(i));
        return;
    }
    std::atomic<bool> stop{false};
    std::exception_ptr first;
    std::mutex mu;
    std::vector<std::thread> threads;
    std::vector<const backend::Backend*> backends;
    for (const Worker& w : workers) backends.push_back(&worker_backend(w));
    for (size_t k = 0; k < workers.size(); ++k) {
        threads.emplace_back([&, w = workers[k], b = backends[k]] {
            set_num_threads(w.threads);  // this thread's OpenMP team size
            const ops::BackendScope scope(*b);  // and its device's kernels
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

double run_job(const JobOptions& opts, const JobSpec& spec, std::vector<TargetResult>& results) {
    using clock = std::chrono::steady_clock;
    auto since = [](clock::time_point t) {
        return std::chrono::duration<double>(clock::now() - t).count();
    };
    const Shard& shard = opts.shard;
    const std::string out_dir = shard_dir(opts.out_dir, shard);
    const std::vector<Worker> workers = workers_or_default(opts.workers);
    // under mpirun (MPI build) with units dealt up front: every rank finishes before any exits
    const std::shared_ptr<void> mpi =
        !spec.mpi_queue && spec.write_outputs && shard.from == "MPI" ? mpi_session() : nullptr;

    // Identical inputs are computed once, on their first record.
    std::vector<std::string> keys(results.size());
    for (size_t i = 0; i < results.size(); ++i)
        if (results[i].status != "failed")
            keys[i] = opts.dedup ? spec.dedup_key(i) : std::to_string(i);
    const std::vector<size_t> rep = dedup_groups(keys);
    std::vector<std::vector<size_t>> members(results.size());  // representative -> its group
    std::vector<size_t> reps;
    for (size_t i = 0; i < results.size(); ++i) {
        if (results[i].status == "failed") continue;
        members[rep[i]].push_back(i);
        if (rep[i] != i)
            results[i].duplicate_of = results[rep[i]].id;
        else
            reps.push_back(i);
    }
    std::vector<std::vector<size_t>> units;
    if (spec.make_units)
        units = spec.make_units(reps);
    else
        for (size_t r : reps) units.push_back({r});
    std::vector<int64_t> cost;
    for (const auto& u : units) {
        int64_t c = 0;
        for (size_t r : u) c += spec.cost(r);
        cost.push_back(c);
    }

    // Records fail at input on shard 0 alone; the others are another shard's until claimed.
    for (auto& r : results)
        if (!(r.status == "failed" && shard.index == 0)) r.status = "elsewhere";
    // Takes unit u's members into this shard: a member whose outputs exist is skipped. Returns
    // whether the unit has a member left to compute.
    const bool check_done = spec.write_outputs && !opts.override_existing && spec.done;
    auto claim = [&](size_t u) {
        bool pending = false;
        for (size_t r : units[u])
            for (size_t m : members[r]) {
                std::optional<nlohmann::json> files = check_done ? spec.done(m) : std::nullopt;
                if (files) {
                    results[m].status = "skipped";
                    results[m].files = std::move(*files);
                } else {
                    results[m].status = "pending";
                    pending = true;
                }
            }
        return pending;
    };
    // Units go largest first. Under MPI with a queue, rank 0 hands them out to whichever rank is
    // free (claimed as they come); otherwise each shard takes its round-robin part now.
    std::unique_ptr<TargetQueue> queue;
    if (spec.mpi_queue && shard.from == "MPI") {
        std::vector<int64_t> order;
        for (size_t u : rank_by_cost(cost)) order.push_back(int64_t(u));
        queue = mpi_target_queue(order);
    }
    std::vector<size_t> todo;
    int64_t total_work = 0;
    if (!queue)
        for (size_t u : deal(cost, shard))
            if (claim(u)) {
                todo.push_back(u);
                for (size_t r : units[u]) total_work += spec.work(r);
            }

    std::unique_ptr<Journal> journal;
    if (spec.write_outputs) {
        std::error_code ec;
        fs::create_directories(out_dir, ec);
        BI_CHECK(!ec && fs::is_directory(out_dir), out_dir,
                 "cannot create output folder: ", ec.message());
        journal = std::make_unique<Journal>(out_dir);
    }
    if (spec.start) spec.start();
    std::unique_ptr<Progress> own;
    Progress& progress = start_job_progress(opts.progress, own, spec.progress, results, total_work,
                                            opts.model_label, opts.load_seconds);
    if (queue) {  // the counts are the whole run's, shared with the other ranks
        progress.set_total(int64_t(results.size()), 0);
        progress.note(
            cat("rank ", shard.index, " of ", shard.count, ": targets handed out by rank 0"));
    }

    std::atomic<size_t> next_todo{0};
    std::mutex claim_mu;
    std::atomic<bool> stopped{false};
    auto next = [&]() -> int64_t {
        if (opts.cancelled) {
            std::lock_guard<std::mutex> lock(claim_mu);  // asked from one worker at a time
            if (stopped || opts.cancelled()) {
                stopped = true;
                return -1;
            }
        }
        if (!queue) {
            const size_t i = next_todo++;
            return i < todo.size() ? int64_t(todo[i]) : -1;
        }
        for (int64_t u = queue->next(); u >= 0; u = queue->next()) {
            std::lock_guard<std::mutex> lock(claim_mu);
            if (claim(size_t(u))) return u;
            for (size_t r : units[size_t(u)])
                for (size_t m : members[r]) progress.skipped(results[m].id, 0);
        }
        return -1;
    };
    const auto t_start = clock::now();
    run_on_workers_pulled(workers, next, [&](const Worker& w, size_t ui) {
        const std::vector<size_t>& unit = units[ui];
        const auto t0 = clock::now();
        const std::string what = spec.label(unit);
        const StageFn stage = [&](const std::string& st) { progress.stage(what, st, w.index); };
        MemberWriter write;
        std::string error;
        try {
            write = spec.unit(w, unit, stage);
        } catch (const std::exception& e) {
            error = error_line(e);
        }
        const double share = since(t0) / double(unit.size());
        std::vector<const TargetResult*> finished;  // journaled together once the unit is written
        for (size_t pos = 0; pos < unit.size(); ++pos) {
            const size_t r = unit[pos];
            for (size_t m : members[r]) {  // the representative and those with the same input
                TargetResult& res = results[m];
                if (res.status != "pending") continue;
                const int64_t work = m == r ? spec.work(r) : 0;
                if (error.empty()) {
                    try {
                        res.files = write(pos, m, stage);
                    } catch (const std::exception& e) {
                        res.error = error_line(e);
                    }
                } else {
                    res.error = error;
                }
                res.status = res.error.empty() ? "ok" : "failed";
                if (spec.run_time == RunTime::UntilWritten)
                    res.seconds = m == r ? since(t0) : 0.0;
                else if (res.status == "ok")
                    res.seconds = m == r ? share : 0.0;
                if (res.status == "ok") {
                    if (spec.journal_when_written) finished.push_back(&res);
                    progress.done(res.id, work, res.seconds, w.index);
                } else {
                    finished.push_back(&res);
                    progress.failed(res.id, res.error, work, w.index);
                }
            }
        }
        if (journal) journal->add(finished);
    });
    const double seconds = since(t_start);
    progress.finish();
    if (stopped) throw Cancelled();
    if (!spec.write_outputs) return seconds;
    if (spec.finish) spec.finish(journal.get());
    nlohmann::json job = spec.job;
    job["model"] = opts.model_label;
    job["workers"] = workers.size();
    job["shard"] = {{"index", shard.index}, {"count", shard.count}, {"from", shard.from}};
    job["input_records"] = results.size();
    job["dedup"] = opts.dedup;
    write_results(out_dir, spec.tool, job, results, seconds);
    return seconds;
}

}  // namespace bioinfer::runtime
