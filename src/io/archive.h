// Archives as downloads come: gzip streams and tar files (POSIX ustar, GNU long names, pax path
// records), read from a stream without touching the disk; boltz's mols.tar and the MSA server's
// out.tar.gz are read through here.
#pragma once
#include <cstdint>
#include <functional>
#include <istream>
#include <string>

namespace bioinfer::io {

// The bytes a gzip stream (one or more members) decompresses to; an error naming `where` when the
// stream is corrupt or truncated, or when it would exceed `max_bytes`.
std::string gunzip(const std::string& gz, int64_t max_bytes, const std::string& where);

// One tar entry: its path (relative, normalised: absolute paths and ".." are refused) and kind.
struct TarEntry {
    std::string path;
    bool directory = false;
    int64_t size = 0;
};

// Reads the tar archive in `in` entry by entry: `on_file(entry, in)` is called for each regular
// file with `in` at its first byte and must read exactly entry.size bytes (read_tar_body does);
// folders are reported with directory set and nothing to read; links, devices and global pax
// records are skipped. Errors (checksum, truncation, unsafe paths) name `where`.
void read_tar(std::istream& in, const std::string& where,
              const std::function<void(const TarEntry&, std::istream&)>& on_entry);

// An entry's bytes, read whole from `in` (at most max_bytes, else an error naming `where`).
std::string read_tar_body(const TarEntry& e, std::istream& in, int64_t max_bytes,
                          const std::string& where);

}  // namespace bioinfer::io
