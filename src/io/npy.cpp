// npz = zip archive of .npy members. We write "stored" (uncompressed) members with CRC-32.
#include "io/npy.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "bioinfer/error.h"
#include "io/atomic_file.h"
#include "io/untrusted.h"

namespace bioinfer::io {

std::string npy_bytes(const Shape& shape, const float* data) {
    std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
    for (size_t i = 0; i < shape.size(); ++i) dict += std::to_string(shape[i]) + ",";
    if (shape.size() > 1) dict.pop_back();
    dict += "), }";
    // magic(6) + version(2) + len(2) + dict + '\n', padded to a multiple of 64.
    size_t total = 10 + dict.size() + 1;
    dict.append((64 - total % 64) % 64, ' ');
    dict += '\n';
    std::string out = "\x93NUMPY";
    out += '\x01';
    out += '\x00';
    const uint16_t hl = uint16_t(dict.size());
    out += char(hl & 0xff);
    out += char(hl >> 8);
    out += dict;
    out.append(reinterpret_cast<const char*>(data), size_t(shape_numel(shape)) * 4);
    return out;
}

namespace {

void put16(std::string& s, uint16_t v) {
    s += char(v & 0xff);
    s += char(v >> 8);
}
void put32(std::string& s, uint32_t v) {
    for (int i = 0; i < 4; ++i) s += char((v >> (8 * i)) & 0xff);
}
uint32_t get32(const std::string& s, size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t(uint8_t(s[at + i])) << (8 * i);
    return v;
}
uint16_t get16(const std::string& s, size_t at) {
    return uint16_t(uint8_t(s[at]) | uint16_t(uint8_t(s[at + 1])) << 8);
}

}  // namespace

void write_npz(const std::string& path, const std::vector<NamedArray>& arrays) {
    std::string zip, central;
    for (const auto& a : arrays) {
        const std::string name = a.name + ".npy";
        const std::string body = npy_bytes(a.shape, a.data);
        BI_CHECK(body.size() < 0xffffffffu && zip.size() < 0xffffffffu, path, "array '", a.name,
                 "' too large for a zip member");
        const uint32_t crc = uint32_t(crc32(0L, reinterpret_cast<const Bytef*>(body.data()),
                                            uInt(body.size())));
        const uint32_t offset = uint32_t(zip.size());
        put32(zip, 0x04034b50);
        put16(zip, 20);  // version needed
        put16(zip, 0);   // flags
        put16(zip, 0);   // stored
        put16(zip, 0);   // time
        put16(zip, 0x21);  // date (1980-01-01)
        put32(zip, crc);
        put32(zip, uint32_t(body.size()));
        put32(zip, uint32_t(body.size()));
        put16(zip, uint16_t(name.size()));
        put16(zip, 0);
        zip += name;
        zip += body;

        put32(central, 0x02014b50);
        put16(central, 20);
        put16(central, 20);
        put16(central, 0);
        put16(central, 0);
        put16(central, 0);
        put16(central, 0x21);
        put32(central, crc);
        put32(central, uint32_t(body.size()));
        put32(central, uint32_t(body.size()));
        put16(central, uint16_t(name.size()));
        put16(central, 0);
        put16(central, 0);
        put16(central, 0);
        put16(central, 0);
        put32(central, 0);
        put32(central, offset);
        central += name;
    }
    const uint32_t cd_offset = uint32_t(zip.size());
    zip += central;
    put32(zip, 0x06054b50);
    put16(zip, 0);
    put16(zip, 0);
    put16(zip, uint16_t(arrays.size()));
    put16(zip, uint16_t(arrays.size()));
    put32(zip, uint32_t(central.size()));
    put32(zip, cd_offset);
    put16(zip, 0);
    write_file_atomic(path, zip);
}

namespace {

// Walks an uncompressed npz member by member. `read(offset, n)` returns n bytes of the file at
// offset (fewer at its end); `take(name, shape, data_offset, npy_bytes)` gets each float32
// array, with the ".npy" suffix dropped from its name.
template <typename Read, typename Take>
void walk_npz(const std::string& path, const Read& read, const Take& take) {
    size_t at = 0, members = 0;
    for (;;) {
        const std::string h = read(at, 30);
        if (h.size() < 30 || get32(h, 0) != 0x04034b50) break;
        const uint16_t method = get16(h, 8);
        const uint32_t csize = get32(h, 18);
        const uint16_t nlen = get16(h, 26), xlen = get16(h, 28);
        std::string name = read(at + 30, nlen);
        BI_CHECK(method == 0, path, "compressed npz members are not supported");
        const size_t body = at + 30 + nlen + xlen;
        const std::string magic = read(body, 10);
        BI_CHECK(magic.size() == 10 && magic.compare(0, 6, "\x93NUMPY") == 0, path, "member '", name,
                 "' is not .npy");
        const size_t hl = get16(magic, 8);
        const std::string hdr = read(body + 10, hl);
        BI_CHECK(hdr.find("'<f4'") != std::string::npos &&
                     hdr.find("'fortran_order': False") != std::string::npos,
                 path, "member '", name, "' is not C-order float32");
        // the shape: "(d0, d1, ...)", each a decimal count; the product must fit the member
        const size_t key = hdr.find("'shape'");
        const size_t lp = key == std::string::npos ? key : hdr.find('(', key);
        const size_t rp = lp == std::string::npos ? lp : hdr.find(')', lp);
        BI_CHECK(rp != std::string::npos, path, "member '", name,
                 "' has no shape in its .npy header");
        const std::string dims = hdr.substr(lp + 1, rp - lp - 1);
        Shape shape;
        size_t numel = 1;
        const size_t fits = csize / 4;  // the most float32 values the member can hold
        for (size_t p = 0; p < dims.size();) {
            size_t q = dims.find(',', p);
            if (q == std::string::npos) q = dims.size();
            std::string tok = dims.substr(p, q - p);
            tok.erase(0, tok.find_first_not_of(' '));
            tok.erase(tok.find_last_not_of(' ') + 1);
            p = q + 1;
            if (tok.empty() && q == dims.size()) break;  // "(3,)": the trailing comma
            int64_t dim = 0;
            BI_CHECK(parse_decimal(tok, 12, dim), path, "member '", name,
                     "' has a malformed shape '", dims, "'");
            const size_t d = size_t(dim);
            BI_CHECK(d == 0 || numel <= fits / d, path, "member '", name, "' is truncated");
            numel *= d;
            shape.push_back(int64_t(d));
        }
        BI_CHECK(10 + hl + numel * 4 <= csize, path, "member '", name, "' is truncated");
        if (name.size() > 4 && name.substr(name.size() - 4) == ".npy") name.resize(name.size() - 4);
        take(name, shape, body + 10 + hl, csize);
        at = body + csize;
        ++members;
    }
    BI_CHECK(members > 0, path, "no arrays found (not an npz file?)");
}

}  // namespace

std::map<std::string, LoadedArray> read_npz(const std::string& path) {
    const std::string z = read_file(path);
    std::map<std::string, LoadedArray> out;
    walk_npz(
        path, [&](size_t at, size_t n) { return at < z.size() ? z.substr(at, n) : std::string(); },
        [&](const std::string& name, const Shape& shape, size_t data, size_t) {
            LoadedArray arr;
            arr.shape = shape;
            arr.data.resize(size_t(shape_numel(shape)));
            BI_CHECK(data + arr.data.size() * 4 <= z.size(), path, "member '", name, "' is truncated");
            if (!arr.data.empty())
                std::memcpy(arr.data.data(), z.data() + data, arr.data.size() * 4);
            out[name] = std::move(arr);
        });
    return out;
}

std::map<std::string, Shape> npz_shapes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    BI_CHECK(f.good(), path, "cannot read");
    std::map<std::string, Shape> out;
    walk_npz(
        path,
        [&](size_t at, size_t n) {
            std::string s(n, '\0');
            f.clear();
            f.seekg(std::streamoff(at));
            f.read(s.data(), std::streamsize(n));
            s.resize(size_t(std::max<std::streamsize>(0, f.gcount())));
            return s;
        },
        [&](const std::string& name, const Shape& shape, size_t, size_t) { out[name] = shape; });
    return out;
}

}  // namespace bioinfer::io
