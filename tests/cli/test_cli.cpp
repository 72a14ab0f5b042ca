// CLI tests: the real binary on real files. Good inputs must reproduce the upstream fixtures;
// bad inputs must give one clear error line, a non-zero exit, and no output files.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "io/atomic_file.h"
#include "io/h5.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "cli_util.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace bioinfer;

namespace {

const std::string& kFix = test::kEsm2Tiny;

using test::Result;

struct Cli : test::CliTest {
    // The fixture's cases as a FASTA file.
    std::string cases_fasta() const { return fixture_fasta(kFix, " test"); }
};

Tensor ref_tensor(const std::string& key) {
    return io::SafetensorsFile::open(kFix + "/reference.safetensors")->get(key).to_f32();
}

// Rows [1, n-1) of a (n, C) reference: residues only.
std::vector<float> residue_rows(const Tensor& t) {
    const int64_t n = t.size(0), C = t.size(1);
    return std::vector<float>(t.f32() + C, t.f32() + (n - 1) * C);
}

std::vector<float> mean_rows(const Tensor& t) {
    const int64_t n = t.size(0), C = t.size(1);
    std::vector<float> m(size_t(C), 0.0f);
    for (int64_t c = 0; c < C; ++c) {
        double s = 0;
        for (int64_t i = 1; i < n - 1; ++i) s += t.f32()[i * C + c];
        m[size_t(c)] = float(s / double(n - 2));
    }
    return m;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    auto s = test::stats(got.data(), want.data(), int64_t(got.size()));
    EXPECT_LE(s.max_abs, 2e-5) << what;
    EXPECT_GE(s.pcc, 0.99999) << what;
}

const char* kCases[] = {"ubq", "rare", "masked", "short", "trpcage"};

}  // namespace

TEST_F(Cli, EmbedNpzMatchesFixtures) {
    Result r = run("embed " + cases_fasta() + " --weights " + kFix + " --out-dir " + p("out") +
                   " --repr-layers 0,-1 --include mean,per_tok,bos,contacts,logits --threads 2");
    ASSERT_EQ(r.rc, 0) << r.err;
    auto man = nlohmann::json::parse(io::read_file(p("out/manifest.json")));
    EXPECT_EQ(man["layers"], nlohmann::json({0, 3}));
    ASSERT_EQ(man["records"].size(), 5u);
    for (const char* id : kCases) {
        auto m = io::read_npz(p(std::string("out/") + id + ".npz"));
        Tensor h3 = ref_tensor(std::string(id) + ".hidden.3"), h0 = ref_tensor(std::string(id) + ".hidden.0");
        expect_close(m["representations_3"].data, residue_rows(h3), std::string(id) + " per_tok 3");
        expect_close(m["representations_0"].data, residue_rows(h0), std::string(id) + " per_tok 0");
        EXPECT_EQ(m["representations_3"].shape, (Shape{h3.size(0) - 2, 32}));
        expect_close(m["mean_representations_3"].data, mean_rows(h3), std::string(id) + " mean");
        expect_close(m["bos_representations_3"].data, std::vector<float>(h3.f32(), h3.f32() + 32),
                     std::string(id) + " bos");
        Tensor c = ref_tensor(std::string(id) + ".contacts");
        expect_close(m["contacts"].data, std::vector<float>(c.f32(), c.f32() + c.numel()),
                     std::string(id) + " contacts");
        expect_close(m["logits"].data, residue_rows(ref_tensor(std::string(id) + ".logits")),
                     std::string(id) + " logits");
    }
    for (auto& e : fs::directory_iterator(p("out")))
        EXPECT_NE(e.path().filename().string()[0], '.') << "temporary left: " << e.path();
}

// Heads without any hidden state: no layer is computed for output, and none is read.
TEST_F(Cli, EmbedHeadsAloneMatchFixtures) {
    Result r = run("embed " + cases_fasta() + " --weights " + kFix + " --out-dir " + p("heads") +
                   " --include logits,contacts --threads 2");
    ASSERT_EQ(r.rc, 0) << r.err;
    for (const char* id : kCases) {
        auto m = io::read_npz(p(std::string("heads/") + id + ".npz"));
        ASSERT_EQ(m.size(), 2u) << id;
        Tensor c = ref_tensor(std::string(id) + ".contacts");
        expect_close(m["contacts"].data, std::vector<float>(c.f32(), c.f32() + c.numel()),
                     std::string(id) + " contacts");
        expect_close(m["logits"].data, residue_rows(ref_tensor(std::string(id) + ".logits")),
                     std::string(id) + " logits");
    }
}

