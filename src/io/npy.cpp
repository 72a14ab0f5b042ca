// npz = zip archive of .npy members. We write "stored" (uncompressed) members with CRC-32, and
// read them back through the zip directory, checking each member's CRC-32 and .npy header.
#include "io/npy.h"

#include <zlib.h>

#include <cstring>

#include "bioinfer/error.h"
#include "io/atomic_file.h"
#include "io/untrusted.h"
#include "io/zip.h"

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

// The text of `key`'s value in a .npy header ("{'descr': '<f4', 'fortran_order': False,
// 'shape': (3, 4), }"): up to the next ',' or '}', or a whole "(...)"; "" when the key is missing.
std::string header_value(const std::string& hdr, const std::string& key) {
    size_t at = hdr.find("'" + key + "'");
    if (at == std::string::npos) return "";
    at = hdr.find_first_not_of(' ', at + key.size() + 2);
    if (at == std::string::npos || hdr[at] != ':') return "";
    at = hdr.find_first_not_of(' ', at + 1);
    if (at == std::string::npos) return "";
    size_t end = hdr[at] == '(' ? hdr.find(')', at) : hdr.find_first_of(",}", at);
    if (end == std::string::npos) return "";
    if (hdr[at] == '(') ++end;
    std::string v = hdr.substr(at, end - at);
    v.erase(v.find_last_not_of(' ') + 1);
    return v;
}

// The shape of the C-order float32 .npy member `name` held in p[0, n), its header parsed
// (versions 1 to 3) and its data exactly the bytes that shape needs; the values start at
// p + *data_at.
Shape parse_npy(const std::string& path, const std::string& name, const uint8_t* p, uint64_t n,
                uint64_t* data_at) {
    BI_CHECK(n >= 10 && std::memcmp(p, "\x93NUMPY", 6) == 0, path, "member '", name,
             "' is not .npy");
    const int major = p[6];
    BI_CHECK(major >= 1 && major <= 3, path, "member '", name, "' is .npy version ", major,
             " (1 to 3 are known)");
    // version 1 has a 16-bit header length, 2 and 3 a 32-bit one
    const uint64_t prefix = major == 1 ? 10 : 12;
    BI_CHECK(n >= prefix, path, "member '", name, "' is truncated");
    const uint64_t hl = major == 1 ? load_le<uint16_t>(p + 8) : load_le<uint32_t>(p + 8);
    BI_CHECK(hl <= n - prefix, path, "member '", name, "' is truncated");
    const std::string hdr(reinterpret_cast<const char*>(p + prefix), hl);
    BI_CHECK(header_value(hdr, "descr") == "'<f4'" && header_value(hdr, "fortran_order") == "False",
             path, "member '", name, "' is not C-order float32");
    // the shape: "(d0, d1, ...)", each a decimal count; the product must fill the member exactly
    const std::string tuple = header_value(hdr, "shape");
    BI_CHECK(tuple.size() >= 2 && tuple.front() == '(', path, "member '", name,
             "' has no shape in its .npy header");
    const std::string dims = tuple.substr(1, tuple.size() - 2);
    const uint64_t bytes = n - prefix - hl;
    Shape shape;
    uint64_t numel = 1;
    for (size_t q0 = 0; q0 < dims.size();) {
        size_t q = dims.find(',', q0);
        if (q == std::string::npos) q = dims.size();
        std::string tok = dims.substr(q0, q - q0);
        tok.erase(0, tok.find_first_not_of(' '));
        tok.erase(tok.find_last_not_of(' ') + 1);
        q0 = q + 1;
        if (tok.empty() && q == dims.size()) break;  // "(3,)": the trailing comma
        int64_t dim = 0;
        BI_CHECK(parse_decimal(tok, 12, dim), path, "member '", name, "' has a malformed shape '",
                 dims, "'");
        const uint64_t d = uint64_t(dim);
        BI_CHECK(d == 0 || numel <= bytes / 4 / d, path, "member '", name, "' is truncated");
        numel *= d;
        shape.push_back(dim);
    }
    BI_CHECK(numel * 4 == bytes, path, "member '", name, "' holds ", bytes,
             " bytes of data where its shape (", dims, ") needs ", numel * 4,
             numel * 4 > bytes ? " (truncated)" : "");
    *data_at = prefix + hl;
    return shape;
}

// Reads the npz at `path` through its zip directory: `take(name, shape, values)` gets each
// float32 array, with the ".npy" suffix dropped from its name. With `check_crc`, each member's
// bytes must match the CRC-32 the archive records (they are all read); without, only the headers
// are (the data pages of the mapping are never touched).
template <typename Take>
void walk_npz(const std::string& path, bool check_crc, const Take& take) {
    const auto file = map_file(path);
    const auto entries = read_zip_directory(path, file->data, file->size, "an npz file");
    for (const auto& [member, e] : entries) {
        BI_CHECK(e.method == 0, path, "compressed npz members are not supported");
        if (check_crc) check_zip_crc(path, member, e, file->data);
        std::string name = member;
        uint64_t data_at = 0;
        const Shape shape = parse_npy(path, name, file->data + e.data_offset, e.size, &data_at);
        if (name.size() > 4 && name.substr(name.size() - 4) == ".npy") name.resize(name.size() - 4);
        take(name, shape, file->data + e.data_offset + data_at);
    }
    BI_CHECK(!entries.empty(), path, "no arrays found (not an npz file?)");
}

}  // namespace

std::map<std::string, LoadedArray> read_npz(const std::string& path) {
    std::map<std::string, LoadedArray> out;
    walk_npz(path, true, [&](const std::string& name, const Shape& shape, const uint8_t* values) {
        LoadedArray arr;
        arr.shape = shape;
        arr.data.resize(size_t(shape_numel(shape)));
        if (!arr.data.empty()) std::memcpy(arr.data.data(), values, arr.data.size() * 4);
        out[name] = std::move(arr);
    });
    return out;
}

std::map<std::string, Shape> npz_shapes(const std::string& path) {
    std::map<std::string, Shape> out;
    walk_npz(path, false, [&](const std::string& name, const Shape& shape, const uint8_t*) {
        out[name] = shape;
    });
    return out;
}

}  // namespace bioinfer::io
