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
#include "io/untrusted.h"

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

namespace {

// A tar header's octal number field (NUL/space terminated; GNU base-256 for large sizes).
int64_t tar_number(const char* f, size_t n, const std::string& where) {
    if (uint8_t(f[0]) & 0x80) {
        int64_t v = 0;
        for (size_t i = 1; i < n; ++i) v = (v << 8) | uint8_t(f[i]);
        return v;
    }
    int64_t v = 0;
    size_t i = 0;
    while (i < n && f[i] == ' ') ++i;
    for (; i < n && f[i] >= '0' && f[i] <= '7'; ++i) v = v * 8 + (f[i] - '0');
    BI_CHECK(i == n || f[i] == '\0' || f[i] == ' ', where, "corrupt tar header (bad number field)");
    return v;
}

std::string field(const char* f, size_t n) {
    return std::string(f, strnlen(f, n));
}

// A relative path without "..", or empty when the entry must not be written.
fs::path safe_relative(const std::string& name, const std::string& where) {
    const fs::path p = fs::path(name).lexically_normal();
    BI_CHECK(!p.is_absolute(), where, "tar entry with an absolute path: '", name, "'");
    for (const auto& part : p)
        BI_CHECK(part != "..", where, "tar entry leaving the folder: '", name, "'");
    return p == "." ? fs::path() : p;
}

}  // namespace

void extract_tar(const std::string& tar_path, const std::string& dest) {
    std::ifstream in(tar_path, std::ios::binary);
    BI_CHECK(in, tar_path, "cannot open: ", std::strerror(errno));
    fs::create_directories(dest);
    std::string long_name;  // from a GNU 'L' entry or a pax 'path' record, for the next entry
    std::vector<char> buf(size_t(1) << 20);
    char h[512];
    for (;;) {
        in.read(h, 512);
        if (in.gcount() == 0) break;  // archives without the two end blocks
        BI_CHECK(in.gcount() == 512, tar_path, "truncated tar header");
        if (std::all_of(h, h + 512, [](char c) { return c == 0; })) break;  // end of archive
        // checksum: the header's bytes with the checksum field as spaces
        int64_t sum = 0;
        for (int i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : uint8_t(h[i]);
        BI_CHECK(sum == tar_number(h + 148, 8, tar_path), tar_path,
                 "corrupt tar header (checksum)");
        const int64_t size = tar_number(h + 124, 12, tar_path);
        const char type = h[156];
        std::string name = field(h, 100);
        if (std::memcmp(h + 257, "ustar", 5) == 0 && h[345])
            name = field(h + 345, 155) + "/" + name;
        if (!long_name.empty()) {
            name = long_name;
            long_name.clear();
        }
        const int64_t padded = (size + 511) / 512 * 512;
        auto read_body = [&]() {
            std::string s(size_t(size), '\0');
            in.read(s.data(), size);
            BI_CHECK(in.gcount() == size, tar_path, "truncated tar entry '", name, "'");
            in.ignore(padded - size);
            return s;
        };
        if (type == 'L') {  // GNU long name of the next entry
            long_name = read_body();
            long_name.resize(strnlen(long_name.c_str(), long_name.size()));
            continue;
        }
        if (type == 'x') {  // pax records "<len> key=value\n"
            const std::string recs = read_body();
            for (size_t at = 0; at < recs.size();) {
                const size_t sp = recs.find(' ', at);
                if (sp == std::string::npos) break;
                int64_t len_i = 0;
                BI_CHECK(io::parse_decimal(std::string_view(recs).substr(at, sp - at), 9, len_i),
                         tar_path, "corrupt pax header");
                const size_t len = size_t(len_i);
                BI_CHECK(len > 0 && at + len <= recs.size(), tar_path, "corrupt pax header");
                const std::string kv = recs.substr(sp + 1, at + len - sp - 2);
                if (kv.rfind("path=", 0) == 0) long_name = kv.substr(5);
                at += len;
            }
            continue;
        }
        const fs::path rel = safe_relative(name, tar_path);
        if (type == '5') {
            if (!rel.empty()) fs::create_directories(fs::path(dest) / rel);
            continue;
        }
        if (type != '0' && type != '\0' && type != '7') {  // links, devices, global pax: skipped
            in.ignore(padded);
            continue;
        }
        BI_CHECK(!rel.empty(), tar_path, "tar file entry without a name");
        const fs::path out = fs::path(dest) / rel;
        fs::create_directories(out.parent_path());
        std::ofstream o(out, std::ios::binary | std::ios::trunc);
        BI_CHECK(o, out.string(), "cannot open for writing: ", std::strerror(errno));
        for (int64_t left = size; left > 0;) {
            const int64_t n = std::min<int64_t>(left, int64_t(buf.size()));
            in.read(buf.data(), n);
            BI_CHECK(in.gcount() == n, tar_path, "truncated tar entry '", name, "'");
            o.write(buf.data(), n);
            left -= n;
        }
        BI_CHECK(o.flush(), out.string(), "write failed: ", std::strerror(errno));
        in.ignore(padded - size);
    }
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
