// The embed pipeline's pieces (runtime/batching.h, runtime/embed_pipeline.h): batches under a
// token budget, the layers and outputs a user asks for, and records collected from FASTA input
// with their errors carried per record.
#include <gtest/gtest.h>

#include "runtime/batching.h"
#include "runtime/embed_pipeline.h"
#include "test_util.h"

using namespace bioinfer;
using test::error_of;
using test::expect_contains;
using test::TempDir;
using test::write_bytes;

TEST(Batching, BudgetAndCoverage) {
    std::vector<int64_t> len{10, 300, 20, 300, 5, 1000};
    auto b = runtime::make_batches(len, 700);
    std::vector<int> seen(len.size(), 0);
    for (auto& batch : b) {
        int64_t sum = 0;
        for (size_t i : batch) {
            seen[i]++;
            sum += len[i];
        }
        EXPECT_TRUE(batch.size() == 1 || sum <= 700);  // real tokens: batches run packed
    }
    for (int s : seen) EXPECT_EQ(s, 1);
    EXPECT_EQ(b[0], std::vector<size_t>{5});  // longest first, alone over budget
    // 300 + 300 + 20 + 10 + 5 = 635 fits one packed batch (padded it would count 5 x 300).
    EXPECT_EQ(b.size(), 2u);
}

TEST(EmbedPipeline, LayersIncludeAndInputs) {
    EXPECT_EQ(runtime::resolve_layers({-1, 0, 2, -4}, 3), (std::vector<int>{3, 0, 2}));
    expect_contains(error_of([] { runtime::resolve_layers({4}, 3); }), "layer 4 outside");
    runtime::EmbedOptions o;
    runtime::parse_include("per_tok,contacts", o);
    EXPECT_TRUE(o.per_tok && o.contacts && !o.mean);
    expect_contains(error_of([&] { runtime::parse_include("mean,foo", o); }), "unknown output 'foo'");
    EXPECT_EQ(runtime::safe_file_stem("sp|P1/x"), "sp|P1_x");
    EXPECT_EQ(runtime::safe_file_stem(".."), "_.");
    TempDir d;
    write_bytes(d / "dup.fa", ">a\nMK\n>a\nMV\n");
    // a duplicate does not stop the others: it carries its error
    auto dup = runtime::collect_records(d / "dup.fa", 1022);
    ASSERT_EQ(dup.size(), 2u);
    EXPECT_EQ(dup[0].error, "");
    expect_contains(dup[1].error, "duplicate record id 'a'");
    write_bytes(d / "bad.fa", ">a\nMK\n>b\nMKJ\n");
    expect_contains(runtime::collect_records(d / "bad.fa", 1022)[1].error, "residue 'J' at position 3");
    write_bytes(d / "long.fa", ">x\nMKVLA\n");
    auto r = runtime::collect_records(d / "long.fa", 3);
    EXPECT_EQ(r[0].tokens.size(), 3u);
    EXPECT_EQ(r[0].original_length, 5);
    auto bare = runtime::collect_records("MKV", 1022);
    EXPECT_EQ(bare[0].id, "seq");
    expect_contains(error_of([&] { runtime::collect_records(d / "nothing.fa", 1022); }),
                    "no such file");
}
