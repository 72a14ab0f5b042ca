// Inputs a user can type that used to crash, hang, exhaust memory or fail silently: each is
// refused with one line naming what is wrong, a non-zero exit and nothing written
// (docs/reliability.md lists the limits).
#include <sys/resource.h>
#include <sys/stat.h>

#include <chrono>
#include <csignal>
#include <thread>

#include "bioinfer/error.h"
#include "cli_util.h"
#include "core/threads.h"
#include "io/limits.h"

namespace bioinfer {
namespace {

using test::Result;
namespace fs = std::filesystem;

const std::string kFix = std::string(BIOINFER_FIXTURES);
const std::string kBoltz2 = kFix + "/boltz2_tiny";
const std::string kBoltzFast = " --weights " + kBoltz2 + " --sampling_steps 3 --recycling_steps 0";

struct Limits : test::CliTest {
    std::string fasta() const {
        write("in.fa", ">a\nMKTAYIAKQR\n>b\nGSHMLEDPV\n");
        return p("in.fa");
    }
    // A Boltz-2 YAML input: protein chain A (`sequence`) with `extra` appended (ligands,
    // constraints), single-sequence.
    std::string boltz_yaml(const std::string& name, const std::string& extra,
                           const std::string& sequence = "MKTAYIAKQRQISFVKSHFSRQ") const {
        write(name, "version: 1\nsequences:\n  - protein:\n      id: A\n      sequence: " + sequence +
                        "\n      msa: empty\n" + extra);
        return p(name);
    }
    // The largest resident set of any child this test process has waited for, in bytes.
    static int64_t children_max_rss() {
        rusage u{};
        getrusage(RUSAGE_CHILDREN, &u);
        return int64_t(u.ru_maxrss) * 1024;
    }
};

// --threads and --workers have an upper bound (a small multiple of the usable CPUs); counts far
// beyond it crashed the OpenMP runtime. Every command that takes them refuses them cleanly.
TEST_F(Limits, ThreadCountsAreBounded) {
    const std::string max = std::to_string(max_threads());
    for (const std::string& n : std::vector<std::string>{"100000", "2147483647", "2147483648", "-1",
                                                         std::to_string(max_threads() + 1)}) {
        expect_clean_failure("embed " + fasta() + " --weights " + test::kEsm2Tiny + " --threads " + n,
                             "[--threads] expected 0 (all");
        expect_clean_failure("predict MKTAYIAKQR --weights " + test::kEsmFoldTiny + " --threads " + n,
                             "to " + max + " (4 per CPU");
    }
    expect_clean_failure("embed " + fasta() + " --weights " + test::kEsm2Tiny + " --workers 100000",
                         "[--workers] expected 1 to " + max);
    Result r = run("score MKTAYIAKQR --dms --weights " + test::kEsm2Tiny + " --threads 100000 --out " +
                   p("s.csv"));
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.err.find("[--threads] expected 0 (all"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(p("s.csv")));
    // the bound itself runs
    r = run("embed " + fasta() + " --weights " + test::kEsm2Tiny + " --threads " + max +
            " --quiet --out-dir " + p("ok"));
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(fs::exists(p("ok/a.npz")));
}

// Every numeric option has a range, and a value outside it is one line naming the option and
// the range, before anything is read or written.
TEST_F(Limits, NumericOptionsHaveRanges) {
    const std::string emb = "embed " + fasta() + " --weights " + test::kEsm2Tiny;
    const std::string fold = "predict MKTAYIAKQR --weights " + test::kEsmFoldTiny;
    const std::pair<std::string, std::string> cases[] = {
        {emb + " --toks-per-batch 0", "[--toks-per-batch] expected 1 to 16777216, got 0"},
        {emb + " --toks-per-batch 99999999999", "[--toks-per-batch] expected 1 to 16777216"},
        {emb + " --truncate -1", "[--truncate] expected 0 to 16777216, got -1"},
        {emb + " --max-records 0", "[--max-records] expected 1 to"},
        {emb + " --max-ligand-atoms 0", "[--max-ligand-atoms] expected 1 to 100000"},
        {fold + " --num-recycles 65", "[--num-recycles] expected 0 to 64, got 65"},
        {fold + " --chunk-size 99999999", "[--chunk-size] expected 0 to 16777216"},
        {fold + " --max-memory 0", "[--max-memory] expected 1 to 1048576, got 0"},
        {fold + " --max-memory 99999999999999", "[--max-memory] expected 1 to 1048576"},
        {fold + " --num-recycles 1x", "[--num-recycles] expected an integer, got '1x'"},
    };
    for (const auto& [args, message] : cases) expect_clean_failure(args, message);
    Result r = run("score MKTAYIAKQR --dms --weights " + test::kEsm2Tiny + " --offset 99999999999 --out " +
                   p("s.csv"));
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.err.find("[--offset] expected -1073741824 to 1073741824"), std::string::npos) << r.err;
    r = run("score MKTAYIAKQR --dms --weights " + test::kEsm2Tiny + " --scoring-window 99999999999 --out " +
            p("s.csv"));
    EXPECT_NE(r.err.find("[--scoring-window] expected"), std::string::npos) << r.err;
    r = run("bench embed " + fasta() + " --weights " + test::kEsm2Tiny + " --repeat 0");
    EXPECT_NE(r.err.find("[--repeat] expected 1 to 100000, got 0"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(p("s.csv")));
}

// A device never ends: refused before anything is read. A pipe is read, up to the size limit.
TEST_F(Limits, DevicesAreRefusedAndPipesBounded) {
    for (const char* dev : {"/dev/zero", "/dev/urandom"})
        expect_clean_failure(std::string("embed ") + dev + " --weights " + test::kEsm2Tiny,
                             std::string("[") + dev + "] is a device, not a file");
    // a Boltz-2 MSA that is a symlink to /dev/zero
    fs::create_symlink("/dev/zero", p("zero.a3m"));
    write("zero.yaml", "version: 1\nsequences:\n  - protein:\n      id: A\n      sequence: MKV\n"
                       "      msa: " + p("zero.a3m") + "\n");
    expect_clean_failure("predict " + p("zero.yaml") + kBoltzFast, "zero.a3m] is a device");
    // a template, a structure to compare, a model's config: read by other readers, refused alike
    write("tpl.yaml", "version: 1\nsequences:\n  - protein:\n      id: A\n      sequence: MKV\n"
                      "      msa: empty\ntemplates:\n  - cif: /dev/zero\n");
    expect_clean_failure("predict " + p("tpl.yaml") + kBoltzFast, "[/dev/zero] is a device, not a file");
    Result c = run("compare /dev/zero /dev/zero");
    EXPECT_EQ(c.rc, 1);
    EXPECT_NE(c.err.find("[/dev/zero] is a device, not a file"), std::string::npos) << c.err;
    c = run("score MKTAYIAKQR --mutations /dev/zero --weights " + test::kEsm2Tiny + " --out " + p("s.csv"));
    EXPECT_EQ(c.rc, 1);
    EXPECT_NE(c.err.find("[/dev/zero] is a device, not a file"), std::string::npos) << c.err;
    EXPECT_FALSE(fs::exists(p("s.csv")));
    fs::create_directories(p("zero_model"));
    fs::create_symlink("/dev/zero", p("zero_model/config.json"));
    fs::copy_file(test::kEsm2Tiny + "/model.safetensors", p("zero_model/model.safetensors"));
    expect_clean_failure("embed " + fasta() + " --weights " + p("zero_model"),
                         "config.json] is a device, not a file");
    // a FIFO holding a valid FASTA embeds; one holding more than --max-input-size is refused
    // (the writer then writes into a closed pipe: an error for it, not a signal for this test)
    std::signal(SIGPIPE, SIG_IGN);
    ASSERT_EQ(mkfifo(p("fifo.fa").c_str(), 0600), 0);
    std::thread writer([&] { std::ofstream(p("fifo.fa")) << ">a\nMKTAYIAKQR\n"; });
    Result r = run("embed " + p("fifo.fa") + " --weights " + test::kEsm2Tiny + " --quiet --out-dir " +
                   p("fifo_out"));
    writer.join();
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(fs::exists(p("fifo_out/a.npz")));
    std::thread flood([&] {
        std::ofstream f(p("fifo.fa"));
        f << ">a\n";
        const std::string line(1000, 'A');
        for (int i = 0; i < 3000 && f; ++i) f << line << "\n";  // 3 MB, the reader stops at 1 MiB
    });
    expect_clean_failure("embed " + p("fifo.fa") + " --weights " + test::kEsm2Tiny +
                             " --max-input-size 1M",
                         "fifo.fa] holds more than 1 MiB; files read whole are limited to 1 MiB "
                         "(--max-input-size raises it)");
    flood.join();
}

// Input files have a size limit checked before they are read, and FASTA files a record limit;
// both name the option that raises them.
TEST_F(Limits, InputSizeAndRecordLimits) {
    write("big.fa", ">a\n" + std::string(3000, 'A') + "\n");
    expect_clean_failure("embed " + p("big.fa") + " --weights " + test::kEsm2Tiny + " --max-input-size 2K",
                         "big.fa] is 2.9 KiB; files read whole are limited to 2 KiB (--max-input-size raises it)");
    std::string many;
    for (int i = 0; i < 11; ++i) many += ">r" + std::to_string(i) + "\nMKV\n";
    write("many.fa", many);
    expect_clean_failure("embed " + p("many.fa") + " --weights " + test::kEsm2Tiny + " --max-records 10",
                         "many.fa:21] more than 10 records in one file (--max-records raises it");
    Result r = run("embed " + p("many.fa") + " --weights " + test::kEsm2Tiny +
                   " --max-records 11 --quiet --out-dir " + p("ok"));
    EXPECT_EQ(r.rc, 0) << r.err;
    for (const char* v : {"0", "-1", "12Q", "", "99999999999999T"})
        expect_clean_failure("embed " + p("many.fa") + " --weights " + test::kEsm2Tiny +
                                 " --max-input-size '" + v + "'",
                             "[--max-input-size] expected a size such as 512M or 4G");
}

// A 50 MB YAML of 560,000 chains took 3.5 GB and 42 s before the memory estimate refused it. A
// Boltz-2 input is one target: it is refused by its size before it is parsed, in little memory.
TEST_F(Limits, HugeYamlIsRefusedBeforeParsing) {
    {
        std::ofstream f(p("huge.yaml"));
        f << "version: 1\nsequences:\n";
        for (int i = 0; i < 560000; ++i)
            f << "  - protein: {id: C" << i << ", sequence: MKV, msa: empty}\n";
    }
    const int64_t size = int64_t(fs::file_size(p("huge.yaml")));
    ASSERT_GT(size, 25 << 20);
    const auto t0 = std::chrono::steady_clock::now();
    expect_clean_failure("predict " + p("huge.yaml") + kBoltzFast,
                         "huge.yaml] is " + io::size_text(size) +
                             "; files read whole are limited to 4 MiB (--max-input-size raises it)");
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(seconds, 20.0);                        // was 42 s of parsing
    EXPECT_LT(children_max_rss(), 10 * size) << "bytes";  // was 72x the file
}

// A SMILES of 5,000 carbons sat in RDKit's stereochemistry ranking for minutes. Its heavy atoms
// are counted before RDKit sees it: the check takes microseconds, the refusal one line.
TEST_F(Limits, HugeSmilesIsRefusedBeforeRdkit) {
    const std::string smiles(5000, 'C');
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(io::smiles_heavy_atom_count(smiles), 5000);
    EXPECT_THROW(io::check_smiles_size(smiles, "test"), Error);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
    // the grammar's atoms: organic subset, two-letter halogens, bracket atoms but hydrogens
    EXPECT_EQ(io::smiles_heavy_atom_count("CC(=O)Oc1ccccc1C(=O)O"), 13);
    EXPECT_EQ(io::smiles_heavy_atom_count("ClCBr.[Na+].[2H]C([H])[Hg]"), 6);
    EXPECT_EQ(io::smiles_heavy_atom_count("[NH4+]"), 1);

    const std::string in =
        boltz_yaml("big_ligand.yaml", "  - ligand:\n      id: L\n      smiles: '" + smiles + "'\n");
    expect_clean_failure("predict " + in + kBoltzFast,
                         "big_ligand.yaml:7:5: chain L] SMILES with 5000 heavy atoms: at most 500 "
                         "(--max-ligand-atoms raises it");
    const std::string long_text = "C" + std::string(6000, '-') + "C";
    const std::string in2 =
        boltz_yaml("long_smiles.yaml", "  - ligand:\n      id: L\n      smiles: '" + long_text + "'\n");
    expect_clean_failure("predict " + in2 + kBoltzFast, "SMILES of 6002 characters: at most 5000");
}

// A legal but long flexible ligand spent minutes in RDKit's conformer search: the search has a
// time budget per ligand, the target fails alone naming it, and with --quiet the failure is
// still printed (quiet silences progress, not errors).
TEST_F(Limits, ConformerSearchHasATimeBudget) {
    const std::string in = boltz_yaml("chain.yaml", "  - ligand:\n      id: L\n      smiles: '" +
                                                         std::string(200, 'C') + "'\n");
    Result r = run("predict " + in + kBoltzFast + " --conformer-timeout 0.2 --quiet --out-dir " + p("run"));
    EXPECT_EQ(r.rc, 1) << r.err;
    EXPECT_NE(r.err.find("predict: 0 done, 1 failed"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("first failure: chain: [" + in + ": chain L] RDKit found no 3D "
                         "conformer for the 200-heavy-atom SMILES ligand within 0.2 s"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("--conformer-timeout raises the limit"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(p("run/boltz_results_chain/predictions/chain")));
    for (const char* v : {"0", "-1", "x", "nan"})
        expect_clean_failure("predict " + in + kBoltzFast + " --conformer-timeout " + v,
                             "[--conformer-timeout] expected seconds");
}

// A constraint naming a chain, residue or atom the input does not have fails before the weights
// load: no "loading weights" event reaches the log, and the message names the place in the file.
TEST_F(Limits, ConstraintReferencesAreCheckedBeforeWeightsLoad) {
    const std::string lig = "  - ligand:\n      id: B\n      smiles: 'CC(=O)Oc1ccccc1C(=O)O'\n";
    const std::pair<std::string, std::string> cases[] = {
        {"constraints:\n  - pocket:\n      binder: B\n      contacts: [[Z, 3]]\n",
         "constraint: the input has no chain 'Z'"},
        {"constraints:\n  - pocket:\n      binder: Q\n      contacts: [[A, 3]]\n",
         "constraint: the input has no chain 'Q'"},
        {"constraints:\n  - contact:\n      token1: [A, 99]\n      token2: [B, C21]\n",
         "constraint: chain A has residues 1 to 22, not 99"},
        {"constraints:\n  - contact:\n      token1: [A, 2]\n      token2: [B, XX9]\n",
         "constraint: residue 1 (LIG1) of chain B has no atom 'XX9'"},
        {"constraints:\n  - bond:\n      atom1: [A, 4, QQ]\n      atom2: [B, 1, C21]\n",
         "constraint: residue 4 (ALA) of chain A has no atom 'QQ'"},
        {"constraints:\n  - bond:\n      atom1: [A, x, CA]\n      atom2: [B, 1, C21]\n",
         "constraint: residue 'x' of chain A is not a number"},
        {"constraints:\n  - contact:\n      token1: [A, CA]\n      token2: [B, C21]\n",
         "constraint: chain A is a polymer: give a residue number, not 'CA'"},
        {"constraints:\n  - contact:\n      token1: [A, 3]\n      token2: [B, 1]\n",
         "constraint: chain B is a ligand: name one of its atoms, not residue 1"},
    };
    int k = 0;
    for (const auto& [constraint, message] : cases) {
        const std::string name = "c" + std::to_string(k++) + ".yaml";
        const std::string in = boltz_yaml(name, lig + constraint);
        const std::string log = p(name + ".log");
        expect_clean_failure("predict " + in + kBoltzFast + " --quiet --log " + log, message);
        EXPECT_FALSE(fs::exists(log) && io::read_file(log).find("loading weights") != std::string::npos)
            << message;
    }
    // a modification's CCD code too
    write("mod.yaml", "version: 1\nsequences:\n  - protein:\n      id: A\n      sequence: MKV\n"
                      "      msa: empty\n      modifications:\n        - position: 2\n          ccd: QQQ\n");
    expect_clean_failure("predict " + p("mod.yaml") + kBoltzFast, "CCD component QQQ not found");
    // the valid ones still fold (the featurizer resolves them the same way)
    Result r = run("predict " + boltz_yaml("good.yaml", lig +
                                           "constraints:\n  - contact:\n      token1: [A, 2]\n"
                                           "      token2: [B, C21]\n") +
                   kBoltzFast + " --quiet --out-dir " + p("good"));
    EXPECT_EQ(r.rc, 0) << r.err;
}

// An ESM C record that is only chain breaks has no residue: it fails alone.
TEST_F(Limits, ChainBreaksAloneAreNoSequence) {
    write("breaks.fa", ">only\n|\n>two\n||\n>ok\nMKV|GSH\n");
    Result r = run("embed " + p("breaks.fa") + " --weights " + kFix + "/esmc_tiny --quiet --out-dir " + p("out"));
    EXPECT_EQ(r.rc, 2) << r.err;
    const auto res = nlohmann::json::parse(io::read_file(p("out/results.json")));
    ASSERT_EQ(res["targets"].size(), 3u);
    for (int i : {0, 1}) {
        EXPECT_EQ(res["targets"][i]["status"], "failed");
        EXPECT_NE(res["targets"][i]["error"].get<std::string>().find("holds only chain breaks ('|'), no residue"),
                  std::string::npos)
            << res["targets"][i];
    }
    EXPECT_EQ(res["targets"][2]["status"], "ok");
    EXPECT_FALSE(fs::exists(p("out/only.npz")));
    EXPECT_TRUE(fs::exists(p("out/ok.npz")));
    // with --quiet, the failures are still reported
    EXPECT_NE(r.err.find("embed: 1 done, 2 failed"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("first failure: only:"), std::string::npos) << r.err;
}

// A filesystem error names its path with the library's reason, never its raw text.
TEST_F(Limits, FilesystemErrorsNameThePath) {
    fs::create_directories(p("w"));
    fs::create_symlink("loop", p("w/loop"));
    fs::create_symlink(p("w"), p("w/self"));
    fs::create_symlink("b", p("a"));
    fs::create_symlink("a", p("b"));
    for (const std::string& w : {p("a"), p("w/loop")}) {
        Result r = run("embed " + fasta() + " --weights " + w + " --out-dir " + p("out"));
        EXPECT_EQ(r.rc, 1);
        EXPECT_NE(r.err.find("[" + w), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("Too many levels of symbolic links"), std::string::npos) << r.err;
        EXPECT_EQ(r.err.find("filesystem error"), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
    Result r = run("embed " + fasta() + " --weights " + p("w") + " --out-dir " + p("out"));
    EXPECT_EQ(r.rc, 1);
    EXPECT_EQ(r.err.find("filesystem error"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("[" + p("w")), std::string::npos) << r.err;
}

}  // namespace
}  // namespace bioinfer
