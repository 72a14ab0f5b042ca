// safetensors files read by mmap, validated on open (header, JSON, dtypes, offsets, overlaps).
#pragma once
#include <map>
#include <memory>
#include <string>

#include "bioinfer/tensor.h"

namespace bioinfer::io {

struct TensorInfo {
    DType dtype;
    Shape shape;
    size_t begin = 0, end = 0;  // byte offsets into the data section
};

class SafetensorsFile {
public:
    static std::shared_ptr<SafetensorsFile> open(const std::string& path);
    ~SafetensorsFile();

    const std::string& path() const { return path_; }
    const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
    bool has(const std::string& name) const { return tensors_.count(name) > 0; }
    // Integer and fp64 tensors, checked but not readable: name -> dtype.
    const std::map<std::string, std::string>& skipped() const { return skipped_; }
    // Zero-copy view in the file's dtype; the mapping lives as long as any view.
    Tensor get(const std::string& name) const;

private:
    SafetensorsFile() = default;
    std::string path_;
    std::map<std::string, TensorInfo> tensors_;
    std::map<std::string, std::string> skipped_;  // non-float tensors: name -> dtype
    std::shared_ptr<const void> map_;  // whole file
    const char* data_ = nullptr;       // start of the data section
};

// Tells the kernel that [p, p + bytes) will not be read soon, so the pages wholly inside it can
// be reclaimed (MADV_PAGEOUT). Only a hint: contents never change, and a file mapping re-reads
// them on the next access. Used for checkpoint weights the engine keeps in a packed copy.
void release_pages_hint(const void* p, size_t bytes);

// Writes named tensors (any dtype) as a safetensors file, atomically. Used by tests and tools.
void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors);

}  // namespace bioinfer::io
