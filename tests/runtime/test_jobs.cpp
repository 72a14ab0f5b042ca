// Batch-job behaviour of embed and predict through the binary: a bad record fails alone (exit 2,
// results.json), finished targets are skipped unless --override, workers give the same outputs,
// progress shows as timestamped lines, as JSON lines (--log) and live on a terminal (checked under
// a pseudo-terminal), and other tools' flag spellings work.
#include <gtest/gtest.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "cli_util.h"
#include "io/atomic_file.h"
#include "io/h5.h"
#include "io/npy.h"

namespace fs = std::filesystem;
using namespace bioinfer;
using nlohmann::json;

namespace {

struct Jobs : test::CliTest {
    json results(const std::string& dir) const { return json::parse(io::read_file(p(dir + "/results.json"))); }
};

// Runs the binary on a pseudo-terminal; returns everything it wrote there.
std::string run_on_pty(const std::vector<std::string>& args) {
    int master = -1;
    winsize ws{};
    ws.ws_col = 200;
    ws.ws_row = 40;
    const pid_t pid = forkpty(&master, nullptr, nullptr, &ws);
    if (pid == 0) {
        std::vector<char*> argv;
        std::string bin = test::kBin;
        argv.push_back(bin.data());
        std::vector<std::string> copy = args;
        for (auto& a : copy) argv.push_back(a.data());
        argv.push_back(nullptr);
        setenv("HF_ENDPOINT", "http://127.0.0.1:1", 1);
        execv(bin.c_str(), argv.data());
        _exit(127);
    }
    std::string out;
    char buf[4096];
    for (;;) {
        const ssize_t n = read(master, buf, sizeof buf);
        if (n <= 0) break;  // EIO once the child has exited
        out.append(buf, size_t(n));
    }
    int st = 0;
    waitpid(pid, &st, 0);
    close(master);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << out;
    return out;
}

}  // namespace

