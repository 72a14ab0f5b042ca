// The job skeleton (runtime::run_job) on a toy job: every record's value is written to <id>.txt.
// Dedup, units, shards, skipping, failures, the journal and results.json, without a model.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "io/atomic_file.h"
#include "runtime/jobs.h"

using namespace bioinfer;
using namespace bioinfer::runtime;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct Record {
    std::string id, input, error;
};

// A toy job: a unit computes the upper-cased inputs of its representatives; each member's file
// holds its representative's result.
struct ToyJob {
    std::vector<Record> records;
    JobOptions opts;
    JobSpec spec;
    std::vector<TargetResult> results;
    std::atomic<int> units_run{0};
    std::vector<std::vector<size_t>> units_seen;
    std::string fail_unit_of;   // a unit holding this record's input throws
    std::string fail_write_of;  // writing this record's file throws

    ToyJob(std::vector<Record> recs, const std::string& out_dir, size_t batch = 1)
        : records(std::move(recs)) {
        opts.out_dir = out_dir;
        opts.quiet = true;
        opts.model_label = "toy";
        spec.tool = "toy";
        spec.job = {{"what", "test"}};
        spec.progress.label = "toy";
        spec.progress.quiet = true;
        spec.dedup_key = [this](size_t i) { return records[i].input; };
        spec.cost = [this](size_t i) { return int64_t(records[i].input.size()); };
        spec.work = spec.cost;
        if (batch > 1)
            spec.make_units = [batch](const std::vector<size_t>& reps) {
                std::vector<std::vector<size_t>> u;
                for (size_t k = 0; k < reps.size(); ++k) {
                    if (k % batch == 0) u.emplace_back();
                    u.back().push_back(reps[k]);
                }
                return u;
            };
        spec.done = [this](size_t i) -> std::optional<json> {
            if (!fs::exists(path(i))) return std::nullopt;
            return json{{"file", records[i].id + ".txt"}};
        };
        spec.label = [this](const std::vector<size_t>& u) { return records[u[0]].id; };
        spec.unit = unit_of_work<std::vector<std::string>>(
            [this](const Worker&, const std::vector<size_t>& unit, const StageFn& stage) {
                stage("computing");
                ++units_run;
                units_seen.push_back(unit);
                std::vector<std::string> out;
                for (size_t r : unit) {
                    if (records[r].id == fail_unit_of) throw std::runtime_error("unit failed");
                    std::string s = records[r].input;
                    for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
                    out.push_back(s);
                }
                return out;
            },
            [this](std::vector<std::string>& out, size_t pos, size_t m, const StageFn&) -> json {
                if (records[m].id == fail_write_of) throw std::runtime_error("cannot write");
                io::write_file_atomic(path(m), out[pos]);
                return json{{"file", records[m].id + ".txt"}};
            });
        for (size_t i = 0; i < records.size(); ++i)
            results.push_back(target_result(i, records[i].id, "toy", records[i].error));
    }
    std::string path(size_t i) const {
        return (fs::path(shard_dir(opts.out_dir, opts.shard)) / (records[i].id + ".txt")).string();
    }
    void run() { run_job(opts, spec, results); }
};

std::vector<Record> toy_records() {
    return {{"a", "mkv", ""},   {"b", "gg", ""},  {"a2", "mkv", ""}, {"bad", "", "bad letter"},
            {"c", "wwwwy", ""}, {"b2", "gg", ""}, {"d", "p", ""}};
}

std::vector<json> journal_lines(const std::string& dir) {
    std::vector<json> out;
    const std::string text = io::read_file((fs::path(dir) / "journal.jsonl").string());
    size_t p = 0;
    for (size_t q; (q = text.find('\n', p)) != std::string::npos; p = q + 1)
        out.push_back(json::parse(text.substr(p, q - p)));
    return out;
}

class JobSkeleton : public ::testing::Test {
  protected:
    void SetUp() override {
        dir = fs::temp_directory_path() /
              ("bioinfer_job_skeleton_" + std::to_string(::getpid()) + "_" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir);
    }
    void TearDown() override { fs::remove_all(dir); }
    fs::path dir;
};

}  // namespace

TEST_F(JobSkeleton, DuplicatesAreComputedOnceAndWrittenForEach) {
    ToyJob job(toy_records(), dir.string());
    job.run();
    EXPECT_EQ(job.units_run, 4);  // a, b, c, d
    const auto& r = job.results;
    for (size_t i : {0, 1, 2, 4, 5, 6}) EXPECT_EQ(r[i].status, "ok") << r[i].id;
    EXPECT_EQ(r[3].status, "failed");
    EXPECT_EQ(r[3].error, "bad letter");
    EXPECT_EQ(r[2].duplicate_of, "a");
    EXPECT_EQ(r[5].duplicate_of, "b");
    EXPECT_EQ(r[2].seconds, 0.0);  // a duplicate takes no time of its own
    EXPECT_EQ(io::read_file((dir / "a2.txt").string()), "MKV");
    EXPECT_EQ(io::read_file((dir / "b2.txt").string()), "GG");
    EXPECT_EQ(r[0].files, json({{"file", "a.txt"}}));
    EXPECT_EQ(exit_status(r), 2);

    const json res = json::parse(io::read_file((dir / "results.json").string()));
    EXPECT_EQ(res["tool"], "toy");
    EXPECT_EQ(res["job"]["what"], "test");
    EXPECT_EQ(res["job"]["model"], "toy");
    EXPECT_EQ(res["job"]["input_records"], 7);
    EXPECT_EQ(res["counts"]["ok"], 6);
    EXPECT_EQ(res["counts"]["failed"], 1);
    EXPECT_EQ(res["targets"].size(), 7u);
    EXPECT_EQ(res["targets"][2]["duplicate_of"], "a");

    // the journal: every computed member; a unit's members together, after its representative
    const auto lines = journal_lines(dir.string());
    ASSERT_EQ(lines.size(), 6u);
    EXPECT_EQ(lines[0]["id"], "a");
    EXPECT_EQ(lines[1]["id"], "a2");
    EXPECT_EQ(lines[1]["duplicate_of"], "a");
}

