// Sharded runs through the binary: --shard parts are disjoint and cover the input, identical
// sequences are computed once, `bioinfer merge` gives the same bytes for 1, 2 and 3 shards (and
// for mpirun -n 1 and -n 2), and a run killed mid-way and restarted ends with the same output.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "cli_util.h"
#include "io/atomic_file.h"
#include "io/npy.h"

namespace fs = std::filesystem;
using namespace bioinfer;
using nlohmann::json;

namespace {

using test::tree;

// Names of the files that differ between two trees ("" when none).
std::string differ(const std::map<std::string, std::string>& a, const std::map<std::string, std::string>& b) {
    std::string d;
    for (auto& [k, v] : a)
        if (!b.count(k) || b.at(k) != v) d += k + " ";
    for (auto& [k, v] : b)
        if (!a.count(k)) d += k + " ";
    return d;
}

// A predict output with the run times (which no two runs share) taken out of the JSON files.
std::map<std::string, std::string> without_times(std::map<std::string, std::string> m) {
    for (auto& [name, bytes] : m)
        if (name.ends_with(".json") && name != "results.json") {
            json j = json::parse(bytes);
            j.erase("runtime_s");
            bytes = j.dump();
        }
    return m;
}

struct Scale : test::CliTest {
    std::string proteome() {
        // 14 records: two exact duplicates (and one only equal in letter case, which ESM's
        // alphabet tells apart), one bad record, lengths spread so the deal matters
        const char* seqs[] = {"MKTAYIAKQRQISFVKSHFSRQ", "GSHMKV", "MLSDEDFKAVFGMTRSAFANLPLWKQQNLKKEKGLF",
                              "MKVLAAGIV", "MQIFVKTLTGKTITLEVEPSDTIENVKAKIQDKEGIPPDQQRLIFAGKQLEDGRTLSDYNIQKESTLHLVLRLRGG",
                              "MKTAYIAKQRQISFVKSHFSRQ", "ACDEFGHIKLMNPQRSTVWY", "MKJL", "PEPTIDE", "GSHMKV",
                              "MADEEKLPPGWEKRMSRSSGRVYYFNHITNASQWERPSG", "MSTNPKPQRKTKRNTNRRPQDVKFPGG",
                              "KVFGRCELAAAMKRHGLDNYRGYSLGNWVCAAKFESNFNTQATNRNTDGSTDYGILQINSRWWCNDGRTPGSRNLCNIPCSALLSSDITASVNCAKKIVSDGNGMNAWVAWRNRCKGTDVQAWIRGCRL",
                              "MKVLAAGIV"};
        std::string fa;
        for (int i = 0; i < 14; ++i) fa += ">p" + std::to_string(i) + "\n" + seqs[i] + "\n";
        write("proteome.fa", fa);
        return p("proteome.fa");
    }
    test::Result ok(const std::string& args, const std::string& env = "", int rc = 2) {
        test::Result r = run(args, env);
        EXPECT_EQ(r.rc, rc) << args << "\n" << r.err;
        return r;
    }
};

}  // namespace

TEST_F(Scale, ShardsPartitionTheInputAndMergeIsTheSameForAnyCount) {
    const std::string fa = proteome();
    const std::string emb = "embed " + fa + " --weights " + test::kEsm2Tiny + " --include mean,per_tok --threads 1 --toks-per-batch 60";
    std::vector<std::map<std::string, std::string>> merged;
    for (int n : {1, 2, 3}) {
        const std::string out = p("run" + std::to_string(n));
        std::set<int64_t> covered;
        int64_t total = 0;
        for (int i = 0; i < n; ++i) {
            ok(emb + " --out-dir " + out + (n > 1 ? " --shard " + std::to_string(i) + "/" + std::to_string(n) : ""), "",
               n == 1 || i == 0 ? 2 : 0);  // the bad record is shard 0's to report
            const fs::path dir = n > 1 ? fs::path(out) / ("shard-" + std::to_string(i) + "-of-" + std::to_string(n)) : fs::path(out);
            const json res = json::parse(io::read_file((dir / "results.json").string()));
            for (auto& t : res["targets"]) {
                EXPECT_TRUE(covered.insert(t["index"].get<int64_t>()).second) << "record in two shards: " << t;
                ++total;
            }
            EXPECT_TRUE(fs::exists(dir / "journal.jsonl"));
        }
        EXPECT_EQ(total, 14);  // disjoint and covering
        EXPECT_EQ(covered.size(), 14u);
        ok("merge " + out + " --out-dir " + p("merged" + std::to_string(n)), "", 0);
        merged.push_back(tree(p("merged" + std::to_string(n))));
        ok("merge " + out + " --format h5 --out-dir " + p("merged_h5_" + std::to_string(n)), "", 0);
    }
    ASSERT_EQ(merged[0].size(), 15u);  // 12 npz (not the bad record), manifest.json, results.json
    EXPECT_EQ(differ(merged[0], merged[1]), "") << "1 vs 2 shards";
    EXPECT_EQ(differ(merged[0], merged[2]), "") << "1 vs 3 shards";
    EXPECT_EQ(differ(tree(p("merged_h5_1")), tree(p("merged_h5_2"))), "");
    EXPECT_EQ(differ(tree(p("merged_h5_1")), tree(p("merged_h5_3"))), "");
    const json res = json::parse(merged[0]["results.json"]);
    EXPECT_EQ(res["exit_status"], 2);
    EXPECT_EQ(res["targets"][7]["status"], "failed");
    for (int i = 0; i < 14; ++i) EXPECT_EQ(res["targets"][i]["index"], i);  // input order
    // duplicates: the later record names the first, and gets the same arrays
    EXPECT_EQ(res["targets"][5]["duplicate_of"], "p0");
    EXPECT_EQ(res["targets"][9]["duplicate_of"], "p1");
    EXPECT_EQ(res["targets"][13]["duplicate_of"], "p3");
    EXPECT_EQ(merged[0]["p5.npz"], merged[0]["p0.npz"]);
    // merging what is not all there says what is missing
    test::Result r = run("merge " + p("run3") + "/shard-0-of-3 " + p("run3") + "/shard-2-of-3 --out-dir " + p("m"));
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("shard(s) 1 of 3 missing"), std::string::npos) << r.err;
    fs::remove(p("run3/shard-1-of-3/results.json"));
    r = run("merge " + p("run3") + " --out-dir " + p("m"));
    EXPECT_NE(r.err.find("not finished (no results.json)"), std::string::npos) << r.err;
}