TEST_F(Jobs, MixedInputsRunTheGoodRecordsAndExitTwo) {
    write("mixed.fa", ">ok\nMKV\n>bad\nMKJV\n>x\nMKLL\n>x\nMKV\n");
    test::Result r = run("embed " + p("mixed.fa") + " --weights " + test::kEsm2Tiny + " --out-dir " + p("out"));
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_NE(r.err.find("failed: bad: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("2 done, 2 failed"), std::string::npos) << r.err;
    const json res = results("out");
    EXPECT_EQ(res["exit_status"], 2);
    EXPECT_EQ(res["counts"]["ok"], 2);
    EXPECT_EQ(res["counts"]["failed"], 2);
    const auto& t = res["targets"];
    ASSERT_EQ(t.size(), 4u);  // input order
    EXPECT_EQ(t[0]["status"], "ok");
    EXPECT_EQ(t[1]["status"], "failed");
    EXPECT_NE(t[1]["error"].get<std::string>().find("residue 'J' at position 3"), std::string::npos);
    EXPECT_EQ(t[2]["status"], "ok");
    EXPECT_EQ(t[3]["status"], "failed");
    EXPECT_NE(t[3]["error"].get<std::string>().find("duplicate record id 'x'"), std::string::npos);
    EXPECT_TRUE(fs::exists(p("out/ok.npz")) && fs::exists(p("out/x.npz")) && !fs::exists(p("out/bad.npz")));
    EXPECT_EQ(json::parse(io::read_file(p("out/manifest.json")))["records"].size(), 2u);

    // predict: a bad letter and a target beyond the memory budget fail, the other folds
    write("fold.fa", ">a\nMKTAYIAK\n>b\nMK*VL\n>long\n" + std::string(3000, 'A') + "\n");
    r = run("predict " + p("fold.fa") + " --weights " + test::kEsmFoldTiny + " --num-recycles 0 --max-memory 1 --out-dir " +
            p("fold"));
    EXPECT_EQ(r.rc, 2) << r.err;
    const json fr = results("fold");
    EXPECT_EQ(fr["targets"][0]["status"], "ok");
    EXPECT_EQ(fr["targets"][1]["status"], "failed");
    EXPECT_EQ(fr["targets"][2]["status"], "failed");
    EXPECT_NE(fr["targets"][2]["error"].get<std::string>().find("GiB to fold"), std::string::npos);
    EXPECT_TRUE(fs::exists(p("fold/a.pdb")) && !fs::exists(p("fold/long.pdb")));

    // every target failing while running (its output path is taken by a folder): exit 1
    fs::create_directories(p("taken/seq.npz"));
    r = run("embed MKV --weights " + test::kEsm2Tiny + " --out-dir " + p("taken"));
    EXPECT_EQ(r.rc, 1) << r.err;
    EXPECT_EQ(results("taken")["targets"][0]["status"], "failed");
}

TEST_F(Jobs, FinishedTargetsAreSkippedUnlessOverride) {
    write("two.fa", ">a\nMKTAYIAK\n>b\nGSHMKV\n");
    const std::string fold = "predict " + p("two.fa") + " --weights " + test::kEsmFoldTiny + " --num-recycles 0 --out-dir " + p("f");
    ASSERT_EQ(run(fold).rc, 0);
    const auto t_a = fs::last_write_time(p("f/a.pdb"));
    fs::remove(p("f/b.json"));  // b looks unfinished (its confidence file is written last)
    test::Result r = run(fold);
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(results("f")["targets"][0]["status"], "skipped");
    EXPECT_EQ(results("f")["targets"][1]["status"], "ok");
    EXPECT_EQ(fs::last_write_time(p("f/a.pdb")), t_a);
    EXPECT_TRUE(fs::exists(p("f/b.json")));
    r = run(fold + " --override");
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(results("f")["counts"]["ok"], 2);

    // embed, npz: a record is done when its npz holds every requested array
    const std::string emb = "embed " + p("two.fa") + " --weights " + test::kEsm2Tiny + " --out-dir " + p("e");
    ASSERT_EQ(run(emb + " --include mean").rc, 0);
    EXPECT_EQ(run(emb + " --include mean").rc, 0);
    EXPECT_EQ(results("e")["counts"]["skipped"], 2);
    EXPECT_EQ(json::parse(io::read_file(p("e/manifest.json")))["records"].size(), 2u);
    EXPECT_EQ(run(emb + " --include mean,bos").rc, 0);  // bos is missing: computed again
    EXPECT_EQ(results("e")["counts"]["ok"], 2);

    // embed, h5: records already in embeddings.h5 are carried over into the new file
    write("three.fa", ">a\nMKTAYIAK\n>b\nGSHMKV\n>c\nMKV\n");
    const std::string h5 = " --weights " + test::kEsm2Tiny + " --format h5 --include mean";
    ASSERT_EQ(run("embed " + p("two.fa") + h5 + " --out-dir " + p("h")).rc, 0);
    EXPECT_EQ(run("embed " + p("three.fa") + h5 + " --out-dir " + p("h")).rc, 0);
    EXPECT_EQ(results("h")["counts"]["skipped"], 2);
    EXPECT_EQ(results("h")["counts"]["ok"], 1);
    ASSERT_EQ(run("embed " + p("three.fa") + h5 + " --out-dir " + p("h_fresh")).rc, 0);
    for (const char* id : {"/a", "/b", "/c"}) {
        Shape s1, s2;
        EXPECT_EQ(io::h5_read(p("h/embeddings.h5"), id, &s1), io::h5_read(p("h_fresh/embeddings.h5"), id, &s2)) << id;
        EXPECT_EQ(s1, s2);
    }
}

// Two workers with one thread each compute what one worker with one thread computes, bit for bit.
TEST_F(Jobs, WorkersGiveTheSameOutputs) {
    std::string fa;
    const char* seqs[] = {"MKTAYIAKQRQISFVKSHFSRQ", "GSHMKV", "MLSDEDFKAVFGMTRSAFANLPLWKQQNLKKEKGLF",
                          "MKVLAAGIV", "MQIFVKTLTGKTITLEVEPSDTIENVKAKIQDKEGIPPDQQRLIFAGKQLEDGRTLSDYNIQKESTLHLVLRLRGG"};
    for (int i = 0; i < 5; ++i) fa += ">s" + std::to_string(i) + "\n" + seqs[i] + "\n";
    write("five.fa", fa);
    const std::string emb = "embed " + p("five.fa") + " --weights " + test::kEsm2Tiny + " --include per_tok,contacts --toks-per-batch 40";
    ASSERT_EQ(run(emb + " --threads 1 --out-dir " + p("w1")).rc, 0);
    test::Result r = run(emb + " --threads 2 --workers 2 --out-dir " + p("w2"));
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(results("w2")["job"]["workers"], 2);
    for (int i = 0; i < 5; ++i) {
        const std::string f = "/s" + std::to_string(i) + ".npz";
        EXPECT_EQ(io::read_file(p("w1") + f), io::read_file(p("w2") + f)) << f;
    }
    const std::string fold = "predict " + p("five.fa") + " --weights " + test::kEsmFoldTiny + " --num-recycles 1";
    ASSERT_EQ(run(fold + " --threads 1 --out-dir " + p("f1")).rc, 0);
    ASSERT_EQ(run(fold + " --threads 2 --workers 2 --out-dir " + p("f2")).rc, 0);
    for (int i = 0; i < 5; ++i) {
        const std::string f = "/s" + std::to_string(i) + ".pdb";
        EXPECT_EQ(io::read_file(p("f1") + f), io::read_file(p("f2") + f)) << f;
    }
    EXPECT_NE(run(fold + " --workers 0 --out-dir " + p("f3")).err.find("--workers"), std::string::npos);
}

TEST_F(Jobs, PlainProgressLinesAndJsonLog) {
    write("two.fa", ">a\nMKTAYIAK\n>b\nMK*VL\n>c\nGSHMKV\n");
    test::Result r = run("predict " + p("two.fa") + " --weights " + test::kEsmFoldTiny + " --num-recycles 1 --out-dir " + p("f") +
                         " --log " + p("events.jsonl"));
    EXPECT_EQ(r.rc, 2) << r.err;
    // stderr is a file here: timestamped lines, never a carriage return
    EXPECT_EQ(r.err.find('\r'), std::string::npos);
    std::istringstream lines(r.err);
    std::string line;
    const std::regex stamped(R"(^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d predict: .*)");
    int n = 0;
    bool stage = false, summary = false, failure = false, loaded = false;
    while (std::getline(lines, line)) {
        if (line.rfind("predict: ", 0) == 0) continue;  // the closing summary
        EXPECT_TRUE(std::regex_match(line, stamped)) << line;
        stage |= line.find("a (8 aa): language model") != std::string::npos;
        loaded |= line.find("predict: loaded " + test::kEsmFoldTiny + " in ") != std::string::npos;
        failure |= line.find("failed: b: ") != std::string::npos;
        summary |= line.find("3/3 targets, 1 failed") != std::string::npos && line.find(" in ") != std::string::npos;
        ++n;
    }
    EXPECT_TRUE(stage && summary && failure && loaded) << r.err;
    // the log: one JSON object per line, every event
    std::istringstream log(io::read_file(p("events.jsonl")));
    std::vector<json> ev;
    while (std::getline(log, line)) ev.push_back(json::parse(line));
    ASSERT_GE(ev.size(), 6u);
    EXPECT_EQ(ev.front()["event"], "start");
    EXPECT_EQ(ev.front()["total"], 3);
    EXPECT_EQ(ev.back()["event"], "finish");
    EXPECT_EQ(ev.back()["done"], 2);
    EXPECT_EQ(ev.back()["failed"], 1);
    std::set<std::string> stages;
    for (auto& e : ev)
        if (e["event"] == "stage" && e["target"] == "a (8 aa)") stages.insert(e["stage"]);
    EXPECT_EQ(stages, (std::set<std::string>{"language model", "trunk pass 1/2", "trunk pass 2/2",
                                             "structure module and heads", "writing"}));
    // --quiet: no progress on stderr, the log still written; a failure is still reported, in
    // one line with the counts and its reason (quiet silences progress, not errors)
    fs::remove(p("events.jsonl"));
    r = run("predict " + p("two.fa") + " --weights " + test::kEsmFoldTiny + " --num-recycles 0 --out-dir " + p("g") +
            " --quiet --log " + p("events.jsonl"));
    EXPECT_EQ(r.err, "predict: 2 done, 1 failed (" + p("g/results.json") + "); first failure: b: [" +
                         p("two.fa") + ":3: record 'b'] character '*' at position 3 is not an "
                         "amino-acid letter or ':' (chain break)\n");
    EXPECT_TRUE(fs::exists(p("events.jsonl")));
    write("good.fa", ">a\nMKTAYIAK\n");
    r = run("predict " + p("good.fa") + " --weights " + test::kEsmFoldTiny +
            " --num-recycles 0 --quiet --out-dir " + p("h"));
    EXPECT_EQ(r.rc, 0);
    EXPECT_EQ(r.err, "");
}

TEST_F(Jobs, TerminalProgressRedrawsOneLine) {
    write("two.fa", ">a\nMKTAYIAK\n>b\nGSHMKV\n");
    const std::string out = run_on_pty({"predict", p("two.fa"), "--weights", test::kEsmFoldTiny, "--num-recycles", "0",
                                        "--out-dir", p("f")});
    // a bar redrawn in place with "\r" and erase-to-end-of-line, counts, the final state
    EXPECT_NE(out.find("\rpredict ["), std::string::npos) << out;
    EXPECT_NE(out.find("\x1b[K"), std::string::npos) << out;
    EXPECT_NE(out.find("] 2/2 targets"), std::string::npos) << out;
    EXPECT_NE(out.find("[########################]"), std::string::npos) << out;
    EXPECT_FALSE(std::regex_search(out, std::regex(R"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d predict:)"))) << out;
    EXPECT_TRUE(fs::exists(p("f/a.pdb")) && fs::exists(p("f/b.pdb")));
}

TEST_F(Jobs, OtherToolsFlagSpellings) {
    test::Result r = run("predict MKTAYIAK --weights " + test::kEsmFoldTiny +
                         " --out_dir " + p("b") + " --output_format mmcif --recycling_steps 0 --write_full_pae");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(fs::exists(p("b/seq.cif")) && fs::exists(p("b/seq_pae.npy")));
    EXPECT_EQ(json::parse(io::read_file(p("b/seq.json")))["num_recycles"], 0);
    r = run("embed MKV --weights " + test::kEsm2Tiny + " --out_dir " + p("e") + " --repr_layers 0 --toks_per_batch 100" +
            " --truncation_seq_length 2 --include per_tok");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(io::read_npz(p("e/seq.npz"))["representations_0"].shape, (Shape{2, 32}));
    r = run("predict MKV --weights " + test::kEsmFoldTiny + " --out-dir " + p("x") + " --out_dir " + p("y"));
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("given twice"), std::string::npos) << r.err;
}