TEST_F(Cli, EmbedH5MatchesFixturesAndBatchingIsExact) {
    const std::string fa = cases_fasta();
    Result r = run("embed " + fa + " --weights " + kFix + " --out-dir " + p("h5") +
                   " --include mean,per_tok --format h5 --toks-per-batch 100000");
    ASSERT_EQ(r.rc, 0) << r.err;
    Result r1 = run("embed " + fa + " --weights " + kFix + " --out-dir " + p("one") +
                    " --include mean,per_tok --format h5 --toks-per-batch 1");  // one per batch
    ASSERT_EQ(r1.rc, 0) << r1.err;
    for (const char* id : kCases) {
        Tensor h3 = ref_tensor(std::string(id) + ".hidden.3");
        Shape s;
        auto per_tok = io::h5_read(p("h5/embeddings.h5"), std::string("/representations_3/") + id, &s);
        EXPECT_EQ(s, (Shape{h3.size(0) - 2, 32}));
        expect_close(per_tok, residue_rows(h3), std::string(id) + " h5 per_tok");
        auto mean = io::h5_read(p("h5/embeddings.h5"), std::string("/mean_representations_3/") + id, &s);
        expect_close(mean, mean_rows(h3), std::string(id) + " h5 mean");
        auto single = io::h5_read(p("one/embeddings.h5"), std::string("/representations_3/") + id, &s);
        auto st = test::stats(per_tok.data(), single.data(), int64_t(single.size()));
        EXPECT_LE(st.max_abs, 1e-5) << id << ": batched differs from single";
    }
}

TEST_F(Cli, EmbedH5UniprotLayoutFolderAndBareSequence) {
    fs::create_directories(p("in"));
    write("in/a.fasta", ">P1\nMKTAYIAK\n");
    write("in/b.fa", ">P2\nGSHMLL\n");
    write("in/notes.txt", "ignored");
    Result r = run("embed " + p("in") + " --weights " + kFix + " --out-dir " + p("out") + " --format h5");
    ASSERT_EQ(r.rc, 0) << r.err;
    Shape s;
    io::h5_read(p("out/embeddings.h5"), "/P1", &s);  // one array per record: /<accession>
    EXPECT_EQ(s, (Shape{32}));
    io::h5_read(p("out/embeddings.h5"), "/P2", &s);
    Result b = run("embed MKTAYIAK --weights " + kFix + " --out-dir " + p("bare"));
    ASSERT_EQ(b.rc, 0) << b.err;
    auto m = io::read_npz(p("bare/seq.npz"));
    auto m2 = io::read_npz(p("bare/seq.npz"));
    EXPECT_EQ(m["mean_representations_3"].shape, (Shape{32}));
    // The same sequence gives the same embedding from the folder run.
    auto f = io::h5_read(p("out/embeddings.h5"), "/P1", &s);
    expect_close(m["mean_representations_3"].data, f, "bare vs folder");
}

TEST_F(Cli, ModelNameResolvesFromHuggingFaceCache) {
    hub_snapshot("hub", "facebook/esm2_t6_8M_UR50D", "0123abc", kFix);
    Result r = run("embed MKV --model esm2_t6_8M_UR50D --out-dir " + p("out"), "HF_HUB_CACHE=" + p("hub"));
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(fs::exists(p("out/seq.npz")));
    auto man = nlohmann::json::parse(io::read_file(p("out/manifest.json")));
    EXPECT_EQ(man["model"], "esm2_t6_8M_UR50D");
    Result miss = run("embed MKV --model esm2_t12_35M_UR50D --out-dir " + p("o2"),
                      "HF_HUB_OFFLINE=1 HF_HUB_CACHE=" + p("hub"));
    EXPECT_NE(miss.rc, 0);
    EXPECT_NE(miss.err.find("offline and 'facebook/esm2_t12_35M_UR50D' is not in the cache"), std::string::npos)
        << miss.err;
    EXPECT_FALSE(fs::exists(p("o2")));
}

