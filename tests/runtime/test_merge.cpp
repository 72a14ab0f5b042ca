// `bioinfer merge` on damaged shards and on output folders it must not write: a shard file that
// is missing, not a file, or corrupt (a bad CRC-32, a truncated npz) fails naming it and leaves
// the output folder as it was (absent, or its files unchanged); an --out-dir that is, lies inside
// or holds a shard is refused before anything is written; merging into an existing output folder
// gives the same bytes as merging into a new one; files in subfolders keep their place.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "io/atomic_file.h"
#include "io/npy.h"

namespace fs = std::filesystem;
using namespace bioinfer;
using nlohmann::json;

namespace {

using test::tree;

void write_bytes(const fs::path& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

struct Merge : test::CliTest {
    // A two-shard embed run of the fixture's cases in run/ (small batches, so that both shards
    // get some), and the fixture's config.
    json config;
    std::string run2() {
        config = json::parse(io::read_file(test::kEsm2Tiny + "/config.json"));
        const std::string fa = fixture_fasta(test::kEsm2Tiny);
        for (int i = 0; i < 2; ++i) {
            const test::Result r = run("embed " + fa + " --weights " + test::kEsm2Tiny +
                                       " --threads 1 --quiet --toks-per-batch 60 --shard " +
                                       std::to_string(i) + "/2 --out-dir " + p("run"));
            EXPECT_EQ(r.rc, 0) << r.err;
        }
        return p("run");
    }
    // The first npz shard `i` wrote, as its manifest.json names it.
    fs::path shard_npz(int i) const {
        const fs::path dir = tmp / "run" / ("shard-" + std::to_string(i) + "-of-2");
        const json man = json::parse(io::read_file((dir / "manifest.json").string()));
        return dir / man["records"][0]["file"].get<std::string>();
    }
    // No merge staging folder is left anywhere under the test's folder.
    void expect_no_staging() const {
        for (auto& e : fs::recursive_directory_iterator(tmp))
            EXPECT_EQ(e.path().filename().string().find(".merge-tmp"), std::string::npos) << e.path();
    }
    // `merge DIR --out-dir out` must fail with one line holding `needle`, and leave the shards'
    // files as they were.
    void expect_refused(const std::string& dirs, const std::string& out, const std::string& needle) {
        const auto before = tree(p("run"));
        const test::Result r = run("merge " + dirs + " --out-dir " + out);
        EXPECT_NE(r.rc, 0) << out;
        EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr: " << r.err;
        EXPECT_EQ(tree(p("run")), before) << out << ": a shard's files changed";
        expect_no_staging();
    }
};

}  // namespace

// A shard's npz gone: the error names it; no output folder appears, and an existing one (an
// earlier merge, and a file of the user's) keeps every byte.
TEST_F(Merge, MissingNpzFailsAndLeavesTheOutputAsItWas) {
    const std::string dir = run2();
    const fs::path npz = shard_npz(1);
    fs::remove(npz);
    expect_clean_failure("merge " + dir, npz.string() + "] listed in results.json but missing");
    EXPECT_FALSE(fs::exists(p("out")));
    expect_no_staging();
    // into missing parent folders: none of them is created
    EXPECT_NE(run("merge " + dir + " --out-dir " + p("deep/er/out")).rc, 0);
    EXPECT_FALSE(fs::exists(p("deep")));

    // an output folder that is there: unchanged
    fs::remove_all(dir);
    run2();
    ASSERT_EQ(run("merge " + dir + " --out-dir " + p("out")).rc, 0);
    write("out/notes.txt", "mine\n");
    const auto before = tree(p("out"));
    fs::remove(shard_npz(0));
    const test::Result r = run("merge " + dir + " --out-dir " + p("out"));
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find(shard_npz(0).string()), std::string::npos) << r.err;
    EXPECT_EQ(tree(p("out")), before);
    expect_no_staging();
}

// A byte flipped in the middle of a member's data (its CRC-32 no longer matches) or the file cut
// short: refused naming the file, whichever format the merge writes; nothing written.
TEST_F(Merge, CorruptNpzIsRefusedNamingTheFile) {
    const std::string dir = run2();
    const fs::path npz = shard_npz(1);
    const std::string good = io::read_file(npz.string());
    // the first member's data: after its .npy header, before the zip's central directory
    const size_t magic = good.find("\x93NUMPY"), cd = good.find("PK\x01\x02");
    ASSERT_NE(magic, std::string::npos);
    ASSERT_NE(cd, std::string::npos);
    const size_t data = magic + 10 + (uint8_t(good[magic + 8]) | uint8_t(good[magic + 9]) << 8);
    ASSERT_LT(data, cd);
    std::string flipped = good;
    flipped[(data + cd) / 2] ^= 0x5a;
    write_bytes(npz, flipped);
    for (const char* format : {"npz", "h5"}) {
        SCOPED_TRACE(format);
        expect_clean_failure("merge " + dir + " --format " + format, npz.string() + "] zip entry '");
        const test::Result r = run("merge " + dir + " --format " + format + " --out-dir " + p("out"));
        EXPECT_NE(r.err.find("CRC-32"), std::string::npos) << r.err;
        EXPECT_FALSE(fs::exists(p("out")));
    }
    write_bytes(npz, good.substr(0, good.size() / 2));
    expect_clean_failure("merge " + dir, npz.string() + "] not an npz file");
    EXPECT_FALSE(fs::exists(p("out")));
    // an npz whose arrays are not the ones manifest.json lists (another record's, say)
    const std::vector<float> other = {1, 2};
    io::write_npz(npz.string(), {{"other", {2}, other.data()}});
    expect_clean_failure("merge " + dir, "manifest.json lists");
    EXPECT_FALSE(fs::exists(p("out")));
    expect_no_staging();
}

