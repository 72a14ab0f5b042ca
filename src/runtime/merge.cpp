// Merging shards: check that every shard of the run is there and finished, order the targets by
// their input index, check every file the merge takes from them (npz and HDF5 arrays read whole),
// write the merged output into a staging folder (its files, manifest.json and results.json,
// without anything that depends on how the run was split or timed), and only then move it into
// place. Any error before the move leaves the output folder as it was.
#include "runtime/merge.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

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

// A file-system call's error as "[path] what: reason".
void check_fs(const std::error_code& ec, const fs::path& path, const std::string& what) {
    if (ec) fail(path.string(), cat(what, ": ", ec.message()));
}

// The status of `p` (`follow`: through a symbolic link); a path that leads nowhere is
// file_type::not_found, any other failure an error naming it.
fs::file_status status_of(const fs::path& p, bool follow = true) {
    std::error_code ec;
    const fs::file_status st = follow ? fs::status(p, ec) : fs::symlink_status(p, ec);
    if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
        check_fs(ec, p, "cannot look up");
    return st;
}

bool is_dir(const fs::path& p) { return fs::is_directory(status_of(p)); }
bool is_file(const fs::path& p) { return fs::is_regular_file(status_of(p)); }
// Whether anything (a dangling symbolic link too) has this name.
bool name_taken(const fs::path& p) { return fs::exists(status_of(p, false)); }

std::vector<fs::path> expand(const std::vector<std::string>& dirs) {
    std::vector<fs::path> out;
    for (const auto& d : dirs) {
        BI_CHECK(is_dir(d), d, "not a folder");
        std::vector<fs::path> shards;
        std::error_code ec;
        for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec))
            if (it->path().filename().string().rfind("shard-", 0) == 0 && is_dir(it->path()))
                shards.push_back(it->path());
        check_fs(ec, d, "cannot list");
        std::sort(shards.begin(), shards.end());
        if (name_taken(fs::path(d) / "results.json") || name_taken(fs::path(d) / "journal.jsonl") ||
            shards.empty())
            out.emplace_back(d);
        out.insert(out.end(), shards.begin(), shards.end());
    }
    return out;
}

// The path as the file system resolves it: absolute, the symbolic links of its existing part
// followed, no "." or ".." and no trailing '/'.
fs::path resolved(const fs::path& p) {
    std::error_code ec;
    fs::path r = fs::absolute(p, ec);
    if (!ec) r = fs::weakly_canonical(r, ec);
    check_fs(ec, p, "cannot resolve");
    if (r.filename().empty()) r = r.parent_path();
    return r;
}

// Whether `inner` is `outer` or lies inside it (both resolved).
bool within(const fs::path& inner, const fs::path& outer) {
    return std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end()).first == outer.end();
}

// Merging into a shard (or into a folder inside one, or into one that holds one) would overwrite
// that shard's results.json and manifest.json, and the run could never be merged again.
void check_apart_from_shards(const std::string& out_dir, const fs::path& out,
                             const std::vector<ShardOut>& shards) {
    for (const auto& s : shards) {
        const fs::path shard = resolved(s.dir);
        const bool inside = within(out, shard), contains = within(shard, out);
        BI_CHECK(!inside && !contains, "--out-dir", "'", out_dir, "' ",
                 inside && contains ? "is" : inside ? "is inside" : "contains", " the input shard '",
                 s.dir.string(), "': merge into a new folder");
    }
}

// A file a shard's results.json or manifest.json names, checked to stay inside the shard.
std::string listed_file(const json& name, const fs::path& shard) {
    BI_CHECK(name.is_string() && io::is_plain_relative_path(name.get<std::string>()),
             shard.string(),
             "results.json or manifest.json names a file outside the folder: ", name.dump());
    return name.get<std::string>();
}

// One file of the merged output, from one file of a shard: copied as it is, or (a record's
// embeddings converted between npz and HDF5) its arrays read and written. `to` is the output's
// file, "embeddings.h5" for a record's datasets in the merged HDF5 file.
struct Output {
    fs::path from;
    std::string to;
    bool copy = true;
    json arrays;       // embeddings: the record's arrays as manifest.json lists them (name -> shape)
    std::string stem;  // embeddings: the record's file stem, its datasets' name
    bool from_h5 = false;  // embeddings: `from` is the shard's embeddings.h5
};