// ESM C from both checkpoint layouts through the real binary: the transformers directory and the
// esm package's .pth, found by name in a hub cache laid out like EvolutionaryScale's repository.
TEST_F(Cli, EmbedEsmcBothLayoutsMatchFixtures) {
    const std::string fx = BIOINFER_FIXTURES;
    const fs::path snap = tmp / "hub/models--EvolutionaryScale--esmc-300m-2024-12/snapshots/abc";
    fs::create_directories(snap);
    fs::create_directory_symlink(fx + "/esmc_tiny_pth/data", snap / "data");
    const std::vector<std::pair<std::string, std::string>> runs = {
        {"esmc_tiny", "--weights " + fx + "/esmc_tiny"},
        {"esmc_tiny_pth", "--model esmc-300m"},
    };
    for (const auto& [name, weights] : runs) {
        const std::string dir = fx + "/" + name;
        auto cases = nlohmann::json::parse(io::read_file(dir + "/cases.json"));
        std::string fa;
        for (auto& c : cases["cases"])
            fa += ">" + c["id"].get<std::string>() + "\n" + c["sequence"].get<std::string>() + "\n";
        write(name + ".fa", fa);
        const std::string out = p(name + "_out");
        Result r = run("embed " + p(name + ".fa") + " " + weights + " --out-dir " + out +
                           " --include per_tok,logits --repr-layers 0,-1",
                       "HF_HUB_CACHE=" + p("hub"));
        ASSERT_EQ(r.rc, 0) << name << ": " << r.err;
        const int L = cases["num_layers"];
        auto man = nlohmann::json::parse(io::read_file(out + "/manifest.json"));
        EXPECT_EQ(man["architecture"], "esmc");
        auto ref = io::SafetensorsFile::open(dir + "/reference.safetensors");
        for (auto& c : cases["cases"]) {
            const std::string id = c["id"];
            auto m = io::read_npz(out + "/" + id + ".npz");
            for (int l : {0, L}) {
                Tensor h = ref->get(id + ".hidden." + std::to_string(l)).to_f32();
                expect_close(m["representations_" + std::to_string(l)].data, residue_rows(h),
                             name + " " + id + " layer " + std::to_string(l));
            }
            Tensor lg = ref->get(id + ".logits").to_f32();
            EXPECT_EQ(m["logits"].shape, (Shape{lg.size(0) - 2, 64}));
            expect_close(m["logits"].data, residue_rows(lg), name + " " + id + " logits");
        }
    }
    // ESM C has no contact head, and ESM-2's alphabet has no chain break.
    Result c = run("embed MKV --weights " + fx + "/esmc_tiny --out-dir " + p("c") + " --include contacts");
    EXPECT_NE(c.rc, 0);
    EXPECT_NE(c.err.find("contact head"), std::string::npos) << c.err;
    Result b = run("embed 'MKV|GS' --weights " + kFix + " --out-dir " + p("b"));
    EXPECT_NE(b.rc, 0);
    EXPECT_NE(b.err.find("residue '|' at position 4 is not in the ESM alphabet"), std::string::npos) << b.err;
    // ESM C takes the same bare sequence.
    Result ok = run("embed 'MKV|GS' --weights " + fx + "/esmc_tiny --out-dir " + p("ok"));
    EXPECT_EQ(ok.rc, 0) << ok.err;
}

TEST_F(Cli, TruncationWarnsPerRecord) {
    write("long.fa", ">long\nMKTAYIAKQRQISFVK\n>ok\nMK\n");
    Result r = run("embed " + p("long.fa") + " --weights " + kFix + " --out-dir " + p("out") +
                   " --truncate 10 --include per_tok");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("record 'long': 16 residues truncated to 10"), std::string::npos) << r.err;
    EXPECT_EQ(io::read_npz(p("out/long.npz"))["representations_3"].shape, (Shape{10, 32}));
}

