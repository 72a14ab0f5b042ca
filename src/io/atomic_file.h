// Write-then-rename: outputs appear under their final name only when complete.
#pragma once
#include <cstdint>
#include <string>

#include "io/limits.h"

namespace bioinfer::io {

class AtomicFile {
public:
    explicit AtomicFile(std::string final_path);
    ~AtomicFile();  // removes the temporary unless committed
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    const std::string& tmp_path() const { return tmp_; }
    const std::string& final_path() const { return final_; }
    void commit();  // rename onto the final path

private:
    std::string final_, tmp_;
    bool done_ = false;
};

// Writes `bytes` to `path` atomically.
void write_file_atomic(const std::string& path, const std::string& bytes);
// For readers that open the file themselves (gemmi): refuses `path` unless it is a regular file
// of at most `max_bytes` (a device, a pipe, a socket or a folder never is), as read_file would.
void check_regular_file(const std::string& path, int64_t max_bytes, const std::string& raise_with);

// The bytes of the file at `path`, read whole: a regular file or a pipe (a FIFO, process
// substitution, /dev/stdin from a pipe), at most `max_bytes` (past it an error naming the file,
// the limit and `raise_with`, the option that raises it). A device (/dev/zero, a terminal), a
// socket or a folder is refused before anything is read.
std::string read_file(const std::string& path, int64_t max_bytes = kMaxOwnFileBytes,
                      const std::string& raise_with = "");

}  // namespace bioinfer::io