// A record's arrays, sorted by name, read whole from the shard's npz (every member's CRC-32 and
// .npy header checked) or its embeddings.h5, and checked against what manifest.json lists.
std::vector<std::pair<std::string, io::LoadedArray>> read_arrays(const Output& o) {
    std::vector<std::pair<std::string, io::LoadedArray>> arrays;
    if (o.from_h5) {
        for (auto& [k, shape] : o.arrays.items()) {
            io::LoadedArray a;
            a.data = io::h5_read(o.from.string(), h5_dataset(k, o.stem, o.arrays.size()), &a.shape);
            arrays.emplace_back(k, std::move(a));
        }
    } else {
        for (auto& [k, a] : io::read_npz(o.from.string())) arrays.emplace_back(k, std::move(a));
    }
    std::sort(arrays.begin(), arrays.end(), [](auto& a, auto& b) { return a.first < b.first; });
    json found = json::object();
    for (auto& [k, a] : arrays) found[k] = a.shape;
    BI_CHECK(found == o.arrays, o.from.string(), "holds the arrays ", found.dump(),
             ", manifest.json lists ", o.arrays.dump());
    return arrays;
}

// Before anything is written: the file is there, and an npz or a record's HDF5 datasets read
// back whole and as manifest.json lists them.
void check_source(const Output& o) {
    BI_CHECK(is_file(o.from), o.from.string(),
             name_taken(o.from) ? "is not a regular file" : "listed in results.json but missing");
    if (o.arrays.is_object()) read_arrays(o);
    else if (o.from.extension() == ".npz") io::read_npz(o.from.string());
}

// The merge's staging folder: a hidden folder beside the output folder (in its nearest existing
// ancestor, so on the same file system), holding new/ (the merged output as it is written) and
// old/ (the files of an existing output folder that the merge replaces, until all are replaced).
// Removed with everything in it on every path out, unless putting an old file back failed.
class Staging {
public:
    explicit Staging(const fs::path& out) : out_(out) {
        base_ = out.parent_path();
        while (!name_taken(base_)) base_ = base_.parent_path();
        BI_CHECK(is_dir(base_), base_.string(), "not a folder: the output folder cannot go there");
        for (int n = 0;; ++n) {
            std::error_code ec;
            const fs::path d = base_ / cat(".", out.filename().string().substr(0, 200), ".merge-tmp-",
                                           getpid(), "-", n);
            if (fs::create_directory(d, ec)) {
                dir_ = d;
                break;
            }
            check_fs(ec, d, "cannot create the merge's staging folder");
        }
        std::error_code ec;
        fs::create_directory(dir_ / "new", ec);
        check_fs(ec, dir_ / "new", "cannot create");
    }
    ~Staging() {
        std::error_code ec;
        if (!keep_) fs::remove_all(dir_, ec);
    }
    Staging(const Staging&) = delete;
    Staging& operator=(const Staging&) = delete;

    // Where the output's file `name` is written before it is moved into place.
    fs::path file(const std::string& name) const {
        const fs::path f = dir_ / "new" / name;
        std::error_code ec;
        fs::create_directories(f.parent_path(), ec);
        check_fs(ec, f.parent_path(), "cannot create");
        return f;
    }