TEST_F(Cli, BadInputsFailCleanly) {
    const std::string w = " --weights " + kFix;
    // every record bad: nothing can run (a mix runs the good ones: Jobs.MixedInputs...)
    write("bad_residue.fa", ">bad1\nMKJV\n>bad2\nMJ\n");
    expect_clean_failure("embed " + p("bad_residue.fa") + w,
                         "record 'bad1'] residue 'J' at position 3 is not in the ESM alphabet (and 1 more");
    write("empty.fa", ">ok\nMKV\n>empty\n>next\nMK\n");
    expect_clean_failure("embed " + p("empty.fa") + w, "record 'empty' has an empty sequence");
    write("nofasta.fa", "just text\n");
    expect_clean_failure("embed " + p("nofasta.fa") + w, "before the first '>'");
    write("unreadable.fa", ">x\nMK\n");
    fs::permissions(p("unreadable.fa"), fs::perms::none);
    if (getuid() != 0)  // root reads anything; a folder in place of a file fails the same way
        expect_clean_failure("embed " + p("unreadable.fa") + w, "unreadable.fa");
    fs::create_directories(p("dir.fa"));
    expect_clean_failure("embed " + p("dir.fa") + w, "no FASTA files");
    expect_clean_failure("embed MKV --weights " + p("nowhere"), "weights directory does not exist");

    // Corrupt weights: truncated safetensors.
    fs::create_directories(p("trunc"));
    fs::copy_file(kFix + "/config.json", p("trunc/config.json"));
    std::string st = io::read_file(kFix + "/model.safetensors");
    write("trunc/model.safetensors", st.substr(0, st.size() / 2));
    expect_clean_failure("embed MKV --weights " + p("trunc"), "truncated");
    // Unsupported config.
    fs::create_directories(p("absolute"));
    fs::copy_file(kFix + "/model.safetensors", p("absolute/model.safetensors"));
    auto cfg = nlohmann::json::parse(io::read_file(kFix + "/config.json"));
    cfg["position_embedding_type"] = "absolute";
    write("absolute/config.json", cfg.dump());
    expect_clean_failure("embed MKV --weights " + p("absolute"), "position_embedding_type 'absolute'");
    // A config that disagrees with the tensors: wrong shape names the key.
    fs::create_directories(p("shape"));
    fs::copy_file(kFix + "/model.safetensors", p("shape/model.safetensors"));
    cfg = nlohmann::json::parse(io::read_file(kFix + "/config.json"));
    cfg["intermediate_size"] = 48;
    write("shape/config.json", cfg.dump());
    expect_clean_failure("embed MKV --weights " + p("shape"),
                         "tensor 'esm.encoder.layer.0.intermediate.dense.weight': expected shape [48, 32], got [64, 32]");
    // Options.
    expect_clean_failure("embed MKV" + w + " --include mean,everything", "unknown output 'everything'");
    expect_clean_failure("embed MKV" + w + " --repr-layers 7", "layer 7 outside");
    expect_clean_failure("embed MKV" + w + " --format parquet", "expected npz or h5");
    expect_clean_failure("embed MKV" + w + " --bogus 1", "--bogus");
}

TEST_F(Cli, BenchMatmulAndEmbedPrintJson) {
    Result r = run("bench matmul --m 33 --k 20 --n 17 --repeat 2 --threads 1", "", p("mm.json"));
    ASSERT_EQ(r.rc, 0) << r.err;
    auto j = nlohmann::json::parse(io::read_file(p("mm.json")));
    EXPECT_EQ(j["m"], 33);
    EXPECT_EQ(j["k"], 20);
    EXPECT_EQ(j["n"], 17);
    EXPECT_EQ(j["precision"], "fp32");
    EXPECT_EQ(j["threads"], 1);
    EXPECT_GT(j["gflops"].get<double>(), 0.0);
    EXPECT_GT(j["seconds_per_call"].get<double>(), 0.0);
    EXPECT_FALSE(j["machine"]["cpu"].get<std::string>().empty());
    EXPECT_TRUE(j["machine"]["isa"].contains("avx2"));
    r = run("bench matmul --m 33 --k 20 --n 17 --repeat 2 --threads 1 --precision int8", "",
            p("mm8.json"));
    ASSERT_EQ(r.rc, 0) << r.err;
    j = nlohmann::json::parse(io::read_file(p("mm8.json")));
    EXPECT_EQ(j["precision"], "int8");
    EXPECT_GT(j["gflops"].get<double>(), 0.0);
    r = run("bench matmul --precision int4");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("expected fp32, bf16 or int8"), std::string::npos) << r.err;
    // The machine's ceilings: every register-level loop listed, the runnable ones timed.
    r = run("bench peak --no-gemm --seconds 0.002 --repeat 1 --threads 1", "", p("peak.json"));
    ASSERT_EQ(r.rc, 0) << r.err;
    j = nlohmann::json::parse(io::read_file(p("peak.json")));
    EXPECT_FALSE(j["machine"]["cpu"].get<std::string>().empty());
    ASSERT_GE(j["register_peaks"].size(), 8u);
    for (const auto& row : j["register_peaks"]) {
        const std::string unit = row["dtype"] == "int8" ? "gops" : "gflops";
        EXPECT_EQ(row.contains(unit), row["supported"].get<bool>()) << row.dump();
        if (row["name"] == "fp32_fma_avx2" && row["supported"].get<bool>()) {
            EXPECT_GT(row[unit].get<double>(), 0.0);
            EXPECT_EQ(j["best_register_peak"]["fp32"]["kernel"].is_string(), true);
        }
    }
    EXPECT_FALSE(j.contains("gemm_and_memory"));
    r = run("bench peak --seconds 0");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("--seconds"), std::string::npos) << r.err;
    r = run("bench embed " + cases_fasta() + " --weights " + kFix + " --repeat 1 --warmup-records 1",
            "", p("embed.json"));
    ASSERT_EQ(r.rc, 0) << r.err;
    j = nlohmann::json::parse(io::read_file(p("embed.json")));
    const auto cases = nlohmann::json::parse(io::read_file(kFix + "/cases.json"))["cases"];
    EXPECT_EQ(j["sequences"], cases.size());
    EXPECT_GT(j["tokens_per_s"].get<double>(), 0.0);
    r = run("bench matmul --m 0");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("[--m] expected 1 to 65536, got 0"), std::string::npos) << r.err;
    // The tuned table against none, in one process: both copies timed, passes alternating.
    r = run("bench embed " + cases_fasta() + " --weights " + kFix +
                " --repeat 2 --warmup-records 1 --compare-table none",
            "", p("ab.json"));
    ASSERT_EQ(r.rc, 0) << r.err;
    j = nlohmann::json::parse(io::read_file(p("ab.json")));
    EXPECT_EQ(j["compare_table"], "none (every kernel's default)");
    EXPECT_EQ(j["pass_seconds"].size(), 2u);
    EXPECT_EQ(j["compare_pass_seconds"].size(), 2u);
    EXPECT_GT(j["compare_tokens_per_s"].get<double>(), 0.0);
    EXPECT_GT(j["ratio_best"].get<double>(), 0.0);
    EXPECT_GT(j["ratio_median_paired"].get<double>(), 0.0);
    r = run("bench embed " + cases_fasta() + " --weights " + kFix + " --compare-table " + p("nope.json"));
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("cannot read '" + p("nope.json") + "'"), std::string::npos) << r.err;
}

