// Weights download and cache, against a local server in the hub's URL layout: a complete
// download lands in the hub cache layout and is reused; an interrupted one resumes with a Range
// request; a corrupt one is refused and removed; 404s and offline runs say what is missing; a
// cache laid out by Python's huggingface_hub is used as is.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "bioinfer/error.h"
#include "cli_util.h"
#include "hub_server.h"
#include "io/atomic_file.h"
#include "io/model_dir.h"
#include "models/registry.h"
#include "runtime/boltz_cache.h"
#include "runtime/http.h"
#include "runtime/hub.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace bioinfer;
using test::HubServer;

namespace {

const std::string kEsm2 = std::string(BIOINFER_FIXTURES) + "/esm2_tiny";

std::string random_bytes(size_t n, unsigned seed) {
    std::mt19937 g(seed);
    std::string s(n, '\0');
    for (auto& c : s) c = char(g() & 0xff);
    return s;
}

struct Hub : test::CliTest {
    HubServer server;
    runtime::HubOptions opts() const {
        runtime::HubOptions o;
        o.endpoint = server.url();
        o.cache_dir = p("cache");
        o.quiet = true;
        o.retries = 0;
        return o;
    }
    // A repository shaped like a transformers checkpoint: a small git file and a large LFS one.
    std::string weights = random_bytes(300000, 7);
    void add_tiny(const std::string& repo = "test-org/tiny") {
        server.add(repo, std::string(40, 'c'),
                   {{"config.json", {"{\"model_type\": \"esm\"}", false}},
                    {"README.md", {"# tiny", false}},
                    {"model.safetensors", {weights, true}}});
    }
    std::string blob_dir(const std::string& folder = "models--test-org--tiny") const {
        return p("cache/" + folder + "/blobs");
    }
    int count_requests(const std::string& prefix) {
        int n = 0;
        for (const auto& r : server.requests()) n += r.rfind(prefix, 0) == 0;
        return n;
    }
};

}  // namespace

TEST_F(Hub, CompleteDownloadLandsInHubLayoutAndIsReused) {
    add_tiny();
    const std::string snap = runtime::ensure_model(opts(), "test-org/tiny");
    EXPECT_EQ(snap, p("cache/models--test-org--tiny/snapshots/" + std::string(40, 'c')));
    EXPECT_EQ(io::read_file(snap + "/model.safetensors"), weights);
    EXPECT_EQ(io::read_file(snap + "/config.json"), "{\"model_type\": \"esm\"}");
    EXPECT_FALSE(fs::exists(snap + "/README.md"));  // only what the model needs
    // snapshot entries link to blobs named by ETag: the LFS file's SHA-256
    EXPECT_TRUE(fs::is_symlink(snap + "/model.safetensors"));
    EXPECT_EQ(fs::read_symlink(snap + "/model.safetensors").string(),
              "../../blobs/" + HubServer::sha256(weights));
    EXPECT_EQ(io::read_file(p("cache/models--test-org--tiny/refs/main")), std::string(40, 'c'));
    for (auto& e : fs::directory_iterator(blob_dir())) EXPECT_NE(e.path().extension(), ".incomplete");
    // the redirect to the CDN was followed, as on the hub
    EXPECT_EQ(count_requests("GET /cdn/"), 1);
    // a second run finds it complete in the cache and asks the server nothing
    const size_t before = server.requests().size();
    EXPECT_EQ(runtime::ensure_model(opts(), "test-org/tiny"), snap);
    EXPECT_EQ(server.requests().size(), before);
    const runtime::CachedRepo c = runtime::inspect_cache(opts(), "test-org/tiny");
    EXPECT_TRUE(c.complete());
    EXPECT_EQ(c.bytes, int64_t(weights.size() + 21));
}