    // Moves the files `names` (results.json last) into the output folder: a new one is the
    // staging folder's new/ renamed; into an existing one, each file replaces its namesake.
    void publish(const std::vector<std::string>& names) {
        if (!name_taken(out_)) {
            std::vector<fs::path> made;  // the missing folders above the output folder
            for (fs::path p = out_.parent_path(); p != base_; p = p.parent_path()) made.push_back(p);
            std::error_code ec;
            fs::create_directories(out_.parent_path(), ec);
            if (!ec) fs::rename(dir_ / "new", out_, ec);
            std::error_code undo;
            if (ec)
                for (const auto& p : made) fs::remove(p, undo);  // each only if still empty
            check_fs(ec, out_, "cannot move the merged output into place");
            return;
        }
        replace_files(names);
    }

private:
    // Everything that can fail is tried before the first file moves: the folders the files go
    // into, and a hard link (or, where the file system has none, a copy) in old/ of each file
    // replaced. A rename that fails after that is undone: every file moved so far put back.
    void replace_files(const std::vector<std::string>& names) {
        std::vector<fs::path> made, backup(names.size());
        auto undo_folders = [&] {
            std::error_code ec;
            for (auto it = made.rbegin(); it != made.rend(); ++it) fs::remove(*it, ec);
        };
        try {
            for (size_t i = 0; i < names.size(); ++i) {
                const fs::path to = out_ / names[i];
                const size_t at = made.size();
                for (fs::path p = to.parent_path(); !name_taken(p); p = p.parent_path())
                    made.insert(made.begin() + long(at), p);  // outermost first
                std::error_code ec;
                fs::create_directories(to.parent_path(), ec);
                check_fs(ec, to.parent_path(), "cannot create");
                if (!name_taken(to)) continue;
                BI_CHECK(!is_dir(to), to.string(), "is a folder where the merge writes a file");
                backup[i] = dir_ / "old" / std::to_string(i);
                fs::create_directories(backup[i].parent_path(), ec);
                if (!ec) fs::create_hard_link(to, backup[i], ec);
                if (ec) fs::copy_file(to, backup[i], ec);
                check_fs(ec, to, "cannot keep a copy of the file the merge replaces");
            }
        } catch (...) {
            undo_folders();
            throw;
        }
        for (size_t i = 0; i < names.size(); ++i) {
            const fs::path to = out_ / names[i];
            std::error_code ec;
            fs::rename(dir_ / "new" / names[i], to, ec);
            if (!ec) continue;
            std::string lost;
            for (size_t j = i; j-- > 0;) {
                const fs::path done = out_ / names[j];
                std::error_code undo;
                if (backup[j].empty()) fs::remove(done, undo);
                else fs::rename(backup[j], done, undo);
                if (undo) lost += cat(" ", done.string(), " (", backup[j].string(), ")");
            }
            undo_folders();
            keep_ = !lost.empty();
            check_fs(ec, to, lost.empty() ? "cannot move the merged file into place (the output "
                                             "folder is as it was)"
                                           : "cannot move the merged file into place, and these "
                                             "could not be put back:" + lost);
        }
    }

    fs::path out_, base_, dir_;
    bool keep_ = false;
};