// The sweep's plan: every sub-sweep, both shape sets of the issue, without running a kernel.
TEST_F(Cli, SweepDryRunListsEveryShapeAndVariant) {
    Result r = run("bench sweep --dry-run", "", p("plan.json"));
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto j = nlohmann::json::parse(io::read_file(p("plan.json")));
    EXPECT_EQ(j["dry_run"], true);
    std::map<std::string, nlohmann::json> sweeps;
    for (const auto& s : j["sweeps"]) sweeps[s["sweep"]] = s["cases"];
    for (const char* name : {"matmul", "attention", "layer_norm", "rotary", "softmax", "activation"}) {
        ASSERT_TRUE(sweeps.count(name)) << name;
        EXPECT_FALSE(sweeps[name].empty()) << name;
        for (const auto& c : sweeps[name])
            for (const auto& v : c["variants"]) EXPECT_TRUE(v.contains("table_op")) << name;
    }
    EXPECT_TRUE(j["pending"].empty());
    const auto has_case = [&](const std::string& sweep, const nlohmann::json& shape, const std::string& dt) {
        for (const auto& c : sweeps[sweep])
            if (c["shape"] == shape && c["dtype"] == dt) return true;
        return false;
    };
    // ESM-2 3B's feed-forward at 1024 tokens, in both dtypes; a gr00t linear with tanh-GELU.
    EXPECT_TRUE(has_case("matmul", {{"m", 1024}, {"k", 2560}, {"n", 10240}, {"act", 1}}, "bf16"));
    EXPECT_TRUE(has_case("matmul", {{"m", 1792}, {"k", 1024}, {"n", 4096}, {"act", 2}}, "fp32"));
    // gr00t's causal grouped-query attention and a masked one; ESM C 600M at 512 with padding.
    EXPECT_TRUE(has_case("attention", {{"batch", 1}, {"heads", 16}, {"kv_heads", 8}, {"seq", 384},
                                       {"head_dim", 128}, {"causal", 1}, {"valid", 384}}, "fp32"));
    EXPECT_TRUE(has_case("attention", {{"batch", 1}, {"heads", 32}, {"kv_heads", 32}, {"seq", 512},
                                       {"head_dim", 64}, {"causal", 0}, {"valid", 469}}, "fp32"));
    EXPECT_TRUE(has_case("attention", {{"batch", 2}, {"heads", 18}, {"kv_heads", 18}, {"seq", 512},
                                       {"head_dim", 64}, {"causal", 0}, {"valid", 384}}, "fp32"));
    // A narrower plan, and the errors a user can make.
    r = run("bench sweep --dry-run --what attention,softmax --shapes tiny --dtypes fp32", "", p("tiny.json"));
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(io::read_file(p("tiny.json")))["sweeps"].size(), 2u);
    // ESMFold's pair ops at the trunk's shapes, chunk sizes as variants.
    r = run("bench sweep --dry-run --what trimul,triatt,pair_mlp --shapes esmfold", "", p("fold.json"));
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto fold = nlohmann::json::parse(io::read_file(p("fold.json")));
    ASSERT_EQ(fold["sweeps"].size(), 3u);
    for (const auto& s : fold["sweeps"]) {
        const size_t per_length = s["sweep"] == "pair_mlp" ? 1 : 2;  // both directions
        EXPECT_EQ(s["cases"].size(), 3 * per_length) << s["sweep"];
        for (const auto& c : s["cases"]) {
            EXPECT_EQ(c["shape"]["channels"], 128);
            std::set<int64_t> chunks;
            for (const auto& v : c["variants"]) chunks.insert(v["params"]["chunk"].get<int64_t>());
            EXPECT_TRUE(chunks.count(0) && chunks.count(c["shape"]["seq"].get<int64_t>())) << c.dump();
        }
    }
    r = run("bench sweep --dry-run --what trimul2");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("unknown sweep 'trimul2'"), std::string::npos) << r.err;
    r = run("bench sweep --dry-run --shapes esm3");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("unknown shape set 'esm3'"), std::string::npos) << r.err;
}