TEST_F(Hub, InterruptedDownloadResumesWithRange) {
    add_tiny();
    server.cut("model.safetensors", 100000);
    // no retries: the run fails, keeping what arrived
    const std::string err = test::error_of([&] { runtime::ensure_model(opts(), "test-org/tiny"); });
    EXPECT_NE(err.find("run again to resume"), std::string::npos) << err;
    const std::string part = blob_dir() + "/" + HubServer::sha256(weights) + ".incomplete";
    ASSERT_TRUE(fs::exists(part));
    EXPECT_EQ(fs::file_size(part), 100000u);
    EXPECT_FALSE(fs::exists(p("cache/models--test-org--tiny/snapshots/" + std::string(40, 'c') + "/model.safetensors")));
    // the next run asks only for the rest
    const std::string snap = runtime::ensure_model(opts(), "test-org/tiny");
    EXPECT_EQ(io::read_file(snap + "/model.safetensors"), weights);
    EXPECT_EQ(count_requests("GET /cdn/" + HubServer::sha256(weights) + " range=100000"), 1);
    EXPECT_FALSE(fs::exists(part));

    // within one run: retries resume by themselves
    fs::remove_all(p("cache"));
    server.cut("model.safetensors", 50000, 2);
    runtime::HubOptions o = opts();
    o.retries = 3;
    EXPECT_EQ(io::read_file(runtime::ensure_model(o, "test-org/tiny") + "/model.safetensors"), weights);
    EXPECT_EQ(count_requests("GET /cdn/" + HubServer::sha256(weights) + " range=50000"), 1);
    EXPECT_EQ(count_requests("GET /cdn/" + HubServer::sha256(weights) + " range=100000"), 2);
}

TEST_F(Hub, CorruptDownloadIsRefusedAndRemoved) {
    add_tiny();
    server.corrupt("model.safetensors");
    const std::string err = test::error_of([&] { runtime::ensure_model(opts(), "test-org/tiny"); });
    EXPECT_NE(err.find("checksum mismatch"), std::string::npos) << err;
    EXPECT_NE(err.find(HubServer::sha256(weights)), std::string::npos) << err;
    // the config's blob stays (it was fine); nothing of the weights does
    for (auto& e : fs::directory_iterator(blob_dir()))
        EXPECT_EQ(e.path().filename().string().find(HubServer::sha256(weights)), std::string::npos) << e.path();
    EXPECT_FALSE(runtime::inspect_cache(opts(), "test-org/tiny").complete());
}

TEST_F(Hub, NotFoundAndRegistryFallback) {
    const std::string err = test::error_of([&] { runtime::ensure_model(opts(), "test-org/absent"); });
    EXPECT_NE(err.find("HTTP 404"), std::string::npos) << err;
    EXPECT_NE(err.find("test-org/absent"), std::string::npos) << err;
    EXPECT_NE(test::error_of([&] { runtime::ensure_model(opts(), "esm3-huge"); }).find("unknown model 'esm3-huge'"),
              std::string::npos);
    // esmc-300m: the transformers repository is missing here, the esm package's one is served
    const std::string pth = random_bytes(5000, 3);
    server.add("EvolutionaryScale/esmc-300m-2024-12", std::string(40, 'e'),
               {{"data/weights/esmc_300m_2024_12_v0.pth", {pth, true}}, {"README.md", {"x", false}}});
    const std::string snap = runtime::ensure_model(opts(), "esmc-300m");
    EXPECT_EQ(io::read_file(snap + "/data/weights/esmc_300m_2024_12_v0.pth"), pth);
    EXPECT_EQ(count_requests("GET /api/models/biohub/ESMC-300M/revision/main"), 1);
    // a repository without weights is refused before anything is fetched
    server.add("test-org/empty", std::string(40, 'd'), {{"config.json", {"{}", false}}});
    EXPECT_NE(test::error_of([&] { runtime::ensure_model(opts(), "test-org/empty"); }).find("has no model weights"),
              std::string::npos);
}

