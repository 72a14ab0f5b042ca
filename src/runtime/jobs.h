// What embed and predict share as batch jobs over many targets: the per-target outcome, the
// results.json summary and exit status, skipping done work, the workers that run targets, and
// the skeleton (run_job) that drives a job from its hooks.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bioinfer/device.h"
#include "runtime/progress.h"

namespace bioinfer::runtime {

struct TargetResult {
    std::string id, source;
    std::string status = "pending";  // ok | skipped | failed; "elsewhere": another shard's
    std::string error;
    double seconds = 0;
    nlohmann::json files = nlohmann::json::object();
    int64_t index = 0;         // position in the input
    std::string duplicate_of;  // the record whose identical sequence was computed for this one
};

// The record at input position `index`: "failed" with `error` when it cannot run, else "pending".
TargetResult target_result(size_t index, const std::string& id, const std::string& source, const std::string& error);

// One part of a job split over processes (MPI ranks, Slurm array tasks, --shard I/N).
struct Shard {
    int index = 0, count = 1;  // 0 <= index < count
    std::string from;          // "--shard", "MPI", "Slurm array"; empty when not sharded
    bool sharded() const { return count > 1; }
};

// --shard I/N when given; else the MPI rank and size (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE)
// when launched by mpirun/srun; else the Slurm array task (SLURM_ARRAY_TASK_ID minus
// SLURM_ARRAY_TASK_MIN, of SLURM_ARRAY_TASK_COUNT); else 0/1.
Shard shard_from(const std::string& flag);

// Item indices by cost, largest first (ties in input order).
std::vector<size_t> rank_by_cost(const std::vector<int64_t>& cost);

// The items of shard s: sorted by cost, largest first (ties in input order), and dealt
// round-robin, so every shard gets a similar amount of work. Returns their indices, ascending.
std::vector<size_t> deal(const std::vector<int64_t>& cost, const Shard& s);

// Where a shard writes: out_dir itself when not sharded, else out_dir/shard-I-of-N.
std::string shard_dir(const std::string& out_dir, const Shard& s);

// Groups identical inputs: rep[i] is the first index with the same key (keys[i] empty: no group).
std::vector<size_t> dedup_groups(const std::vector<std::string>& keys);

// journal.jsonl: one line per finished target, appended and flushed to disk once the target's
// outputs are in place, so a killed run leaves a record of what it finished.
class Journal {
public:
    explicit Journal(const std::string& out_dir);
    void add(const TargetResult& r) { add(std::vector<const TargetResult*>{&r}); }
    // Several at once (a batch): one write to disk for all.
    void add(const std::vector<const TargetResult*>& rs);

private:
    std::mutex mu_;
    std::unique_ptr<FILE, int (*)(FILE*)> f_{nullptr, std::fclose};
};

// 0: every target succeeded (or was already done), 1: every target failed, 2: some failed.
int exit_status(const std::vector<TargetResult>& results);

// Writes <out_dir>/results.json (atomically): the job, counts, and every target of this shard in
// input order with its input index, status, error, run time and what it duplicates.
void write_results(const std::string& out_dir, const std::string& tool, const nlohmann::json& job,
                   const std::vector<TargetResult>& results, double seconds);

// One line for the end of a run: "predict: 3 done, 1 skipped, 2 failed (see out/results.json)".
std::string results_summary(const std::string& tool, const std::vector<TargetResult>& results,
                            const std::string& out_dir);
// Prints the run's last line on stderr: the summary; with `quiet` only when a target failed,
// then with the first failure's reason (quiet silences progress, not errors).
void print_results_summary(const std::string& tool, const std::vector<TargetResult>& results,
                           const std::string& out_dir, bool quiet);

// The job's progress: the caller's `given` (it showed the weights loading, whose time is noted
// here) or a new one kept in `own`. Reports the targets already settled before any work (failed
// at input, skipped as done) and sets the totals.
Progress& start_job_progress(Progress* given, std::unique_ptr<Progress>& own, const ProgressOptions& o,
                             const std::vector<TargetResult>& results, int64_t total_tokens,
                             const std::string& model_label, double load_seconds);

// A worker runs targets with its own threads and the model resident. On the CPU, workers split
// the cores and share the one read-only copy of the weights. A worker on an accelerator runs its
// ops on that device's backend (run_on_workers scopes it); loading each device's own copy of the
// weights comes with the first accelerator backend, until then every worker is a host worker.
struct Worker {
    int index = 0;
    Device device;    // the host, or the accelerator whose backend its ops run on
    int threads = 1;  // the OpenMP team of its thread (host work)
};

// `workers` CPU workers over `threads` cores (0: all); each gets threads / workers (at least 1).
std::vector<Worker> cpu_workers(int workers, int threads);

// What every batch job (embed, predict) takes besides its own options.
struct JobOptions {
    std::string out_dir;
    std::string model_label;         // for manifests and results
    bool quiet = false;
    bool override_existing = false;  // compute again targets whose outputs already exist
    std::string log_path;            // progress events as JSON lines
    std::vector<Worker> workers;     // empty: one worker on the process's threads
    Progress* progress = nullptr;    // the caller's (it showed the weights loading); null: own
    double load_seconds = -1;        // the caller's weight loading, noted once options check out
    Shard shard;                     // this process's part of the input (0/1: all of it)
    bool dedup = true;               // compute identical inputs once
    // Asked before each unit starts; true stops the job there (units not started stay pending,
    // and run_job throws Cancelled once the running ones finished). An embedding caller's
    // Ctrl-C.
    std::function<bool()> cancelled;
};

// What run_job throws when opts.cancelled said so.
struct Cancelled : std::runtime_error {
    Cancelled() : std::runtime_error("cancelled") {}
};

// `workers`, or one worker on the process's threads when empty.
std::vector<Worker> workers_or_default(const std::vector<Worker>& workers);

// Runs tasks 0..n-1: each worker takes the next task when it is free (so tasks start in order).
// A worker's thread uses worker.threads threads for its kernels. `task` reports its own failures;
// an exception that escapes it stops the other workers after their current task and is rethrown.
void run_on_workers(const std::vector<Worker>& workers, size_t n,
                    const std::function<void(const Worker&, size_t)>& task);
// The same with the tasks handed out by `next` (a task index, or -1 when none is left).
void run_on_workers_pulled(const std::vector<Worker>& workers, const std::function<int64_t()>& next,
                           const std::function<void(const Worker&, size_t)>& task);

// ---- The job skeleton ----
// A job runs over input records (one TargetResult each, in input order). Records with identical
// inputs form a group whose members share one computation: the first (the representative) is
// computed, and every member gets the outputs written under its own name (the others are
// duplicate_of the representative). Work is done in units (a predict target, an embed batch) of
// one or more representatives; units are dealt to shards by cost, members whose outputs exist are
// skipped, units with a member left run on the workers, each unit's members go to the journal
// once their outputs are in place, and results.json ends the job.

// Reports the stage a unit is in to progress ("language model", "trunk pass 2/4", "writing").
using StageFn = std::function<void(const std::string& stage)>;
// Writes one member's outputs from a computed unit: (position in the unit of the representative
// it shares, the member's input index, stage) -> the files written, as results.json lists them.
// Throws when it cannot write (the member fails, the others go on).
using MemberWriter = std::function<nlohmann::json(size_t pos, size_t member, const StageFn& stage)>;
// Computes a unit (its representatives' input indices) on a worker and returns the writer of its
// members' outputs. Throws when the unit fails (every member left fails with the message).
using UnitOfWork = std::function<MemberWriter(const Worker& w, const std::vector<size_t>& unit,
                                              const StageFn& stage)>;

// A unit of work from typed halves: compute(worker, unit, stage) -> Out, then
// write(out, pos, member, stage) -> files for each member, the unit's Out kept in between.
template <class Out>
UnitOfWork unit_of_work(
    std::function<Out(const Worker&, const std::vector<size_t>&, const StageFn&)> compute,
    std::function<nlohmann::json(Out&, size_t, size_t, const StageFn&)> write) {
    return [compute = std::move(compute), write = std::move(write)](
               const Worker& w, const std::vector<size_t>& unit,
               const StageFn& stage) -> MemberWriter {
        auto out = std::make_shared<Out>(compute(w, unit, stage));
        return [out, write](size_t pos, size_t member, const StageFn& st) {
            return write(*out, pos, member, st);
        };
    };
}

// The run time results.json gives a representative (its duplicates get 0).
enum class RunTime {
    ComputeShare,  // when written: the unit's compute time split evenly over its representatives
    UntilWritten,  // from the unit's start until its outputs are written or it failed
};

// What a job says about itself; run_job does the rest.
struct JobSpec {
    std::string tool;           // results.json's tool ("bioinfer embed")
    nlohmann::json job;         // results.json's job; run_job adds model, workers, shard,
                                // input_records and dedup
    ProgressOptions progress;   // how progress reads
    bool write_outputs = true;  // false: units are only computed (benchmarks): no skip check,
                                // output folder, journal or results.json
    bool mpi_queue = false;     // under mpirun (MPI build): rank 0 hands units out to whichever
                                // rank is free instead of dealing them up front
    bool journal_when_written = true;  // false: members written fine are journaled by `finish`
                                       // (their outputs land in a file committed there)
    RunTime run_time = RunTime::ComputeShare;