MergeResult merge_checked(const std::vector<std::string>& dirs, const std::string& out_dir,
                          const std::string& format_req) {
    BI_CHECK(!dirs.empty(), "merge", "name at least one output folder");
    std::vector<ShardOut> shards;
    for (const fs::path& d : expand(dirs)) {
        const fs::path rj = d / "results.json";
        BI_CHECK(name_taken(rj), d.string(), "not finished (no results.json): run that shard again",
                 name_taken(d / "journal.jsonl") ? " (its journal lists what it finished)" : "");
        ShardOut s{d, json::parse(io::read_file(rj.string()), nullptr, false), json()};
        BI_CHECK(s.results.is_object() && s.results.contains("targets") &&
                     s.results["targets"].is_array() && s.results.contains("job") &&
                     s.results["job"].is_object() && s.results.contains("tool") &&
                     s.results["tool"].is_string(),
                 rj.string(), "not a bioinfer results.json");
        for (const auto& t : s.results["targets"])
            BI_CHECK(t.is_object(), rj.string(), "a target is not an object");
        if (name_taken(d / "manifest.json")) {
            s.manifest = json::parse(io::read_file((d / "manifest.json").string()), nullptr, false);
            BI_CHECK(
                s.manifest.is_object() && s.manifest.value("records", json::array()).is_array(),
                (d / "manifest.json").string(), "not a bioinfer manifest.json");
        }
        shards.push_back(std::move(s));
    }
    const fs::path out = resolved(out_dir);
    check_apart_from_shards(out_dir, out, shards);
    BI_CHECK(!name_taken(out) || is_dir(out), "--out-dir", "'", out_dir,
             "' exists and is not a folder");

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

    const bool embed = tool == "bioinfer embed";
    const std::string format = !format_req.empty() ? format_req : job0.value("format", std::string("npz"));
    BI_CHECK(!embed || format == "npz" || format == "h5", "--format", "expected npz or h5, got '", format, "'");

    // What the merged output holds, from which shard files; nothing is read or written yet.
    std::vector<Output> outputs;
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
                BI_CHECK(entry.value("arrays", json()).is_object(), s.dir.string(),
                         "manifest.json: record '", t.value("id", ""), "' lists no arrays");
                const bool from_h5 = entry.value("file", "") == "embeddings.h5";
                const std::string file = listed_file(entry.value("file", json()), s.dir);
                const std::string id_stem =
                    from_h5 ? fs::path(entry["datasets"][0].get<std::string>()).filename().string()
                            : fs::path(file).stem().string();
                BI_CHECK(io::is_plain_relative_path(id_stem), s.dir.string(),
                         "manifest.json: record '", t.value("id", ""), "' has no usable file name");
                outputs.push_back(Output{s.dir / file,
                                         format == "h5" ? "embeddings.h5" : id_stem + ".npz",
                                         format == "npz" && !from_h5, entry["arrays"], id_stem,
                                         from_h5});
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
                    outputs.push_back(Output{s.dir / file, file, true, json(), "", false});
                }
            }
        }
        merged_targets.push_back(t);
    }
    json job = job0;
    for (const char* k : {"shard", "workers"}) job.erase(k);
    if (embed) job["format"] = format;
    res.targets = int64_t(merged_targets.size());
    res.failed = failed;
    res.exit_status = failed == 0 ? 0 : (ok + skipped == 0 ? 1 : 2);

    // Every file checked before anything is written.
    for (const auto& o : outputs) check_source(o);

    Staging staging(out);
    std::vector<std::string> names;  // the output's files, in the order they are moved into place
    auto add_name = [&](const std::string& name) {
        if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    };
    std::unique_ptr<io::H5Writer> h5;
    for (const auto& o : outputs) {
        add_name(o.to);
        if (o.copy) {
            std::error_code ec;
            fs::copy_file(o.from, staging.file(o.to), fs::copy_options::overwrite_existing, ec);
            check_fs(ec, o.from, "cannot copy into the merged output");
            continue;
        }
        const auto arrays = read_arrays(o);
        if (o.to == "embeddings.h5") {
            if (!h5) h5 = std::make_unique<io::H5Writer>(staging.file(o.to).string());
            for (auto& [k, a] : arrays)
                h5->write(h5_dataset(k, o.stem, arrays.size()), a.shape, a.data.data());
        } else {
            std::vector<io::NamedArray> na;
            for (auto& [k, a] : arrays) na.push_back({k, a.shape, a.data.data()});
            io::write_npz(staging.file(o.to).string(), na);
        }
    }
    if (h5) h5->commit();
    if (embed && !manifest_records.empty()) {
        json manifest;
        for (const auto& s : shards)
            if (s.manifest.is_object()) manifest = s.manifest;
        manifest["format"] = format;
        manifest["records"] = manifest_records;
        manifest.erase("h5_layout");
        if (format == "h5") manifest["h5_layout"] = "one array per record: /<id>; several: /<array>/<id>";
        io::write_file_atomic(staging.file("manifest.json").string(), manifest.dump(2) + "\n");
        add_name("manifest.json");
    }
    const json merged = {{"tool", tool},
                         {"job", job},
                         {"counts",
                          {{"total", merged_targets.size()}, {"ok", ok + skipped}, {"failed", failed}}},
                         {"exit_status", res.exit_status},
                         {"targets", merged_targets}};
    io::write_file_atomic(staging.file("results.json").string(), merged.dump(2) + "\n");
    add_name("results.json");
    staging.publish(names);
    return res;
}

}  // namespace

MergeResult merge_outputs(const std::vector<std::string>& dirs, const std::string& out_dir,
                          const std::string& format) {
    try {
        return merge_checked(dirs, out_dir, format);
    } catch (const json::exception& e) {  // a value of the wrong type deeper in a shard's JSON
        fail("merge", cat("a shard's results.json or manifest.json is damaged: ", e.what()));
    } catch (const fs::filesystem_error& e) {  // one the checks above did not catch where it arose
        fail(e.path1().string(), e.code().message());
    }
}

}  // namespace bioinfer::runtime