// A real sweep at tiny shapes: every file, row and stage carries what the results schema promises.
TEST_F(Cli, SweepTinyRunWritesValidatedJson) {
    const std::string dtypes = test::has_bf16_gemm() ? "fp32,bf16" : "fp32";
    Result r = run("bench sweep --shapes tiny --reps 2 --iters 1 --dtypes " + dtypes + " --out " + p("sw"));
    ASSERT_EQ(r.rc, 0) << r.err;
    for (const char* name : {"matmul", "attention", "layer_norm", "rotary", "softmax", "activation",
                             "trimul", "triatt", "pair_mlp"}) {
        const std::string f = p("sw") + "/" + name + "-tiny.json";
        ASSERT_TRUE(fs::exists(f)) << f;
        const auto j = nlohmann::json::parse(io::read_file(f));
        EXPECT_EQ(j["bench"], "bioinfer bench sweep");
        EXPECT_EQ(j["schema_version"], 1);
        EXPECT_EQ(j["sweep"], name);
        const auto& m = j["machine"];
        for (const char* k : {"cpu", "isa", "cores", "threads", "kernels", "libraries", "peaks"})
            EXPECT_TRUE(m.contains(k)) << k;
        EXPECT_GT(m["peaks"]["gemm_gflops"]["fp32"].get<double>(), 0.0);
        EXPECT_GT(m["peaks"]["memory_gbps"].get<double>(), 0.0);
        EXPECT_TRUE(m["libraries"].contains("onednn"));
        EXPECT_EQ(j["arguments"]["reps"], 2);
        EXPECT_TRUE(j["method"].contains("timing"));
        EXPECT_TRUE(j["errors"].empty()) << j["errors"].dump();
        ASSERT_FALSE(j["rows"].empty());
        for (const auto& row : j["rows"]) {
            const std::string what = std::string(name) + " " + row["label"].get<std::string>() + " " +
                                     row["variant"].get<std::string>();
            EXPECT_EQ(row["status"], "ok") << what;
            EXPECT_TRUE(row["admitted"].get<bool>()) << what;
            EXPECT_GE(row["pcc"].get<double>(), 0.999) << what;
            EXPECT_GE(row["max_abs"].get<double>(), 0.0) << what;
            EXPECT_EQ(row["us"]["reps"].size(), 2u) << what;
            EXPECT_GT(row["us"]["min"].get<double>(), 0.0) << what;
            EXPECT_LE(row["us"]["min"].get<double>(), row["us"]["mean"].get<double>()) << what;
            const std::set<std::string> compute{"matmul", "attention", "trimul", "triatt", "pair_mlp"};
            EXPECT_GT(row.value(compute.count(j["sweep"].get<std::string>()) ? "gflops" : "gbps", 0.0), 0.0) << what;
            EXPECT_GT(row["peak_fraction"].get<double>(), 0.0) << what;
        }
        ASSERT_FALSE(j["stages"].empty());
        for (const auto& st : j["stages"]) {
            ASSERT_TRUE(st.contains("winner")) << st.dump();
            EXPECT_TRUE(st["default"].contains("us")) << st.dump();  // the default was measured
            EXPECT_LE(st["winner"]["us"].get<double>(), st["default"]["us"].get<double>() * 1.0000001);
        }
    }
    // The rows name every variant the engine can select, e.g. attention's materialised form.
    const auto att = nlohmann::json::parse(io::read_file(p("sw") + "/attention-tiny.json"));
    int materialised = 0, tiled = 0;
    for (const auto& row : att["rows"]) {
        materialised += row["variant"] == "materialised";
        tiled += row["variant"] == "tiled";
    }
    EXPECT_EQ(materialised, 2);
    EXPECT_EQ(tiled, 18);

    // --update-table writes the winners where the kernels read them, and --report reads them back.
    r = run("bench sweep --update-table " + p("sw") + "/attention-tiny.json," + p("sw") +
            "/matmul-tiny.json --table " + p("table.json"));
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto table = nlohmann::json::parse(io::read_file(p("table.json")));
    size_t winners = 0;
    for (const char* f : {"attention-tiny.json", "matmul-tiny.json"})
        winners += nlohmann::json::parse(io::read_file(p("sw") + "/" + f))["stages"].size();
    EXPECT_EQ(table["entries"].size(), winners);
    r = run("bench sweep --report " + p("sw") + "/attention-tiny.json",
            "BIOINFER_TUNED_TABLE=" + p("table.json"), p("report.txt"));
    ASSERT_EQ(r.rc, 0) << r.err;
    const std::string rep = io::read_file(p("report.txt"));
    EXPECT_NE(rep.find("tuned table: " + p("table.json")), std::string::npos) << rep;
    EXPECT_NE(rep.find("(table)"), std::string::npos) << rep;
    EXPECT_EQ(rep.find("(default)"), std::string::npos) << rep;
    // A table the kernels cannot read is refused before anything runs.
    write("bad.json", "{\"entries\": [{\"op\": 1}]}");
    r = run("bench sweep --what softmax --shapes tiny --reps 1 --iters 1 --out " + p("sw2"),
            "BIOINFER_TUNED_TABLE=" + p("bad.json"));
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("bad.json: entry 0"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(p("sw2")));
}

