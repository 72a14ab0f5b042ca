// The MSA server client against a local stand-in for the ColabFold MMseqs2 API (msa_server.h):
// unpaired and paired MSAs in boltz's CSV, the cache, authentication, and every failure (a job
// that fails, a server that does not answer in time, rate limits, a cut download, offline mode)
// ending in one line with nothing kept. The expected CSVs follow boltz's compute_msa by hand.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "bioinfer/error.h"
#include "io/archive.h"
#include "msa_server.h"
#include "runtime/msa_server.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace bioinfer;
using test::ColabFoldServer;
using namespace std::string_literals;

namespace {

struct MsaClient : ::testing::Test {
    ColabFoldServer server;
    test::TempDir tmp;
    runtime::MsaServerOptions opts() const {
        runtime::MsaServerOptions o;
        o.url = server.url();
        o.cache_dir = tmp / "cache";
        o.poll_s = 0.01;
        o.retry_wait_s = 0.01;
        o.request_timeout_s = 5;
        o.retries = 2;
        return o;
    }
    size_t cached() const {
        if (!fs::exists(tmp / "cache")) return 0;
        size_t n = 0;
        for (auto& e : fs::directory_iterator(tmp / "cache")) n += e.is_regular_file();
        return n;
    }
};

TEST_F(MsaClient, UnpairedMsaIsUnirefThenEnvironmentalRowsAsBoltzWritesThem) {
    server.set_hits("MKVL", {">u1\nMRVL\n>u2\nMK-L\n", ">e1\nMKIL\n"});
    server.polls_before_complete(2);
    const auto csv = runtime::server_msa_csvs({"MKVL"}, opts());
    ASSERT_EQ(csv.size(), 1u);
    // uniref's block (query, hits), then the environmental block (its query again, hits)
    EXPECT_EQ(csv[0], "key,sequence\n-1,MKVL\n-1,MRVL\n-1,MK-L\n-1,MKVL\n-1,MKIL");
    EXPECT_EQ(server.count("POST /ticket/msa mode=env"), 1);
    EXPECT_GE(server.count("GET /ticket/job0"), 2);
    EXPECT_EQ(server.count("GET /result/download/job0"), 1);
    EXPECT_EQ(server.count("POST /ticket/pair"), 0);  // one sequence: nothing to pair
}

TEST_F(MsaClient, PairedRowsLeadWithTheirPairingKeysAndTheQueryOnce) {
    const std::vector<std::string> seqs = {"MKVL", "GGAW"};
    server.set_hits("MKVL", {">u1\nMRVL\n", ""});
    server.set_hits("GGAW", {">u1\nGGAF\n", ">e1\nGCAW\n"});
    // row 1 pairs in both chains; row 2 only in the second (all gaps in the first: dropped there)
    server.set_pairs(seqs, {">p1\nMRVV\n>p2\n----\n", ">p1\nGGAY\n>p2\nGGAA\n"});
    const auto csv = runtime::server_msa_csvs(seqs, opts());
    ASSERT_EQ(csv.size(), 2u);
    EXPECT_EQ(csv[0], "key,sequence\n0,MKVL\n1,MRVV\n-1,MRVL\n-1,MKVL");
    EXPECT_EQ(csv[1], "key,sequence\n0,GGAW\n1,GGAY\n2,GGAA\n-1,GGAF\n-1,GGAW\n-1,GCAW");
    EXPECT_EQ(server.count("POST /ticket/pair mode=pairgreedy-env"), 1);
    EXPECT_EQ(server.count("POST /ticket/msa mode=env"), 1);
    // complete pairing is its own mode
    auto o = opts();
    o.pairing = "complete";
    runtime::server_msa_csvs(seqs, o);
    EXPECT_EQ(server.count("POST /ticket/pair mode=paircomplete-env"), 1);
    o.pairing = "best";
    test::expect_contains(test::error_of([&] { runtime::server_msa_csvs(seqs, o); }),
                          "expected greedy or complete");
}

TEST_F(MsaClient, AnswersAreCachedBySequenceSoARerunAsksNothing) {
    runtime::server_msa_csvs({"MKVL", "GGAW"}, opts());
    const size_t asked = server.requests().size();
    EXPECT_EQ(cached(), 4u);  // two unpaired answers, two paired
    const auto again = runtime::server_msa_csvs({"MKVL", "GGAW"}, opts());
    EXPECT_EQ(server.requests().size(), asked);
    // a new partner: the pair is asked anew, only the new chain's unpaired MSA is searched
    runtime::server_msa_csvs({"MKVL", "PPPW"}, opts());
    const auto subs = server.submitted();
    ASSERT_GE(subs.size(), 2u);
    EXPECT_EQ(subs[subs.size() - 2], (std::vector<std::string>{"MKVL", "PPPW"}));
    EXPECT_EQ(subs.back(), (std::vector<std::string>{"PPPW"}));
    // offline, the cache still serves
    auto o = opts();
    o.offline = true;
    EXPECT_EQ(runtime::server_msa_csvs({"MKVL", "GGAW"}, o), again);
}

TEST_F(MsaClient, OfflineRefusesBeforeAnyRequest) {
    auto o = opts();
    o.offline = true;
    const std::string err = test::error_of([&] { runtime::server_msa_csvs({"MKVL"}, o); });
    test::expect_contains(err, "offline");
    test::expect_contains(err, "not in the MSA cache");
    EXPECT_TRUE(server.requests().empty());
}

TEST_F(MsaClient, AJobTheServerFailsIsOneLineAndNothingIsKept) {
    server.polls_before_complete(1);
    server.job_fails();
    const std::string err = test::error_of([&] { runtime::server_msa_csvs({"MKVL"}, opts()); });
    test::expect_contains(err, "MSA server " + server.url());
    test::expect_contains(err, "answered ERROR");
    EXPECT_EQ(err.find('\n'), std::string::npos);
    EXPECT_EQ(cached(), 0u);
    server.answer_submissions("MAINTENANCE", 1);
    test::expect_contains(test::error_of([&] { runtime::server_msa_csvs({"MKVL"}, opts()); }),
                          "under maintenance");
}

TEST_F(MsaClient, RateLimitAnswersAreWaitedOutThenGivenUp) {
    server.answer_submissions("RATELIMIT", 2);
    EXPECT_NO_THROW(runtime::server_msa_csvs({"MKVL"}, opts()));
    EXPECT_EQ(server.count("POST /ticket/msa"), 3);
    server.answer_submissions("429", 1);  // HTTP's own rate-limit status
    EXPECT_NO_THROW(runtime::server_msa_csvs({"GGAW"}, opts()));
    // a server that keeps refusing: given up after max_wait_s
    server.answer_submissions("RATELIMIT", 1000000);
    auto o = opts();
    o.max_wait_s = 0.2;
    const std::string err = test::error_of([&] { runtime::server_msa_csvs({"PPPW"}, o); });
    test::expect_contains(err, "RATELIMIT");
    test::expect_contains(err, "given up");
    EXPECT_EQ(cached(), 2u);  // the two that arrived
}

TEST_F(MsaClient, AServerThatDoesNotAnswerInTimeIsRetriedThenNamed) {
    server.delay_ms(1500);
    auto o = opts();
    o.request_timeout_s = 1;
    o.retries = 1;
    const std::string err = test::error_of([&] { runtime::server_msa_csvs({"MKVL"}, o); });
    test::expect_contains(err, "the submission failed 2 times");
    test::expect_contains(err, "--msa_server_url");
    EXPECT_EQ(cached(), 0u);
    // transient 5xx answers are retried like transport errors
    server.delay_ms(0);
    server.answer_submissions("500", 1);
    EXPECT_NO_THROW(runtime::server_msa_csvs({"MKVL"}, opts()));
}

TEST_F(MsaClient, AnInterruptedDownloadIsFetchedAgainAndNeverKeptHalf) {
    server.cut_downloads(40, 1);
    const auto whole = runtime::server_msa_csvs({"MKVL"}, opts());
    EXPECT_EQ(server.count("GET /result/download/"), 2);
    EXPECT_EQ(whole[0].rfind("key,sequence\n-1,MKVL\n", 0), 0u);
    // cut every time: an error, and no cache entry
    server.cut_downloads(40, 100);
    const std::string err = test::error_of([&] { runtime::server_msa_csvs({"GGAW"}, opts()); });
    test::expect_contains(err, "download of job");
    EXPECT_EQ(cached(), 1u);  // MKVL's alone
}

TEST_F(MsaClient, CredentialsGoAsBasicAuthOrAnApiKeyHeader) {
    server.require_header("x-api-key", "secret");
    const std::string err = test::error_of([&] { runtime::server_msa_csvs({"MKVL"}, opts()); });
    test::expect_contains(err, "HTTP 401");
    auto o = opts();
    o.api_key_value = "secret";
    EXPECT_NO_THROW(runtime::server_msa_csvs({"MKVL"}, o));
    server.require_header("authorization", "Basic dXNlcjpwYXNz");  // user:pass
    o = opts();
    o.username = "user";
    o.password = "pass";
    EXPECT_NO_THROW(runtime::server_msa_csvs({"GGAW"}, o));
    o.api_key_value = "secret";
    test::expect_contains(test::error_of([&] { runtime::server_msa_csvs({"PPPW"}, o); }),
                          "not both");
}

TEST(ColabFoldA3m, BlocksSplitAtNulBytesByQueryNumber) {
    const std::string text = ">101\nMKV\n>h\nMRV\n\0>102\nGG\n\0\n>101\nMKV\n"s;
    const auto blocks = runtime::split_colabfold_a3m(text, "t");
    ASSERT_EQ(blocks.size(), 2u);
    EXPECT_EQ(blocks[0].first, 101);
    EXPECT_EQ(blocks[0].second, ">101\nMKV\n>h\nMRV\n>101\nMKV\n");
    EXPECT_EQ(blocks[1].first, 102);
    test::expect_contains(test::error_of([] { runtime::split_colabfold_a3m(">abc\nMK\n", "t"); }),
                          "query number");
    test::expect_contains(test::error_of([] { runtime::split_colabfold_a3m("MK\n>101\nMK\n", "t"); }),
                          "before the first query");
}

TEST(Archive, TarGzRoundTripAndCorruptionIsNamed) {
    const std::string gz = ColabFoldServer::tar_gz({{"a.a3m", ">101\nMK\n"}, {"b.txt", std::string(700, 'x')}});
    std::istringstream tar(io::gunzip(gz, 1 << 20, "t"));
    std::map<std::string, std::string> files;
    io::read_tar(tar, "t", [&](const io::TarEntry& e, std::istream& in) {
        files[e.path] = io::read_tar_body(e, in, 1 << 20, "t");
    });
    EXPECT_EQ(files.at("a.a3m"), ">101\nMK\n");
    EXPECT_EQ(files.at("b.txt").size(), 700u);
    test::expect_contains(test::error_of([&] { io::gunzip(gz.substr(0, gz.size() / 2), 1 << 20, "t"); }),
                          "truncated");
    test::expect_contains(test::error_of([&] { io::gunzip(gz, 100, "t"); }), "more than 100");
    test::expect_contains(test::error_of([&] { io::gunzip("plain", 100, "t"); }), "not a gzip");
}

}  // namespace