TEST_F(Hub, ShardedCheckpointFetchesEveryShard) {
    const std::string a = random_bytes(7000, 1), b = random_bytes(9000, 2);
    const std::string index =
        R"({"metadata": {}, "weight_map": {"x": "model-00001-of-00002.safetensors", "y": "model-00002-of-00002.safetensors"}})";
    server.add("test-org/sharded", std::string(40, 'f'),
               {{"config.json", {"{}", false}},
                {"model.safetensors.index.json", {index, false}},
                {"model-00001-of-00002.safetensors", {a, true}},
                {"model-00002-of-00002.safetensors", {b, true}},
                {"pytorch_model.bin", {"unused", true}}});
    const std::string snap = runtime::ensure_model(opts(), "test-org/sharded");
    EXPECT_EQ(io::read_file(snap + "/model-00001-of-00002.safetensors"), a);
    EXPECT_EQ(io::read_file(snap + "/model-00002-of-00002.safetensors"), b);
    EXPECT_FALSE(fs::exists(snap + "/pytorch_model.bin"));
    EXPECT_TRUE(runtime::inspect_cache(opts(), "test-org/sharded").complete());
    // a lost shard makes the copy incomplete, and names it
    fs::remove(snap + "/model-00002-of-00002.safetensors");
    const auto c = runtime::inspect_cache(opts(), "test-org/sharded");
    ASSERT_EQ(c.missing.size(), 1u);
    EXPECT_EQ(c.missing[0], "model-00002-of-00002.safetensors");
}

TEST_F(Hub, OfflineNamesWhatIsMissing) {
    add_tiny();
    runtime::HubOptions o = opts();
    o.offline = true;
    std::string err = test::error_of([&] { runtime::ensure_model(o, "test-org/tiny"); });
    EXPECT_NE(err.find("offline and 'test-org/tiny' is not in the cache"), std::string::npos) << err;
    // a snapshot with its config but no weights
    const fs::path snap = p("cache/models--test-org--tiny/snapshots/abc");
    fs::create_directories(snap);
    test::write_bytes((snap / "config.json").string(), "{}");
    err = test::error_of([&] { runtime::ensure_model(o, "test-org/tiny"); });
    EXPECT_NE(err.find("lacks model weights"), std::string::npos) << err;
    EXPECT_TRUE(server.requests().empty());
}

TEST_F(Hub, PruneRemovesPartialAndSupersededFiles) {
    // a known model's cache folder: the current snapshot, an older one and a partial download
    const std::string folder = "models--facebook--esm2_t6_8M_UR50D";
    server.add("facebook/esm2_t6_8M_UR50D", std::string(40, '1'),
               {{"config.json", {"{\"v\": 1}", false}}, {"model.safetensors", {weights, true}}});
    runtime::ensure_model(opts(), "esm2_t6_8M_UR50D");
    server.add("facebook/esm2_t6_8M_UR50D", std::string(40, '2'),
               {{"config.json", {"{\"v\": 2}", false}}, {"model.safetensors", {weights, true}}});
    // a newer revision: the weights blob is shared, the config is new
    const std::string snap2 = runtime::download_repo(opts(), "facebook/esm2_t6_8M_UR50D");
    test::write_bytes(blob_dir(folder) + "/deadbeef.incomplete", std::string(1000, 'x'));
    int64_t freed = 0;
    const auto lines = runtime::prune_cache(opts(), &freed);
    EXPECT_EQ(lines.size(), 3u);  // old snapshot, its config blob, the partial file
    EXPECT_EQ(freed, 1000 + 8);
    EXPECT_FALSE(fs::exists(p("cache/" + folder + "/snapshots/" + std::string(40, '1'))));
    EXPECT_FALSE(fs::exists(blob_dir(folder) + "/deadbeef.incomplete"));
    EXPECT_EQ(io::read_file(snap2 + "/model.safetensors"), weights);
    EXPECT_EQ(io::read_file(snap2 + "/config.json"), "{\"v\": 2}");
}