// A variant that fails is recorded with its error and the sweep goes on; the exit status says so.
TEST_F(Cli, SweepRecordsFailingVariants) {
    // oneDNN capped at AVX2 has no bf16 GEMM: every bf16 variant fails, fp32 ones still run.
    Result r = run("bench sweep --what matmul --shapes tiny --reps 1 --iters 1 --dtypes fp32,bf16 --out " +
                       p("sw"),
                   "ONEDNN_MAX_CPU_ISA=AVX2");
    EXPECT_EQ(r.rc, 1) << r.err;
    EXPECT_NE(r.err.find("variants failed"), std::string::npos) << r.err;
    const auto j = nlohmann::json::parse(io::read_file(p("sw") + "/matmul-tiny.json"));
    EXPECT_FALSE(j["errors"].empty());
    int failed = 0, ok = 0;
    for (const auto& row : j["rows"]) {
        if (row["dtype"] == "bf16") {
            EXPECT_EQ(row["status"], "error");
            EXPECT_NE(row["error"].get<std::string>().find("no BF16 GEMM on this CPU"), std::string::npos)
                << row["error"];
            EXPECT_FALSE(row["admitted"].get<bool>());
            ++failed;
        } else {
            EXPECT_EQ(row["status"], "ok");
            ++ok;
        }
    }
    EXPECT_GT(failed, 0);
    EXPECT_GT(ok, 0);
}