    // Record i's input (i not failed): records with the same key are computed once.
    std::function<std::string(size_t i)> dedup_key;
    // A representative's cost (shards get units of similar total cost, largest first) and the
    // work progress counts for it (tokens, residues).
    std::function<int64_t(size_t rep)> cost, work;
    // Groups the representatives (ascending) into units (each a list of representatives), from
    // the whole input so a unit is the same whatever the shards. Null: one unit each.
    std::function<std::vector<std::vector<size_t>>(const std::vector<size_t>& reps)> make_units;
    // A member's files when its outputs exist already (it is skipped), else nullopt. Null: none do.
    std::function<std::optional<nlohmann::json>(size_t member)> done;
    // What progress shows for a unit while it runs.
    std::function<std::string(const std::vector<size_t>& unit)> label;
    // After the plan is made and the output folder and journal exist, before any unit runs.
    std::function<void()> start;
    UnitOfWork unit;
    // After the units (and progress) finished, before results.json: manifests, shared files.
    // Not called when !write_outputs.
    std::function<void(Journal* journal)> finish;
};

// Runs the job on opts.workers over `results` (one per record, in input order: "failed" when it
// cannot run, else "pending"), which it fills in: "ok", "skipped", "failed", or "elsewhere" for
// another shard's. Writes into shard_dir(opts.out_dir, opts.shard) the journal and results.json
// (when spec.write_outputs). Returns the seconds the units took.
double run_job(const JobOptions& opts, const JobSpec& spec, std::vector<TargetResult>& results);

}  // namespace bioinfer::runtime
