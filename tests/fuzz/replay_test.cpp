// Replays every fuzz target over its regression corpus, tests/fuzz/regressions/<target>/: the
// inputs that once made a target fail (each fixed at its cause), and a few seeds. No fuzzer is
// needed; a finding aborts the test binary with the target's description (fuzz_target.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "fuzz_registry.h"

namespace fs = std::filesystem;
using namespace bioinfer::fuzz;

namespace {

std::vector<std::string> target_names() {
    std::vector<std::string> names;
    for (const auto& [name, body] : registry()) names.push_back(name);
    return names;
}

class FuzzRegression : public ::testing::TestWithParam<std::string> {};

TEST_P(FuzzRegression, ReplaysItsCorpusCleanly) {
    const std::string name = GetParam();
    const fs::path dir = fs::path(BIOINFER_FUZZ_REGRESSIONS) / name;
    ASSERT_TRUE(fs::is_directory(dir)) << dir << " is missing: every target keeps a corpus";
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    ASSERT_FALSE(files.empty()) << dir << " is empty";
    for (const auto& f : files) {
        SCOPED_TRACE(f.filename().string());
        std::ifstream in(f, std::ios::binary);
        const std::string data((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
        run_one(name.c_str(), registry().at(name), data);  // aborts on a finding
    }
    std::printf("%s: %zu inputs replayed\n", name.c_str(), files.size());
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzRegression, ::testing::ValuesIn(target_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