// The binary: --model downloads on first use and the run matches --weights; `weights` lists
// the cache; a cache laid out by huggingface_hub (blobs + relative symlinks + refs) is used as is,
// offline.
TEST_F(Hub, CliDownloadsOnFirstUseAndReusesPythonCache) {
    std::map<std::string, HubServer::File> files;
    for (const char* f : {"config.json", "model.safetensors", "vocab.txt"})
        files[f] = {io::read_file(kEsm2 + "/" + f), std::string(f) != "config.json" && std::string(f) != "vocab.txt"};
    server.add("facebook/esm2_t6_8M_UR50D", std::string(40, 'a'), files);
    const std::string env = "HF_ENDPOINT=" + server.url() + " HF_HUB_CACHE=" + p("cache");
    test::Result r = run("embed MKVLA --model esm2_t6_8M_UR50D --out-dir " + p("out"), env);
    ASSERT_EQ(r.rc, 0) << r.err;
    test::Result w = run("embed MKVLA --weights " + kEsm2 + " --out-dir " + p("ref"));
    ASSERT_EQ(w.rc, 0) << w.err;
    EXPECT_EQ(io::read_file(p("out/seq.npz")), io::read_file(p("ref/seq.npz")));
    // listed as complete, with its path and exact size
    r = run("weights --json", env, p("list.json"));
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto list = nlohmann::json::parse(io::read_file(p("list.json")));
    bool seen = false;
    for (const auto& m : list["models"]) {
        if (m["name"] != "esm2_t6_8M_UR50D") continue;
        seen = true;
        EXPECT_EQ(m["status"], "complete");
        EXPECT_EQ(m["path"], p("cache/models--facebook--esm2_t6_8M_UR50D/snapshots/" + std::string(40, 'a')));
    }
    EXPECT_TRUE(seen);
    // the HF_HOME spelling and a cache written by Python (a plain copy here), offline
    const fs::path py = tmp / "hfhome/hub/models--facebook--esmfold_v1";
    fs::create_directories(py / "blobs");
    fs::create_directories(py / "snapshots/0f1e");
    fs::create_directories(py / "refs");
    test::write_bytes((py / "refs/main").string(), "0f1e");
    for (const char* f : {"config.json", "model.safetensors"}) {
        const std::string id = HubServer::sha256(io::read_file(std::string(BIOINFER_FIXTURES) + "/esmfold_tiny/" + f));
        fs::copy_file(std::string(BIOINFER_FIXTURES) + "/esmfold_tiny/" + f, py / "blobs" / id);
        fs::create_symlink("../../blobs/" + id, py / "snapshots/0f1e" / f);
    }
    r = run("predict MKTAYIAK --model esmfold --num-recycles 0 --out-dir " + p("fold"),
            "HF_HUB_OFFLINE=1 HF_HOME=" + p("hfhome"));
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(fs::exists(p("fold/seq.pdb")));
    // --download through the CLI, and what offline says when a model is absent
    r = run("weights --download esm2_t6_8M_UR50D --quiet", env, p("dl.txt"));
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(io::read_file(p("dl.txt")).find("snapshots/" + std::string(40, 'a')), std::string::npos);
    r = run("weights --download esm2_t12_35M_UR50D --offline", env);
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.err.find("offline and 'facebook/esm2_t12_35M_UR50D' is not in the cache"), std::string::npos) << r.err;
    r = run("weights --download esm2_t12_35M_UR50D --quiet", env);
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.err.find("HTTP 404"), std::string::npos) << r.err;
}

// ESMFold2: the registry names resolve to Biohub's repositories (the transformers layout, ESM C
// bundled), fetched on first use; the fold equals one from the same files given as --weights.
TEST_F(Hub, EsmFold2RegistryNamesFoldOnFirstUse) {
    const std::string dir = std::string(BIOINFER_FIXTURES) + "/esmfold2_tiny";
    std::map<std::string, HubServer::File> files;
    for (const char* f : {"config.json", "model.safetensors"})
        files[f] = {io::read_file(dir + "/" + f), std::string(f) == "model.safetensors"};
    server.add("biohub/ESMFold2", std::string(40, 'e'), files);
    server.add("biohub/ESMFold2-Fast", std::string(40, 'f'), files);
    const std::string env = "HF_ENDPOINT=" + server.url() + " HF_HUB_CACHE=" + p("cache");
    const std::string quick = " --num-recycles 0 --sampling-steps 4 --seed 2";
    test::Result r =
        run("predict MKTAYIAKQR --model esmfold2" + quick + " --out-dir " + p("a"), env);
    ASSERT_EQ(r.rc, 0) << r.err;
    r = run("predict MKTAYIAKQR --model esmfold2-fast" + quick + " --out-dir " + p("b"), env);
    ASSERT_EQ(r.rc, 0) << r.err;
    r = run("predict MKTAYIAKQR --weights " + dir + quick + " --out-dir " + p("c"));
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(io::read_file(p("a/seq.pdb")), io::read_file(p("c/seq.pdb")));
    EXPECT_EQ(io::read_file(p("b/seq.pdb")), io::read_file(p("c/seq.pdb")));
    EXPECT_TRUE(fs::exists(p("cache/models--biohub--ESMFold2/snapshots/" + std::string(40, 'e') +
                             "/model.safetensors")));
}

