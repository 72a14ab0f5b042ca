// Merging shards: check that every shard of the run is there and finished, order the targets by
// their input index, copy (or, for HDF5, rewrite) their files, and write manifest.json and
// results.json without anything that depends on how the run was split or timed.
#include "runtime/merge.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "bioinfer/error.h"
#include "io/atomic_file.h"
#include "io/h5.h"
#include "io/npy.h"
#include "io/untrusted.h"
#include "runtime/embed_pipeline.h"

namespace bioinfer::runtime {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct ShardOut {
    fs::path dir;
    json results, manifest;
};

std::vector<fs::path> expand(const std::vector<std::string>& dirs) {
    std::vector<fs::path> out;
    for (const auto& d : dirs) {
        BI_CHECK(fs::is_directory(d), d, "not a folder");
        std::vector<fs::path> shards;
        for (auto& e : fs::directory_iterator(d))
            if (e.is_directory() && e.path().filename().string().rfind("shard-", 0) == 0) shards.push_back(e.path());
        std::sort(shards.begin(), shards.end());
        if (fs::exists(fs::path(d) / "results.json") || fs::exists(fs::path(d) / "journal.jsonl") || shards.empty())
            out.emplace_back(d);
        out.insert(out.end(), shards.begin(), shards.end());
    }
    return out;
}

// A file a shard's results.json or manifest.json names, checked to stay inside the shard.
std::string listed_file(const json& name, const fs::path& shard) {
    BI_CHECK(name.is_string() && io::is_plain_relative_path(name.get<std::string>()),
             shard.string(),
             "results.json or manifest.json names a file outside the folder: ", name.dump());
    return name.get<std::string>();
}

void copy_atomic(const fs::path& from, const fs::path& to) {
    BI_CHECK(fs::is_regular_file(from), from.string(), "listed in results.json but missing");
    io::AtomicFile f(to.string());
    fs::copy_file(from, f.tmp_path(), fs::copy_options::overwrite_existing);
    f.commit();
}

MergeResult merge_checked(const std::vector<std::string>& dirs, const std::string& out_dir,
                          const std::string& format_req) {
    BI_CHECK(!dirs.empty(), "merge", "name at least one output folder");
    std::vector<ShardOut> shards;
    for (const fs::path& d : expand(dirs)) {
        const fs::path rj = d / "results.json";
        BI_CHECK(fs::exists(rj), d.string(), "not finished (no results.json): run that shard again",
                 fs::exists(d / "journal.jsonl") ? " (its journal lists what it finished)" : "");
        ShardOut s{d, json::parse(io::read_file(rj.string()), nullptr, false), json()};
        BI_CHECK(s.results.is_object() && s.results.contains("targets") &&
                     s.results["targets"].is_array() && s.results.contains("job") &&
                     s.results["job"].is_object() && s.results.contains("tool") &&
                     s.results["tool"].is_string(),
                 rj.string(), "not a bioinfer results.json");
        for (const auto& t : s.results["targets"])
            BI_CHECK(t.is_object(), rj.string(), "a target is not an object");
        if (fs::exists(d / "manifest.json")) {
            s.manifest = json::parse(io::read_file((d / "manifest.json").string()), nullptr, false);
            BI_CHECK(
                s.manifest.is_object() && s.manifest.value("records", json::array()).is_array(),
                (d / "manifest.json").string(), "not a bioinfer manifest.json");
        }
        shards.push_back(std::move(s));
    }
    // one run, every shard once
    const json& job0 = shards[0].results["job"];
    const std::string tool = shards[0].results["tool"];
    const int64_t n_inputs = job0.value("input_records", int64_t(-1));
    const int count = job0.contains("shard") ? job0["shard"].value("count", 1) : 1;
    std::set<int> seen;
    for (const auto& s : shards) {
        const json& job = s.results["job"];
        BI_CHECK(s.results["tool"] == tool, s.dir.string(), "is a ", s.results["tool"].get<std::string>(),
                 " output, ", shards[0].dir.string(), " a ", tool, " one");
        const int c = job.contains("shard") ? job["shard"].value("count", 1) : 1;
        const int i = job.contains("shard") ? job["shard"].value("index", 0) : 0;
        BI_CHECK(c == count, s.dir.string(), "is shard ", i, " of ", c, ", the others of ", count);
        BI_CHECK(job.value("input_records", int64_t(-1)) == n_inputs, s.dir.string(),
                 "ran on a different input (", job.value("input_records", int64_t(-1)), " records, not ", n_inputs, ")");
        for (const char* k : {"model", "format", "include", "layers", "precision", "output_format", "num_recycles"})
            BI_CHECK(job.value(k, json()) == job0.value(k, json()), s.dir.string(), "ran with a different ", k,
                     " than ", shards[0].dir.string());
        BI_CHECK(seen.insert(i).second, s.dir.string(), "shard ", i, " of ", c, " is given twice");
    }
    std::string missing;
    for (int i = 0; i < count; ++i)
        if (!seen.count(i)) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
    BI_CHECK(missing.empty(), "merge", "shard(s) ", missing, " of ", count, " missing: run them, then merge again");

    // targets by input index
    std::map<int64_t, std::pair<const ShardOut*, json>> targets;
    for (const auto& s : shards)
        for (const auto& t : s.results["targets"]) {
            const int64_t idx = t.value("index", int64_t(-1));
            BI_CHECK(idx >= 0 && (n_inputs < 0 || idx < n_inputs), s.dir.string(), "target index ", idx, " out of range");
            BI_CHECK(!targets.count(idx), s.dir.string(), "record ", idx, " ('", t.value("id", ""),
                     "') is in two shards");
            targets[idx] = {&s, t};
        }
    BI_CHECK(n_inputs < 0 || int64_t(targets.size()) == n_inputs, "merge", "the shards hold ", targets.size(),
             " of ", n_inputs, " records");

    fs::create_directories(out_dir);
    const bool embed = tool == "bioinfer embed";
    const std::string format = !format_req.empty() ? format_req : job0.value("format", std::string("npz"));
    BI_CHECK(!embed || format == "npz" || format == "h5", "--format", "expected npz or h5, got '", format, "'");
    std::unique_ptr<io::H5Writer> h5;
    if (embed && format == "h5") h5 = std::make_unique<io::H5Writer>((fs::path(out_dir) / "embeddings.h5").string());
    json merged_targets = json::array(), manifest_records = json::array();
    MergeResult res;
    res.tool = tool;
    res.shards = count;
    int64_t ok = 0, skipped = 0, failed = 0;
    for (auto& [idx, st] : targets) {
        const ShardOut& s = *st.first;
        json t = st.second;
        t.erase("runtime_s");  // timings stay in the shards' results.json
        const std::string status = t.value("status", "");
        if (status == "failed") {
            ++failed;
        } else {
            status == "ok" ? ++ok : ++skipped;
            t["status"] = "ok";
            if (embed) {
                json entry;
                for (const auto& r : s.manifest.value("records", json::array()))
                    if (r.value("id", "") == t.value("id", "")) entry = r;
                BI_CHECK(entry.is_object(), s.dir.string(), "manifest.json lacks record '", t.value("id", ""), "'");
                const std::string stem = fs::path(entry.value("file", "")).stem().string();
                std::vector<std::pair<std::string, io::LoadedArray>> arrays;
                const bool from_h5 = entry.value("file", "") == "embeddings.h5";
                const std::string file = listed_file(entry.value("file", json()), s.dir);
                const std::string id_stem = from_h5 ? fs::path(entry["datasets"][0].get<std::string>()).filename().string() : stem;
                BI_CHECK(io::is_plain_relative_path(id_stem), s.dir.string(),
                         "manifest.json: record '", t.value("id", ""), "' has no usable file name");
                if (format == "npz" && !from_h5) {
                    copy_atomic(s.dir / file, fs::path(out_dir) / file);
                } else {
                    if (from_h5) {
                        const size_t n = entry["arrays"].size();
                        for (auto& [k, shape] : entry["arrays"].items()) {
                            io::LoadedArray a;
                            a.data = io::h5_read((s.dir / "embeddings.h5").string(), h5_dataset(k, id_stem, n), &a.shape);
                            arrays.emplace_back(k, std::move(a));
                        }
                    } else {
                        for (auto& [k, a] : io::read_npz((s.dir / file).string()))
                            arrays.emplace_back(k, std::move(a));
                    }
                    std::sort(arrays.begin(), arrays.end(), [](auto& a, auto& b) { return a.first < b.first; });
                    if (format == "h5") {
                        for (auto& [k, a] : arrays) h5->write(h5_dataset(k, id_stem, arrays.size()), a.shape, a.data.data());
                    } else {
                        std::vector<io::NamedArray> na;
                        for (auto& [k, a] : arrays) na.push_back({k, a.shape, a.data.data()});
                        io::write_npz((fs::path(out_dir) / (id_stem + ".npz")).string(), na);
                    }
                }
                entry.erase("datasets");
                if (format == "h5") {
                    entry["file"] = "embeddings.h5";
                    entry["datasets"] = json::array();
                    for (auto& [k, shape] : entry["arrays"].items())
                        entry["datasets"].push_back(h5_dataset(k, id_stem, entry["arrays"].size()));
                } else {
                    entry["file"] = id_stem + ".npz";
                }
                t["files"] = {{"file", entry["file"]}};
                manifest_records.push_back(entry);
            } else {
                const json files = t.value("files", json::object());
                for (auto& [k, f] : files.items()) {
                    const std::string file = listed_file(f, s.dir);
                    copy_atomic(s.dir / file, fs::path(out_dir) / file);
                }
            }
        }
        merged_targets.push_back(t);
    }
    if (h5) h5->commit();
    json job = job0;
    for (const char* k : {"shard", "workers"}) job.erase(k);
    if (embed) job["format"] = format;
    res.targets = int64_t(merged_targets.size());
    res.failed = failed;
    res.exit_status = failed == 0 ? 0 : (ok + skipped == 0 ? 1 : 2);
    if (embed && !manifest_records.empty()) {
        json manifest;
        for (const auto& s : shards)
            if (s.manifest.is_object()) manifest = s.manifest;
        manifest["format"] = format;
        manifest["records"] = manifest_records;
        manifest.erase("h5_layout");
        if (format == "h5") manifest["h5_layout"] = "one array per record: /<id>; several: /<array>/<id>";
        io::write_file_atomic((fs::path(out_dir) / "manifest.json").string(), manifest.dump(2) + "\n");
    }
    const json out = {{"tool", tool},
                      {"job", job},
                      {"counts", {{"total", merged_targets.size()}, {"ok", ok + skipped}, {"failed", failed}}},
                      {"exit_status", res.exit_status},
                      {"targets", merged_targets}};
    io::write_file_atomic((fs::path(out_dir) / "results.json").string(), out.dump(2) + "\n");
    return res;
}

}  // namespace

MergeResult merge_outputs(const std::vector<std::string>& dirs, const std::string& out_dir,
                          const std::string& format) {
    try {
        return merge_checked(dirs, out_dir, format);
    } catch (const json::exception& e) {  // a value of the wrong type deeper in a shard's JSON
        fail("merge", cat("a shard's results.json or manifest.json is damaged: ", e.what()));
    }
}

}  // namespace bioinfer::runtime