// --report works from a results file alone: the committed sweep of this machine.
TEST_F(Cli, SweepReportOnCommittedResults) {
    const std::string f = std::string(BIOINFER_SOURCE) + "/bench/results/sweeps/attention-esm+gr00t.json";
    Result r = run("bench sweep --report " + f, "", p("report.txt"));
    ASSERT_EQ(r.rc, 0) << r.err;
    const std::string rep = io::read_file(p("report.txt"));
    const auto j = nlohmann::json::parse(io::read_file(f));
    size_t lines = 0;
    for (size_t at = rep.find("\nattention "); at != std::string::npos; at = rep.find("\nattention ", at + 1))
        ++lines;
    EXPECT_EQ(lines, j["stages"].size()) << rep;
    EXPECT_NE(rep.find("sweep winner"), std::string::npos);
    r = run("bench sweep --report " + kFix + "/cases.json");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("not a sweep results file"), std::string::npos) << r.err;
}

TEST_F(Cli, HelpAndUnknownCommand) {
    EXPECT_EQ(run("embed --help").rc, 0);
    EXPECT_EQ(run("--help").rc, 0);
    Result r = run("fold x");
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("unknown command 'fold'"), std::string::npos);
}

// A copy of a fixture model whose first weight named like `part` holds a NaN at flat index 5;
// returns that weight's name.
std::string poisoned_copy(const std::string& fixture, const fs::path& dest,
                          const std::string& part) {
    fs::create_directories(dest);
    for (auto& e : fs::directory_iterator(fixture))
        if (e.path().filename() != "model.safetensors")
            fs::copy(e.path(), dest / e.path().filename());
    auto f = io::SafetensorsFile::open(fixture + "/model.safetensors");
    std::map<std::string, Tensor> ts;
    std::string poisoned;
    for (const auto& [name, info] : f->tensors()) {
        Tensor t = f->get(name).to_f32().clone();
        if (poisoned.empty() && name.find(part) != std::string::npos && t.numel() > 5) {
            t.f32()[5] = std::nanf("");
            poisoned = name;
        }
        ts[name] = t;
    }
    io::write_safetensors((dest / "model.safetensors").string(), ts);
    return poisoned;
}

// A checkpoint holding one NaN weight is refused, naming the tensor; with --allow-nonfinite it
// loads, and every record fails alone (its outputs hold NaN), nothing of it written.
TEST_F(Cli, NonFiniteWeightIsRefusedNamingTheTensor) {
    const std::string poisoned =
        poisoned_copy(kFix, tmp / "nan_model", "intermediate.dense.weight");
    ASSERT_FALSE(poisoned.empty());
    expect_clean_failure(
        "embed " + cases_fasta() + " --weights " + p("nan_model"),
        "tensor '" + poisoned + "' holds a non-finite value (NaN) at flat index 5");
    Result r = run("embed " + cases_fasta() + " --weights " + p("nan_model") +
                   " --allow-nonfinite --out-dir " + p("out2"));
    EXPECT_EQ(r.rc, 1) << r.err;  // every record failed
    const auto res = nlohmann::json::parse(io::read_file(p("out2/results.json")));
    ASSERT_EQ(res["targets"].size(), 5u);
    for (const auto& t : res["targets"]) {
        EXPECT_EQ(t["status"], "failed");
        EXPECT_NE(t["error"].get<std::string>().find("holds NaN or Inf; nothing written"),
                  std::string::npos)
            << t;
    }
    for (const char* id : kCases) EXPECT_FALSE(fs::exists(p(std::string("out2/") + id + ".npz")));
}

// The same for a fold: refused at load; allowed, the target fails before any file is written.
TEST_F(Cli, NonFiniteFoldFailsItsTargetAlone) {
    const std::string poisoned = poisoned_copy(test::kEsmFoldTiny, tmp / "nan_fold", "trunk.");
    ASSERT_FALSE(poisoned.empty());
    write("one.fa", ">t1\nMKTAYIAKQRQISFVKSHFSRQ\n");
    expect_clean_failure("predict " + p("one.fa") + " --weights " + p("nan_fold"),
                         "tensor '" + poisoned + "' holds a non-finite value (NaN)");
    Result r = run("predict " + p("one.fa") + " --weights " + p("nan_fold") +
                   " --allow-nonfinite --out-dir " + p("out2"));
    EXPECT_EQ(r.rc, 1) << r.err;
    const auto res = nlohmann::json::parse(io::read_file(p("out2/results.json")));
    ASSERT_EQ(res["targets"].size(), 1u);
    EXPECT_EQ(res["targets"][0]["status"], "failed");
    EXPECT_NE(
        res["targets"][0]["error"].get<std::string>().find("holds NaN or Inf; nothing written"),
        std::string::npos)
        << res["targets"][0];
    EXPECT_FALSE(fs::exists(p("out2/t1.pdb")));
}