// Boltz-2: the registry name resolves to boltz-community/boltz-2; boltz2_conf.ckpt and mols.tar
// (not the affinity model, "boltz2-affinity", fetched on its own beside them) land in the hub
// cache, mols.tar unpacked to mols/ beside them, so the snapshot is laid out as boltz's own
// cache; such a cache (~/.boltz, $BOLTZ_CACHE) is a model folder as it is.
TEST_F(Hub, Boltz2DownloadsCheckpointAndMolsIntoABoltzLayout) {
    // never the user's own ~/.boltz
    const char* old_cache = std::getenv("BOLTZ_CACHE");
    const std::string saved = old_cache ? old_cache : "";
    ::setenv("BOLTZ_CACHE", p("no-boltz-cache").c_str(), 1);
    struct Restore {
        std::string v;
        bool had;
        ~Restore() { had ? ::setenv("BOLTZ_CACHE", v.c_str(), 1) : ::unsetenv("BOLTZ_CACHE"); }
    } restore{saved, old_cache != nullptr};

    const models::HubModel* k = models::find_hub_model("boltz2");
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(k->repos, std::vector<std::string>{"boltz-community/boltz-2"});
    // mols.tar as GNU tar writes it, with a name longer than the 100-byte header field
    const std::string ala = random_bytes(3000, 11), lig = random_bytes(700, 12);
    const std::string long_name = std::string(110, 'x') + ".pkl";
    fs::create_directories(p("src/mols"));
    std::ofstream(p("src/mols/ALA.pkl"), std::ios::binary) << ala;
    std::ofstream(p("src/mols/" + long_name), std::ios::binary) << lig;
    ASSERT_EQ(std::system(("tar --format=gnu -C " + p("src") + " -cf " + p("mols.tar") + " mols").c_str()), 0);
    // the tiny model's real checkpoint, so the snapshot opens as a model folder
    const std::string ckpt = io::read_file(std::string(BIOINFER_FIXTURES) + "/boltz2_tiny/boltz2_conf.ckpt");
    const std::string server_file_aff = random_bytes(1000, 14);
    server.add("boltz-community/boltz-2", std::string(40, 'b'),
               {{"boltz2_conf.ckpt", {ckpt, true}},
                {"boltz2_aff.ckpt", {server_file_aff, true}},
                {"mols.tar", {io::read_file(p("mols.tar")), true}},
                {"README.md", {"# boltz-2", false}}});
    const std::string snap = runtime::ensure_model(opts(), "boltz2");
    EXPECT_EQ(snap, p("cache/models--boltz-community--boltz-2/snapshots/" + std::string(40, 'b')));
    EXPECT_EQ(io::read_file(snap + "/boltz2_conf.ckpt"), ckpt);
    EXPECT_EQ(io::read_file(snap + "/mols/ALA.pkl"), ala);
    EXPECT_EQ(io::read_file(snap + "/mols/" + long_name), lig);
    EXPECT_FALSE(fs::exists(snap + "/boltz2_aff.ckpt"));
    EXPECT_TRUE(runtime::is_boltz2_model_dir(snap));
    const runtime::Boltz2Files files = runtime::boltz2_files(snap);
    EXPECT_EQ(files.checkpoint, snap + "/boltz2_conf.ckpt");
    EXPECT_EQ(files.mols_dir, snap + "/mols");
    const io::ModelDir md = io::ModelDir::open(snap);
    EXPECT_TRUE(md.has_config());  // the checkpoint's hyper_parameters
    EXPECT_FALSE(md.names().empty());
    for (const auto& e : fs::directory_iterator(snap))
        EXPECT_NE(e.path().filename().string().rfind(".mols", 0), 0u) << "staging left: " << e.path();
    EXPECT_TRUE(runtime::inspect_cache(opts(), "boltz-community/boltz-2").complete());
    // reused without asking the server
    const size_t before = server.requests().size();
    EXPECT_EQ(runtime::ensure_model(opts(), "boltz2"), snap);
    EXPECT_EQ(server.requests().size(), before);
    // an archive not yet unpacked: incomplete, named; the next run unpacks it without downloading
    fs::remove_all(snap + "/mols");
    const runtime::CachedRepo c = runtime::inspect_cache(opts(), "boltz-community/boltz-2");
    ASSERT_EQ(c.missing.size(), 1u);
    EXPECT_EQ(c.missing[0], "mols/ (unpacked from mols.tar)");
    EXPECT_NE(test::error_of([&] { runtime::boltz2_files(snap); }).find("unpack it"), std::string::npos);
    EXPECT_EQ(runtime::ensure_model(opts(), "boltz2"), snap);
    EXPECT_EQ(io::read_file(snap + "/mols/ALA.pkl"), ala);
    EXPECT_EQ(count_requests("GET /cdn/"), 2);  // the checkpoint and the archive, once each

    // the affinity model is its own entry: boltz2_aff.ckpt alone, into the same snapshot
    const models::HubModel* aff = models::find_hub_model("boltz2-affinity");
    ASSERT_NE(aff, nullptr);
    EXPECT_EQ(aff->files, std::vector<std::string>{"boltz2_aff.ckpt"});
    EXPECT_FALSE(runtime::inspect_cache(opts(), aff->repos[0], aff->files).complete());
    EXPECT_EQ(runtime::ensure_model(opts(), "boltz2-affinity"), snap);
    EXPECT_EQ(io::read_file(snap + "/boltz2_aff.ckpt"), server_file_aff);
    EXPECT_EQ(count_requests("GET /cdn/"), 3);
    EXPECT_TRUE(runtime::inspect_cache(opts(), aff->repos[0], aff->files).complete());
    EXPECT_TRUE(runtime::is_boltz2_model_dir(snap));

    // boltz's own cache folder (here the test fixture, laid out as ~/.boltz) is used as it is,
    // offline, before any download
    const std::string fixture = std::string(BIOINFER_FIXTURES) + "/boltz2_tiny";
    EXPECT_TRUE(runtime::is_boltz2_model_dir(fixture));
    EXPECT_FALSE(runtime::is_boltz2_model_dir(std::string(BIOINFER_FIXTURES) + "/esm2_tiny"));
    ::setenv("BOLTZ_CACHE", fixture.c_str(), 1);
    runtime::HubOptions o = opts();
    o.cache_dir = p("empty-cache");
    o.offline = true;
    EXPECT_EQ(runtime::boltz_cache_path(), fixture);
    EXPECT_EQ(runtime::ensure_model(o, "boltz2"), fixture);
    EXPECT_EQ(runtime::ensure_model(o, "boltz2-affinity"), fixture);  // it holds boltz2_aff.ckpt
    // neither: the offline error names boltz's cache too
    ::setenv("BOLTZ_CACHE", p("no-boltz-cache").c_str(), 1);
    const std::string err = test::error_of([&] { runtime::ensure_model(o, "boltz2"); });
    EXPECT_NE(err.find("boltz's cache " + p("no-boltz-cache")), std::string::npos) << err;
}

