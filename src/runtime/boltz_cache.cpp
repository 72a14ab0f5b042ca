// boltz's cache layout (boltz.main.download_boltz2): <cache>/boltz2_conf.ckpt,
// <cache>/boltz2_aff.ckpt, <cache>/mols.tar and <cache>/mols/ unpacked from it.
#include "runtime/boltz_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "bioinfer/error.h"
#include "io/archive.h"

namespace bioinfer::runtime {

namespace fs = std::filesystem;

std::string boltz_cache_path() {
    const char* env = std::getenv("BOLTZ_CACHE");
    if (env && *env) {
        std::string p = env;
        if (p.rfind("~/", 0) == 0 && std::getenv("HOME"))
            p = std::string(std::getenv("HOME")) + p.substr(1);
        return p;
    }
    const char* home = std::getenv("HOME");
    return std::string(home ? home : "") + "/.boltz";
}

bool is_boltz2_model_dir(const std::string& dir) {
    std::error_code ec;
    return !dir.empty() && fs::is_regular_file(fs::path(dir) / boltz2::kCheckpoint, ec) &&
           fs::is_directory(fs::path(dir) / boltz2::kMolsDir, ec);
}

bool open_boltz2_cache(const std::string& dir) {
    std::error_code ec;
    if (dir.empty() || !fs::is_regular_file(fs::path(dir) / boltz2::kCheckpoint, ec)) return false;
    if (fs::is_directory(fs::path(dir) / boltz2::kMolsDir, ec)) return true;
    if (!fs::is_regular_file(fs::path(dir) / boltz2::kMolsTar, ec)) return false;
    unpack_boltz2_mols(dir);
    return true;
}

Boltz2Files boltz2_files(const std::string& dir) {
    const fs::path d(dir);
    std::error_code ec;
    BI_CHECK(fs::is_regular_file(d / boltz2::kCheckpoint, ec), dir, "not a Boltz-2 model folder: no ",
             boltz2::kCheckpoint);
    BI_CHECK(fs::is_directory(d / boltz2::kMolsDir, ec), dir, "no ", boltz2::kMolsDir, "/ folder",
             fs::exists(d / boltz2::kMolsTar, ec)
                 ? " (mols.tar is there: unpack it, `tar -xf mols.tar`)"
                 : "",
             "; boltz's cache (~/.boltz) holds both after `boltz predict` ran once");
    return {(d / boltz2::kCheckpoint).string(), (d / boltz2::kMolsDir).string()};
}

void extract_tar(const std::string& tar_path, const std::string& dest) {
    std::ifstream in(tar_path, std::ios::binary);
    BI_CHECK(in, tar_path, "cannot open: ", std::strerror(errno));
    fs::create_directories(dest);
    std::vector<char> buf(size_t(1) << 20);
    io::read_tar(in, tar_path, [&](const io::TarEntry& e, std::istream& body) {
        const fs::path out = fs::path(dest) / e.path;
        if (e.directory) {
            fs::create_directories(out);
            return;
        }
        fs::create_directories(out.parent_path());
        std::ofstream o(out, std::ios::binary | std::ios::trunc);
        BI_CHECK(o, out.string(), "cannot open for writing: ", std::strerror(errno));
        for (int64_t left = e.size; left > 0;) {
            const int64_t n = std::min<int64_t>(left, int64_t(buf.size()));
            body.read(buf.data(), n);
            BI_CHECK(body.gcount() == n, tar_path, "truncated tar entry '", e.path, "'");
            o.write(buf.data(), n);
            left -= n;
        }
        BI_CHECK(o.flush(), out.string(), "write failed: ", std::strerror(errno));
    });
}

bool unpack_boltz2_mols(const std::string& dir) {
    const fs::path d(dir);
    std::error_code ec;
    if (fs::is_directory(d / boltz2::kMolsDir, ec)) return false;
    BI_CHECK(fs::exists(d / boltz2::kMolsTar, ec), dir, "neither ", boltz2::kMolsDir, "/ nor ",
             boltz2::kMolsTar);
    const fs::path stage = d / (".mols.unpack." + std::to_string(getpid()));
    fs::remove_all(stage, ec);
    try {
        extract_tar((d / boltz2::kMolsTar).string(), stage.string());
        // boltz's archive holds mols/...; one without that top folder is taken as the folder itself
        const fs::path inner =
            fs::is_directory(stage / boltz2::kMolsDir) ? stage / boltz2::kMolsDir : stage;
        fs::rename(inner, d / boltz2::kMolsDir);
    } catch (...) {
        fs::remove_all(stage, ec);
        throw;
    }
    fs::remove_all(stage, ec);
    return true;
}

}  // namespace bioinfer::runtime