// --out-dir a shard folder, inside one, one through a symbolic link or "..", or the run's folder
// (which holds the shards): refused, the shards' results.json and manifest.json unchanged.
TEST_F(Merge, OutDirOverlappingAShardIsRefused) {
    const std::string dir = run2();
    const std::string shard = dir + "/shard-0-of-2";
    expect_refused(dir, shard, "[--out-dir] '" + shard + "' is the input shard '" + shard +
                                   "': merge into a new folder");
    expect_refused(dir, shard + "/", "is the input shard");
    expect_refused(shard + " " + dir + "/shard-1-of-2", dir + "/shard-1-of-2/../shard-0-of-2",
                   "is the input shard");
    expect_refused(dir, shard + "/merged", "is inside the input shard");
    EXPECT_FALSE(fs::exists(shard + "/merged"));
    fs::create_directory_symlink(shard, p("link"));
    expect_refused(dir, p("link"), "is the input shard");
    expect_refused(dir, p("link") + "/x/..", "is the input shard");
    expect_refused(dir, dir, "contains the input shard");
    fs::create_directory_symlink(dir, p("runlink"));
    expect_refused(shard + " " + dir + "/shard-1-of-2", p("runlink") + "/", "contains the input shard");
    // beside the shards is fine
    EXPECT_EQ(run("merge " + dir + " --out-dir " + dir + "/merged").rc, 0);
}

// Predict outputs: a structure file missing or not a regular file is refused before anything is
// written.
TEST_F(Merge, PredictFileMissingOrNotAFileIsRefused) {
    write("two.fa", ">a\nMKTAYIAK\n>b\nGSHMKV\n");
    ASSERT_EQ(run("predict " + p("two.fa") + " --weights " + test::kEsmFoldTiny +
                  " --num-recycles 0 --threads 1 --out-dir " + p("f")).rc, 0);
    fs::rename(p("f/b.pdb"), p("b.pdb"));
    fs::create_directory(p("f/b.pdb"));
    expect_clean_failure("merge " + p("f"), p("f/b.pdb") + "] is not a regular file");
    fs::remove(p("f/b.pdb"));
    expect_clean_failure("merge " + p("f"), p("f/b.pdb") + "] listed in results.json but missing");
    fs::rename(p("b.pdb"), p("f/b.pdb"));
    EXPECT_EQ(run("merge " + p("f") + " --out-dir " + p("out")).rc, 0);
    EXPECT_EQ(io::read_file(p("out/b.pdb")), io::read_file(p("f/b.pdb")));
    expect_no_staging();
}

// A target's files in a subfolder (predict's boltz layout, predictions/<id>/...) land in the same
// subfolder of the merged output.
TEST_F(Merge, TargetFilesInSubfoldersKeepTheirPlace) {
    fs::create_directories(p("b/predictions/a"));
    write("b/predictions/a/a_model_0.cif", "data_a\n");
    write("b/results.json", json({{"tool", "bioinfer predict"},
                                  {"job", {{"input_records", 1}}},
                                  {"targets", {{{"index", 0}, {"id", "a"}, {"status", "ok"},
                                                {"files", {{"structure", "predictions/a/a_model_0.cif"}}}}}}})
                                .dump());
    for (int i = 0; i < 2; ++i) {  // into a new folder, then into that one again
        ASSERT_EQ(run("merge " + p("b") + " --out-dir " + p("out")).rc, 0);
        EXPECT_EQ(io::read_file(p("out/predictions/a/a_model_0.cif")), "data_a\n");
    }
    expect_no_staging();
}

// Merging again into an output folder that is there gives the bytes of a merge into a new one:
// each merged file replaces its namesake (a stale or damaged one too), other files stay.
TEST_F(Merge, IntoAnExistingFolderGivesTheSameBytes) {
    const std::string dir = run2();
    ASSERT_EQ(run("merge " + dir + " --out-dir " + p("new")).rc, 0);
    const auto fresh = tree(p("new"));
    const json man = json::parse(fresh.at("manifest.json"));
    ASSERT_FALSE(man["records"].empty());
    // every record, each with the mean of the last layer, the fixture's width
    const json cases = json::parse(io::read_file(test::kEsm2Tiny + "/cases.json"))["cases"];
    EXPECT_EQ(man["records"].size(), cases.size());
    const std::string mean = "mean_representations_" + config["num_hidden_layers"].dump();
    for (auto& rec : man["records"]) {
        const auto arrays = io::read_npz(p("new/" + rec["file"].get<std::string>()));
        ASSERT_TRUE(arrays.count(mean)) << rec;
        EXPECT_EQ(arrays.at(mean).shape, (Shape{config["hidden_size"].get<int64_t>()}));
    }
    ASSERT_EQ(run("merge " + dir + " --out-dir " + p("new")).rc, 0);
    EXPECT_EQ(tree(p("new")), fresh);
    // a folder holding an older, damaged merge and a file of the user's
    fs::create_directories(p("old"));
    const std::string first = man["records"][0]["file"];
    write("old/" + first, "not an npz");
    write("old/results.json", "{}");
    write("old/notes.txt", "mine\n");
    ASSERT_EQ(run("merge " + dir + " --out-dir " + p("old")).rc, 0);
    auto merged = tree(p("old"));
    EXPECT_EQ(merged["notes.txt"], "mine\n");
    merged.erase("notes.txt");
    EXPECT_EQ(merged, fresh);
    // into missing parent folders, and through a trailing '/'
    ASSERT_EQ(run("merge " + dir + " --out-dir " + p("deep/er/out/")).rc, 0);
    EXPECT_EQ(tree(p("deep/er/out")), fresh);
    expect_no_staging();
}