// The archive reader: pax path records as Python's tarfile and `tar --format=pax` write them,
// and no entry leaves the target folder.
TEST_F(Hub, TarExtractionPaxAndUnsafePaths) {
    const std::string long_name = std::string(150, 'y') + ".pkl";
    fs::create_directories(p("src/mols/sub"));
    std::ofstream(p("src/mols/sub/" + long_name), std::ios::binary) << "pax body";
    ASSERT_EQ(std::system(("tar --format=pax -C " + p("src") + " -cf " + p("pax.tar") + " mols").c_str()), 0);
    runtime::extract_tar(p("pax.tar"), p("out"));
    EXPECT_EQ(io::read_file(p("out/mols/sub/" + long_name)), "pax body");
    // a header naming ../evil (written by hand: tar itself strips the ..)
    std::string h(512, '\0');
    auto put = [&](size_t at, const std::string& v) { std::copy(v.begin(), v.end(), h.begin() + long(at)); };
    put(0, "../evil");
    put(100, "0000644");
    put(108, "0000000");
    put(116, "0000000");
    put(124, "00000000004");
    put(136, "00000000000");
    h[156] = '0';
    put(257, "ustar");
    put(263, "00");
    put(148, "        ");
    int sum = 0;
    for (char ch : h) sum += uint8_t(ch);
    char cks[8];
    std::snprintf(cks, sizeof cks, "%06o", sum);
    put(148, std::string(cks, 6) + std::string(1, '\0') + " ");
    std::string body = "evil" + std::string(508, '\0');
    io::write_file_atomic(p("evil.tar"), h + body + std::string(1024, '\0'));
    const std::string err = test::error_of([&] { runtime::extract_tar(p("evil.tar"), p("out2")); });
    EXPECT_NE(err.find("leaving the folder"), std::string::npos) << err;
    EXPECT_FALSE(fs::exists(p("evil")));
    // a corrupt header is refused
    h[0] = 'X';
    io::write_file_atomic(p("bad.tar"), h + body);
    EXPECT_NE(test::error_of([&] { runtime::extract_tar(p("bad.tar"), p("out3")); }).find("checksum"),
              std::string::npos);
}

