// gzip (zlib's inflate with the gzip wrapper) and tar, both over bytes already in memory or a
// stream: nothing is written until a caller decides where.
#include "io/archive.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "bioinfer/error.h"
#include "io/untrusted.h"

namespace bioinfer::io {

namespace fs = std::filesystem;

std::string gunzip(const std::string& gz, int64_t max_bytes, const std::string& where) {
    BI_CHECK(gz.size() >= 2 && uint8_t(gz[0]) == 0x1f && uint8_t(gz[1]) == 0x8b, where,
             "not a gzip file");
    z_stream z{};
    BI_CHECK(inflateInit2(&z, 16 + MAX_WBITS) == Z_OK, where, "cannot start gzip decompression");
    std::string out;
    char buf[1 << 16];
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
    z.avail_in = uInt(gz.size());
    int rc = Z_OK;
    for (;;) {
        z.next_out = reinterpret_cast<Bytef*>(buf);
        z.avail_out = sizeof buf;
        rc = inflate(&z, Z_NO_FLUSH);
        if (rc != Z_OK && rc != Z_STREAM_END) break;
        out.append(buf, sizeof buf - z.avail_out);
        if (int64_t(out.size()) > max_bytes) {
            inflateEnd(&z);
            fail(where, cat("decompresses to more than ", max_bytes, " bytes"));
        }
        if (rc == Z_STREAM_END) {
            if (z.avail_in == 0) break;
            if (inflateReset(&z) != Z_OK) break;  // another gzip member follows
        } else if (z.avail_in == 0 && z.avail_out != 0) {
            rc = Z_BUF_ERROR;  // the input ended inside a member
            break;
        }
    }
    inflateEnd(&z);
    BI_CHECK(rc == Z_STREAM_END, where, "corrupt or truncated gzip data");
    return out;
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

std::string field(const char* f, size_t n) { return std::string(f, strnlen(f, n)); }

// A relative path without "..", or empty for the archive's root.
std::string safe_relative(const std::string& name, const std::string& where) {
    const fs::path p = fs::path(name).lexically_normal();
    BI_CHECK(!p.is_absolute(), where, "tar entry with an absolute path: '", name, "'");
    for (const auto& part : p)
        BI_CHECK(part != "..", where, "tar entry leaving the folder: '", name, "'");
    std::string s = p == "." ? std::string() : p.string();
    while (!s.empty() && s.back() == '/') s.pop_back();
    return s;
}

void skip(std::istream& in, int64_t n, const std::string& where, const std::string& name) {
    in.ignore(n);
    BI_CHECK(in.gcount() == n, where, "truncated tar entry '", name, "'");
}

}  // namespace

std::string read_tar_body(const TarEntry& e, std::istream& in, int64_t max_bytes,
                          const std::string& where) {
    BI_CHECK(e.size <= max_bytes, where, "'", e.path, "' is ", e.size, " bytes, more than ",
             max_bytes);
    std::string s(size_t(e.size), '\0');
    in.read(s.data(), e.size);
    BI_CHECK(in.gcount() == e.size, where, "truncated tar entry '", e.path, "'");
    return s;
}

void read_tar(std::istream& in, const std::string& where,
              const std::function<void(const TarEntry&, std::istream&)>& on_entry) {
    std::string long_name;  // from a GNU 'L' entry or a pax 'path' record, for the next entry
    char h[512];
    for (;;) {
        in.read(h, 512);
        if (in.gcount() == 0) break;  // archives without the two end blocks
        BI_CHECK(in.gcount() == 512, where, "truncated tar header");
        if (std::all_of(h, h + 512, [](char c) { return c == 0; })) break;  // end of archive
        // checksum: the header's bytes with the checksum field as spaces
        int64_t sum = 0;
        for (int i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : uint8_t(h[i]);
        BI_CHECK(sum == tar_number(h + 148, 8, where), where, "corrupt tar header (checksum)");
        const int64_t size = tar_number(h + 124, 12, where);
        const char type = h[156];
        std::string name = field(h, 100);
        if (std::memcmp(h + 257, "ustar", 5) == 0 && h[345])
            name = field(h + 345, 155) + "/" + name;
        if (!long_name.empty()) {
            name = long_name;
            long_name.clear();
        }
        const int64_t padding = (size + 511) / 512 * 512 - size;
        TarEntry e{name, false, size};
        if (type == 'L') {  // GNU long name of the next entry
            long_name = read_tar_body(e, in, 1 << 16, where);
            long_name.resize(strnlen(long_name.c_str(), long_name.size()));
            skip(in, padding, where, name);
            continue;
        }
        if (type == 'x') {  // pax records "<len> key=value\n"
            const std::string recs = read_tar_body(e, in, 1 << 20, where);
            skip(in, padding, where, name);
            for (size_t at = 0; at < recs.size();) {
                const size_t sp = recs.find(' ', at);
                if (sp == std::string::npos) break;
                int64_t len_i = 0;
                BI_CHECK(parse_decimal(std::string_view(recs).substr(at, sp - at), 9, len_i), where,
                         "corrupt pax header");
                const size_t len = size_t(len_i);
                BI_CHECK(len > 0 && at + len <= recs.size() && sp + 2 <= at + len, where,
                         "corrupt pax header");
                const std::string kv = recs.substr(sp + 1, at + len - sp - 2);
                if (kv.rfind("path=", 0) == 0) long_name = kv.substr(5);
                at += len;
            }
            continue;
        }
        e.path = safe_relative(name, where);
        if (type == '5') {
            e.directory = true;
            e.size = 0;
            if (!e.path.empty()) on_entry(e, in);
            skip(in, size + padding, where, name);
            continue;
        }
        if (type != '0' && type != '\0' && type != '7') {  // links, devices, global pax: skipped
            skip(in, size + padding, where, name);
            continue;
        }
        BI_CHECK(!e.path.empty(), where, "tar file entry without a name");
        const std::streampos start = in.tellg();
        on_entry(e, in);
        // a reader that stopped early is caught up (streams that cannot tell are trusted)
        if (start != std::streampos(-1) && in.tellg() != std::streampos(-1)) {
            const int64_t done = int64_t(in.tellg() - start);
            BI_CHECK(done <= size, where, "tar entry '", name, "' read past its end");
            skip(in, size - done, where, name);
        }
        skip(in, padding, where, name);
    }
}

}  // namespace bioinfer::io