// Identical sequences run once: the tokens the model processed are those of the distinct ones.
TEST_F(Scale, DuplicatesAreComputedOnce) {
    write("dup.fa", ">a\nMKTAYIAK\n>b\nGSHMKV\n>c\nMKTAYIAK\n>d\nMKTAYIAK\n");
    ok("embed " + p("dup.fa") + " --weights " + test::kEsm2Tiny + " --out-dir " + p("e") + " --log " + p("e.jsonl"), "", 0);
    int64_t tokens = 0;
    std::istringstream log(io::read_file(p("e.jsonl")));
    for (std::string line; std::getline(log, line);) {
        const json e = json::parse(line);
        if (e["event"] == "done") tokens += e["tokens"].get<int64_t>();
    }
    EXPECT_EQ(tokens, (8 + 2) + (6 + 2));
    const json res = json::parse(io::read_file(p("e/results.json")));
    EXPECT_EQ(res["targets"][2]["duplicate_of"], "a");
    EXPECT_EQ(res["targets"][3]["duplicate_of"], "a");
    EXPECT_EQ(io::read_file(p("e/c.npz")), io::read_file(p("e/a.npz")));
    const json man = json::parse(io::read_file(p("e/manifest.json")));
    EXPECT_EQ(man["records"][3]["duplicate_of"], "a");
    // predict: one fold for the three, three structures
    ok("predict " + p("dup.fa") + " --weights " + test::kEsmFoldTiny + " --num-recycles 0 --out-dir " + p("f") + " --log " + p("f.jsonl"), "", 0);
    int folds = 0;
    std::istringstream flog(io::read_file(p("f.jsonl")));
    for (std::string line; std::getline(flog, line);) {
        const json e = json::parse(line);
        folds += e["event"] == "stage" && e["stage"] == "language model";
    }
    EXPECT_EQ(folds, 2);
    for (const char* id : {"a", "c", "d"}) EXPECT_TRUE(fs::exists(p(std::string("f/") + id + ".pdb")));
}