// A hub or mirror is not trusted: every name its answers put into the cache's paths stays inside
// the cache, and a malformed header is an error naming the URL, not a stray exception.
TEST(HubAnswers, NamesOutsideTheCacheAndBadHeadersAreRefused) {
    using runtime::HttpResponse;
    const std::string sha = "0123456789abcdef0123456789abcdef01234567";
    auto listing = [&](const std::string& commit, const std::string& file) {
        return nlohmann::json({{"sha", commit}, {"siblings", {{{"rfilename", file}}}}}).dump();
    };
    const auto ok = runtime::parse_listing(listing(sha, "data/weights/x.pth"), "u");
    EXPECT_EQ(ok.commit, sha);
    EXPECT_EQ(ok.files, std::vector<std::string>{"data/weights/x.pth"});
    for (const std::string bad :
         {"../x", "a/../../x", "/etc/passwd", "a//b", "./a", "a\\b", "a\nb", ""})
        EXPECT_THROW(runtime::parse_listing(listing(sha, bad), "u"), Error) << bad;
    for (const std::string bad : {"..", "../../x", "a/b", ""})
        EXPECT_THROW(runtime::parse_listing(listing(bad, "config.json"), "u"), Error) << bad;
    EXPECT_THROW(runtime::parse_listing(R"({"sha": "abc", "siblings": "x"})", "u"), Error);

    HttpResponse head;
    for (const char* line : {"HTTP/1.1 302 Found\r\n", "ETag: \"old\"\r\n", "HTTP/1.1 200 OK\r\n",
                             "X-Linked-Etag:  W/\"abc123\" \r\n", "Content-Length: 42\r\n", "\r\n"})
        runtime::add_header_line(head, line);
    EXPECT_EQ(head.headers.count("etag"), 0u);  // the redirect's headers were dropped
    const auto h = runtime::parse_file_head(head, "u");
    EXPECT_EQ(h.etag, "abc123");
    EXPECT_EQ(h.size, 42);
    head.headers["content-length"] = "12abc";
    EXPECT_THROW(runtime::parse_file_head(head, "u"), Error);
    head.headers["content-length"] = "99999999999999999999999";
    EXPECT_THROW(runtime::parse_file_head(head, "u"), Error);
    head.headers["content-length"] = "7";
    head.headers["x-linked-etag"] = "../../blobs";
    EXPECT_THROW(runtime::parse_file_head(head, "u"), Error);

    EXPECT_EQ(
        runtime::index_shards(R"({"weight_map": {"a": "m-2.safetensors", "b": "m-1.safetensors",
                                        "c": "m-1.safetensors"}})",
                              "i"),
        (std::vector<std::string>{"m-1.safetensors", "m-2.safetensors"}));
    EXPECT_THROW(runtime::index_shards(R"({"weight_map": {"a": "../../../x"}})", "i"), Error);
}
