// The CLI test fixture: runs the real binary in a fresh temporary folder and checks that bad
// inputs fail cleanly (one error line, non-zero exit, no output files).
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "io/atomic_file.h"

namespace bioinfer::test {

namespace fs = std::filesystem;

inline const std::string kBin = BIOINFER_BIN;
// The tiny random-weight checkpoints the CLI tests run.
inline const std::string kEsm2Tiny = std::string(BIOINFER_FIXTURES) + "/esm2_tiny";
inline const std::string kEsmFoldTiny = std::string(BIOINFER_FIXTURES) + "/esmfold_tiny";

// Every file under dir, relative path -> bytes.
inline std::map<std::string, std::string> tree(const fs::path& dir) {
    std::map<std::string, std::string> m;
    for (auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file()) m[fs::relative(e.path(), dir).string()] = io::read_file(e.path().string());
    return m;
}

struct Result {
    int rc = -1;
    std::string err;
};

struct CliTest : ::testing::Test {
    fs::path tmp;
    std::string bin = kBin;  // the binary run() runs
    void SetUp() override {
        tmp = fs::temp_directory_path() /
              ("bioinfer_cli_" + std::to_string(getpid()) + "_" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(tmp);
        fs::create_directories(tmp);
    }
    void TearDown() override { fs::remove_all(tmp); }
    std::string p(const std::string& n) const { return (tmp / n).string(); }

    // `cwd`: the folder the command runs in (default: the test's own).
    Result run(const std::string& args, const std::string& env = "",
               const std::string& out = "/dev/null", const std::string& cwd = "") const {
        const std::string errf = p("stderr.txt");
        // never the real hub (a closed local port unless a test serves one), never the user's cache
        const std::string cmd = (cwd.empty() ? std::string() : "cd '" + cwd + "' && ") + "env -u HF_HOME -u HF_HUB_CACHE -u HF_HUB_OFFLINE -u HF_TOKEN -u XDG_CACHE_HOME -u BOLTZ_CACHE "
                                "-u BOLTZ_MSA_USERNAME -u BOLTZ_MSA_PASSWORD -u MSA_API_KEY_VALUE HOME=" +
                                p("home") + " HF_ENDPOINT=http://127.0.0.1:1 " + env + " " + bin + " " + args +
                                " > " + out + " 2> " + errf + " < /dev/null";
        int st = std::system(cmd.c_str());
        Result r;
        r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        r.err = io::read_file(errf);
        return r;
    }
    void write(const std::string& name, const std::string& text) const {
        std::ofstream(p(name)) << text;
    }
    // A Hugging Face hub cache entry under tmp/<cache> for `repo` ("org/name"): refs/main names
    // revision `rev`, whose snapshot links to every file of the folder `from`.
    void hub_snapshot(const std::string& cache, const std::string& repo, const std::string& rev,
                      const std::string& from) const {
        const fs::path base = tmp / cache / ("models--" + repo.substr(0, repo.find('/')) + "--" + repo.substr(repo.find('/') + 1));
        fs::create_directories(base / "snapshots" / rev);
        for (auto& e : fs::directory_iterator(from)) fs::create_symlink(e.path(), base / "snapshots" / rev / e.path().filename());
        fs::create_directories(base / "refs");
        std::ofstream(base / "refs" / "main") << rev;
    }
    // A parity fixture's cases (cases.json) as a FASTA file; `description` follows each id.
    std::string fixture_fasta(const std::string& fixture_dir, const std::string& description = "") const {
        auto j = nlohmann::json::parse(io::read_file(fixture_dir + "/cases.json"));
        std::string fa;
        for (auto& c : j["cases"])
            fa += ">" + c["id"].get<std::string>() + description + "\n" + c["sequence"].get<std::string>() + "\n";
        write("cases.fa", fa);
        return p("cases.fa");
    }
    // A bad input must fail with one line naming `needle` and leave no file in out/.
    void expect_clean_failure(const std::string& args, const std::string& needle) const {
        Result r = run(args + " --out-dir " + p("out"));
        EXPECT_NE(r.rc, 0) << args;
        EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr: " << r.err;
        EXPECT_TRUE(!fs::exists(p("out")) || fs::is_empty(p("out"))) << args;
    }
};


}  // namespace bioinfer::test
