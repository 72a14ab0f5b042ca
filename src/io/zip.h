// Zip archives read in place: torch.save checkpoints and npz files are zips of stored (not
// compressed) members. The central directory is read and checked against the file, and a member's
// bytes can be checked against the CRC-32 the directory records for them.
#pragma once
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>

namespace bioinfer::io {

// The little-endian value at p, at any alignment (the hosts bioinfer runs on are little-endian).
template <typename T>
T load_le(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

// A file mapped read-only; unmapped when its last owner lets go (tensors read from a checkpoint
// hold one, so their data stays valid).
struct MappedFile {
    const uint8_t* data = nullptr;
    size_t size = 0;
    MappedFile() = default;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();
};
std::shared_ptr<const MappedFile> map_file(const std::string& path);

struct ZipEntry {
    uint64_t data_offset = 0, size = 0;  // the member's bytes (uncompressed size)
    uint32_t crc32 = 0;                  // as the central directory records it
    uint16_t method = 0;                 // 0 stored, 8 deflated
};

// The members of the zip archive base[0, n) by name, from its central directory (zip64 too).
// Every member must have its local header where the directory says, under the same name, and
// its bytes inside the file before the directory; anything else is an error naming `path`.
// `kind` names what the file should be ("a torch checkpoint"), `no_zip_hint` says what a file
// without a zip directory likely is.
std::map<std::string, ZipEntry> read_zip_directory(
    const std::string& path, const uint8_t* base, uint64_t n, const std::string& kind,
    const std::string& no_zip_hint = "a truncated file, or not a zip archive");

// An error naming `path` and the member unless the stored member's bytes have its CRC-32.
void check_zip_crc(const std::string& path, const std::string& name, const ZipEntry& e,
                   const uint8_t* base);

}  // namespace bioinfer::io