TEST_F(JobSkeleton, NoDedupComputesEveryRecord) {
    ToyJob job(toy_records(), dir.string());
    job.opts.dedup = false;
    job.run();
    EXPECT_EQ(job.units_run, 6);
    EXPECT_TRUE(job.results[2].duplicate_of.empty());
}

TEST_F(JobSkeleton, DoneMembersAreSkippedUnlessOverride) {
    {
        ToyJob job(toy_records(), dir.string());
        job.run();
    }
    fs::remove(dir / "b2.txt");  // b's group still has a member to write: b runs again
    ToyJob again(toy_records(), dir.string());
    again.run();
    EXPECT_EQ(again.units_run, 1);
    EXPECT_EQ(again.results[1].status, "skipped");
    EXPECT_EQ(again.results[1].files, json({{"file", "b.txt"}}));
    EXPECT_EQ(again.results[5].status, "ok");
    EXPECT_EQ(again.results[0].status, "skipped");
    EXPECT_EQ(exit_status(again.results), 2);

    ToyJob over(toy_records(), dir.string());
    over.opts.override_existing = true;
    over.run();
    EXPECT_EQ(over.units_run, 4);
    EXPECT_EQ(over.results[0].status, "ok");
}

TEST_F(JobSkeleton, ShardsSplitTheUnitsAndKeepGroupsTogether) {
    std::vector<std::string> status_of(7);
    int units = 0;
    for (int s = 0; s < 2; ++s) {
        ToyJob job(toy_records(), dir.string());
        job.opts.shard = {s, 2, "--shard"};
        job.run();
        units += job.units_run;
        EXPECT_TRUE(fs::exists(dir / ("shard-" + std::to_string(s) + "-of-2") / "results.json"));
        for (size_t i = 0; i < 7; ++i) {
            const std::string& st = job.results[i].status;
            if (st == "elsewhere") continue;
            EXPECT_TRUE(status_of[i].empty()) << job.results[i].id << " in both shards";
            status_of[i] = st + std::to_string(s);
        }
    }
    EXPECT_EQ(units, 4);
    EXPECT_EQ(status_of[3], "failed0");  // failed at input: reported by shard 0 alone
    EXPECT_EQ(status_of[0].back(), status_of[2].back());  // a and its duplicate in one shard
    EXPECT_EQ(status_of[1].back(), status_of[5].back());
    for (const auto& st : status_of) EXPECT_FALSE(st.empty());
}

TEST_F(JobSkeleton, UnitsOfSeveralRecordsWriteEachFromItsOwnPosition) {
    ToyJob job(toy_records(), dir.string(), /*batch=*/3);
    job.run();
    ASSERT_EQ(job.units_run, 2);  // a, b, c | d
    EXPECT_EQ(job.units_seen[0], (std::vector<size_t>{0, 1, 4}));
    EXPECT_EQ(io::read_file((dir / "c.txt").string()), "WWWWY");
    EXPECT_EQ(io::read_file((dir / "b2.txt").string()), "GG");
    EXPECT_EQ(io::read_file((dir / "d.txt").string()), "P");
}

TEST_F(JobSkeleton, FailuresStayWithTheirUnitOrMember) {
    ToyJob job(toy_records(), dir.string());
    job.fail_unit_of = "a";
    job.fail_write_of = "b2";
    job.run();
    EXPECT_EQ(job.results[0].status, "failed");
    EXPECT_EQ(job.results[0].error, "unit failed");
    EXPECT_EQ(job.results[2].status, "failed");  // a's duplicate shares its unit
    EXPECT_EQ(job.results[1].status, "ok");
    EXPECT_EQ(job.results[5].status, "failed");
    EXPECT_EQ(job.results[5].error, "cannot write");
    EXPECT_EQ(job.results[4].status, "ok");
    EXPECT_EQ(journal_lines(dir.string()).size(), 6u);  // failures are journaled too
    EXPECT_EQ(exit_status(job.results), 2);
}

TEST_F(JobSkeleton, ComputeOnlyWritesNothing) {
    ToyJob job(toy_records(), dir.string());
    job.spec.write_outputs = false;
    job.spec.unit = unit_of_work<int>(
        [](const Worker&, const std::vector<size_t>&, const StageFn&) { return 0; },
        [](int&, size_t, size_t, const StageFn&) { return json::object(); });
    job.run();
    EXPECT_FALSE(fs::exists(dir));
    EXPECT_EQ(job.results[0].status, "ok");
    EXPECT_EQ(job.results[2].status, "ok");
}

TEST_F(JobSkeleton, WorkersRunEveryUnitOnce) {
    ToyJob job(toy_records(), dir.string());
    job.opts.workers = cpu_workers(3, 3);
    std::mutex mu;
    auto compute = job.spec.unit;
    job.spec.unit = [&](const Worker& w, const std::vector<size_t>& u, const StageFn& st) {
        std::lock_guard<std::mutex> lock(mu);  // units_seen is not shared-safe
        return compute(w, u, st);
    };
    job.run();
    EXPECT_EQ(job.units_run, 4);
    std::set<size_t> seen;
    for (const auto& u : job.units_seen) seen.insert(u.begin(), u.end());
    EXPECT_EQ(seen, (std::set<size_t>{0, 1, 4, 6}));
    EXPECT_EQ(exit_status(job.results), 2);
}