// SIGKILL once the journal shows progress, run the same command again: the same output as a run
// that was never interrupted.
TEST_F(Scale, KilledRunRestartsToTheSameOutput) {
    std::string fa;
    for (int i = 0; i < 10; ++i) {
        std::string s;
        for (int k = 0; k < 100 + 10 * i; ++k) s += "ACDEFGHIKLMNPQRSTVWY"[(k * 7 + i * 3) % 20];
        fa += ">t" + std::to_string(i) + "\n" + s + "\n";
    }
    write("targets.fa", fa);
    const std::string args = "predict " + p("targets.fa") + " --weights " + test::kEsmFoldTiny + " --num-recycles 1 --threads 1";
    ok(args + " --out-dir " + p("whole") + " --quiet", "", 0);

    const pid_t pid = fork();
    if (pid == 0) {
        const std::string cmd = "exec env HF_ENDPOINT=http://127.0.0.1:1 " + test::kBin + " " + args + " --out-dir " +
                                p("killed") + " --quiet";
        execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
        _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
        const std::string j = fs::exists(p("killed/journal.jsonl")) ? io::read_file(p("killed/journal.jsonl")) : "";
        if (std::count(j.begin(), j.end(), '\n') >= 2) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    kill(pid, SIGKILL);
    int st = 0;
    waitpid(pid, &st, 0);
    const std::string journal = io::read_file(p("killed/journal.jsonl"));
    const auto done_before = std::count(journal.begin(), journal.end(), '\n');
    EXPECT_GE(done_before, 2);
    EXPECT_LT(done_before, 10) << "finished before the kill: make the targets longer";
    EXPECT_FALSE(fs::exists(p("killed/results.json")));
    for (auto& e : fs::directory_iterator(p("killed")))  // nothing half-written under a final name
        EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();

    test::Result r = ok(args + " --out-dir " + p("killed"), "", 0);
    const json res = json::parse(io::read_file(p("killed/results.json")));
    EXPECT_EQ(res["counts"]["skipped"].get<int64_t>(), done_before);
    EXPECT_EQ(res["counts"]["ok"].get<int64_t>(), 10 - done_before);
    ok("merge " + p("whole") + " --out-dir " + p("m_whole"), "", 0);
    ok("merge " + p("killed") + " --out-dir " + p("m_killed"), "", 0);
    auto a = without_times(tree(p("m_whole"))), b = without_times(tree(p("m_killed")));
    EXPECT_EQ(a.size(), 10u * 2 + 1);
    EXPECT_EQ(differ(a, b), "");
}

// mpirun -n 2 and -n 1 (each rank a shard, from OpenMPI's environment) merge to the same bytes;
// a Slurm array task finds its shard in SLURM_ARRAY_TASK_*.
TEST_F(Scale, MpiRanksAndSlurmArrayTasksAreShards) {
    const std::string fa = proteome();
    const std::string emb = test::kBin + " embed " + fa + " --weights " + test::kEsm2Tiny +
                            " --include mean,per_tok --threads 1 --toks-per-batch 60 --quiet --out-dir ";
    for (int n : {1, 2}) {
        const std::string cmd = "env HF_ENDPOINT=http://127.0.0.1:1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                                "mpirun --oversubscribe --bind-to none -n " + std::to_string(n) + " " + emb + p("mpi" + std::to_string(n)) +
                                " > " + p("mpi.log") + " 2>&1";
        const int st = std::system(cmd.c_str());
        ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) != 1 && WEXITSTATUS(st) <= 2) << io::read_file(p("mpi.log"));
        ok("merge " + p("mpi" + std::to_string(n)) + " --out-dir " + p("mpim" + std::to_string(n)), "", 0);
    }
    EXPECT_TRUE(fs::exists(p("mpi2/shard-1-of-2/results.json")));
    EXPECT_EQ(differ(tree(p("mpim1")), tree(p("mpim2"))), "");
    // predict under mpirun: rank 0 hands the targets out; the merge equals an unsharded run's
    const std::string fold = test::kBin + " predict " + fa + " --weights " + test::kEsmFoldTiny + " --num-recycles 0 --threads 1 --out-dir ";
    const std::string mpi2 = "env HF_ENDPOINT=http://127.0.0.1:1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                             "mpirun --oversubscribe --bind-to none -n 2 " + fold + p("fold2") + " > " + p("fold.log") + " 2>&1";
    const int st = std::system(mpi2.c_str());
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << io::read_file(p("fold.log"));  // J folds as X
    EXPECT_NE(io::read_file(p("fold.log")).find("targets handed out by rank 0"), std::string::npos)
        << io::read_file(p("fold.log"));
    ok("predict " + fa + " --weights " + test::kEsmFoldTiny + " --num-recycles 0 --threads 1 --out-dir " + p("fold1"), "", 0);
    ok("merge " + p("fold2") + " --out-dir " + p("foldm2"), "", 0);
    ok("merge " + p("fold1") + " --out-dir " + p("foldm1"), "", 0);
    EXPECT_EQ(differ(without_times(tree(p("foldm1"))), without_times(tree(p("foldm2")))), "");
    const json r0 = json::parse(io::read_file(p("fold2/shard-0-of-2/results.json")));
    const json r1 = json::parse(io::read_file(p("fold2/shard-1-of-2/results.json")));
    EXPECT_EQ(r0["counts"]["total"].get<int>() + r1["counts"]["total"].get<int>(), 14);
    ok("embed " + fa + " --weights " + test::kEsm2Tiny + " --out-dir " + p("slurm"),
       "SLURM_ARRAY_TASK_ID=5 SLURM_ARRAY_TASK_MIN=4 SLURM_ARRAY_TASK_COUNT=3", 0);
    EXPECT_TRUE(fs::exists(p("slurm/shard-1-of-3/results.json")));
    test::Result bad = run("embed " + fa + " --weights " + test::kEsm2Tiny + " --out-dir " + p("x") + " --shard 3/3");
    EXPECT_NE(bad.err.find("shard 3 of 3 is out of range"), std::string::npos) << bad.err;
}

