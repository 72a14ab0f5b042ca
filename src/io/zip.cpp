// The zip reader torch checkpoints and npz files share, and the read-only file mapping both read
// through.
#include "io/zip.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "bioinfer/error.h"

namespace bioinfer::io {

MappedFile::~MappedFile() {
    if (data) munmap(const_cast<uint8_t*>(data), size);
}

std::shared_ptr<const MappedFile> map_file(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    BI_CHECK(fd >= 0, path, "cannot open: ", std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) != 0) {
        ::close(fd);
        fail(path, "cannot stat");
    }
    auto map = std::make_shared<MappedFile>();
    void* addr = st.st_size > 0 ? mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0)
                                : MAP_FAILED;
    ::close(fd);
    BI_CHECK(addr != MAP_FAILED, path, "cannot map (empty file?)");
    map->data = static_cast<const uint8_t*>(addr);
    map->size = size_t(st.st_size);
    return map;
}

std::map<std::string, ZipEntry> read_zip_directory(const std::string& path, const uint8_t* base,
                                                   uint64_t n, const std::string& kind,
                                                   const std::string& no_zip_hint) {
    BI_CHECK(n >= 22, path, "not ", kind, ": too short for a zip archive");
    // End of central directory: the last 0x06054b50 within the final 64 KiB + 22 bytes.
    int64_t eocd = -1;
    for (int64_t i = int64_t(n) - 22; i >= 0 && i >= int64_t(n) - 22 - 65535; --i)
        if (load_le<uint32_t>(base + i) == 0x06054b50u) {
            eocd = i;
            break;
        }
    BI_CHECK(eocd >= 0, path, "not ", kind, ": no zip end-of-directory record (", no_zip_hint, ")");
    uint64_t count = load_le<uint16_t>(base + eocd + 10);
    uint64_t cd_size = load_le<uint32_t>(base + eocd + 12);
    uint64_t cd_off = load_le<uint32_t>(base + eocd + 16);
    if (cd_off == 0xffffffffu || count == 0xffffu) {  // zip64: locator just before the EOCD
        BI_CHECK(eocd >= 20 && load_le<uint32_t>(base + eocd - 20) == 0x07064b50u, path,
                 "zip64 locator missing");
        const uint64_t z64 = load_le<uint64_t>(base + eocd - 20 + 8);
        BI_CHECK(z64 <= n && n - z64 >= 56 && load_le<uint32_t>(base + z64) == 0x06064b50u, path,
                 "zip64 end-of-directory record missing");
        count = load_le<uint64_t>(base + z64 + 32);
        cd_size = load_le<uint64_t>(base + z64 + 40);
        cd_off = load_le<uint64_t>(base + z64 + 48);
    }
    BI_CHECK(cd_off <= n && cd_size <= n - cd_off, path, "zip central directory outside the file");
    std::map<std::string, ZipEntry> out;
    uint64_t p = cd_off;
    for (uint64_t i = 0; i < count; ++i) {
        BI_CHECK(p + 46 <= cd_off + cd_size && load_le<uint32_t>(base + p) == 0x02014b50u, path,
                 "corrupt zip central directory at entry ", i);
        ZipEntry e;
        e.method = load_le<uint16_t>(base + p + 10);
        e.crc32 = load_le<uint32_t>(base + p + 16);
        uint64_t csize = load_le<uint32_t>(base + p + 20);
        uint64_t usize = load_le<uint32_t>(base + p + 24);
        const uint16_t name_len = load_le<uint16_t>(base + p + 28),
                       extra_len = load_le<uint16_t>(base + p + 30),
                       comment_len = load_le<uint16_t>(base + p + 32);
        uint64_t local = load_le<uint32_t>(base + p + 42);
        BI_CHECK(p + 46 + name_len + extra_len + comment_len <= cd_off + cd_size, path,
                 "corrupt zip central directory at entry ", i);
        std::string name(reinterpret_cast<const char*>(base + p + 46), name_len);
        // zip64 extra field: the 0xffffffff fields, in order usize, csize, local offset.
        const uint8_t* x = base + p + 46 + name_len;
        for (size_t q = 0; q + 4 <= extra_len;) {  // size_t: a 16-bit step could wrap around
            const uint16_t id = load_le<uint16_t>(x + q), len = load_le<uint16_t>(x + q + 2);
            if (q + 4 + len > extra_len) break;  // a field longer than the extra area: ignored
            if (id == 0x0001) {
                uint16_t r = 4;
                if (usize == 0xffffffffu && r + 8 <= len + 4) usize = load_le<uint64_t>(x + q + r), r += 8;
                if (csize == 0xffffffffu && r + 8 <= len + 4) csize = load_le<uint64_t>(x + q + r), r += 8;
                if (local == 0xffffffffu && r + 8 <= len + 4) local = load_le<uint64_t>(x + q + r), r += 8;
            }
            q += 4 + size_t(len);
        }
        // the local header: where the directory says, naming the same member
        BI_CHECK(local <= n && n - local >= 30 && load_le<uint32_t>(base + local) == 0x04034b50u, path,
                 "zip entry '", name, "' has no local header");
        const uint16_t local_name_len = load_le<uint16_t>(base + local + 26);
        e.data_offset = local + 30 + local_name_len + load_le<uint16_t>(base + local + 28);
        BI_CHECK(local_name_len == name_len && e.data_offset <= n &&
                     std::memcmp(base + local + 30, base + p + 46, name_len) == 0,
                 path, "zip entry '", name, "': its local header names another member");
        e.size = usize;
        BI_CHECK(e.method == 0 || e.method == 8, path, "zip entry '", name, "' uses method ", e.method);
        BI_CHECK(e.method != 0 || csize == usize, path, "zip entry '", name, "' sizes disagree");
        BI_CHECK(e.data_offset <= cd_off && csize <= cd_off - e.data_offset, path, "zip entry '",
                 name, "' runs past the end of the file (truncated download?)");
        out[name] = e;
        p += 46 + name_len + extra_len + comment_len;
    }
    return out;
}

void check_zip_crc(const std::string& path, const std::string& name, const ZipEntry& e,
                   const uint8_t* base) {
    BI_CHECK(e.method == 0, path, "zip entry '", name, "' is compressed");
    uLong crc = crc32(0L, Z_NULL, 0);
    for (uint64_t at = 0; at < e.size;) {  // zlib takes 32-bit lengths
        const uint64_t step = std::min<uint64_t>(e.size - at, 1u << 30);
        crc = crc32(crc, base + e.data_offset + at, uInt(step));
        at += step;
    }
    BI_CHECK(uint32_t(crc) == e.crc32, path, "zip entry '", name,
             "' is damaged: its bytes do not match the CRC-32 the archive records");
}

}  // namespace bioinfer::io
