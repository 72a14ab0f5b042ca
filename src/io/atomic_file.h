// Write-then-rename: outputs appear under their final name only when complete.
#pragma once
#include <string>

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
std::string read_file(const std::string& path);

}  // namespace bioinfer::io