// The Slurm example under a stand-in sbatch that runs each array task as Slurm would (its
// SLURM_ARRAY_TASK_* set) and then the merge; and its dry run, which prints what it would submit.
// The Snakemake example for real. Both merge to what one plain run gives.
TEST_F(Scale, SlurmAndSnakemakeExamplesMergeToThePlainRun) {
    const std::string fa = proteome();
    const std::string src = BIOINFER_SOURCE;
    ok("embed " + fa + " --weights " + test::kEsm2Tiny + " --include mean,per_tok --threads 1 --out-dir " + p("plain"));
    ok("merge " + p("plain") + " --format h5 --out-dir " + p("plain_h5"), "", 0);
    ok("merge " + p("plain") + " --out-dir " + p("plain_npz"), "", 0);

    write("sbatch", R"(#!/usr/bin/env bash
# stand-in: runs the job now; an array runs every task with Slurm's variables
echo "$*" >> "$(dirname "$0")/submitted.txt"
array=""; wrap=""
for a in "$@"; do
  case "$a" in --array=*) array="${a#--array=}";; --wrap=*) wrap="${a#--wrap=}";; esac
done
if [ -n "$array" ]; then
  lo=${array%-*}; hi=${array#*-}
  for i in $(seq "$lo" "$hi"); do
    SLURM_ARRAY_TASK_ID=$i SLURM_ARRAY_TASK_MIN=$lo SLURM_ARRAY_TASK_COUNT=$((hi - lo + 1)) bash -c "$wrap" || exit 1
  done
else
  bash -c "$wrap" || exit 1
fi
echo 4242
)");
    fs::permissions(p("sbatch"), fs::perms::owner_all);
    const std::string env = "SBATCH=" + p("sbatch") + " BIOINFER=" + test::kBin + " WEIGHTS=" + test::kEsm2Tiny + " THREADS=1";
    const std::string cmd = "env " + env + " HF_ENDPOINT=http://127.0.0.1:1 bash " + src +
                            "/examples/scale/embed_array.sbatch " + fa + " " + p("slurm") + " 3 2> " + p("slurm.err");
    int st = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << io::read_file(p("slurm.err"));
    const std::string submitted = io::read_file(p("submitted.txt"));
    EXPECT_NE(submitted.find("--array=0-2"), std::string::npos) << submitted;
    EXPECT_NE(submitted.find("--dependency=afterok:4242"), std::string::npos) << submitted;
    EXPECT_TRUE(fs::exists(p("slurm/shards/shard-2-of-3/results.json")));
    EXPECT_EQ(differ(tree(p("slurm/merged")), tree(p("plain_h5"))), "");
    // the dry run prints the submissions and runs nothing
    const std::string dry = "env DRY_RUN=1 MODEL=esm2_t6_8M_UR50D bash " + src + "/examples/scale/embed_array.sbatch " +
                            fa + " " + p("dry") + " 4 2> " + p("dry.err");
    st = std::system(dry.c_str());
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << io::read_file(p("dry.err"));
    const std::string printed = io::read_file(p("dry.err"));
    EXPECT_NE(printed.find("bioinfer weights --download esm2_t6_8M_UR50D"), std::string::npos) << printed;
    EXPECT_NE(printed.find("sbatch --job-name=bioinfer-embed --array=0-3"), std::string::npos) << printed;
    EXPECT_NE(printed.find("--wrap=bioinfer embed " + fa + " --model esm2_t6_8M_UR50D --out-dir " + p("dry") + "/shards"),
              std::string::npos) << printed;
    EXPECT_NE(printed.find("--dependency=afterok:1000"), std::string::npos) << printed;
    EXPECT_FALSE(fs::exists(p("dry/shards")));

    // Snakemake: three shard jobs and the merge
    const std::string snake = "cd " + p("") + " && env HF_ENDPOINT=http://127.0.0.1:1 snakemake -s " + src +
                              "/examples/scale/Snakefile --cores 2 --quiet --config input=" + fa + " weights=" + test::kEsm2Tiny +
                              " out=" + p("snake") + " shards=3 bioinfer=" + test::kBin + " > " + p("snake.log") + " 2>&1";
    st = std::system(snake.c_str());
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << io::read_file(p("snake.log"));
    // embed's default include is mean: compare against a plain run of the same
    ok("embed " + fa + " --weights " + test::kEsm2Tiny + " --threads 1 --out-dir " + p("plain_mean"));
    ok("merge " + p("plain_mean") + " --out-dir " + p("plain_mean_m"), "", 0);
    EXPECT_EQ(differ(tree(p("snake/merged")), tree(p("plain_mean_m"))), "");
}
