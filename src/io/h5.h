// HDF5 output: one file holding many records (UniProt's per-protein embedding layout).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/atomic_file.h"

namespace bioinfer::io {

class H5Writer {
public:
    explicit H5Writer(const std::string& path);  // writes to a temporary name
    ~H5Writer();
    // Writes a float32 dataset at `path_in_file` ("/P12345" or "/mean_33/P12345").
    void write(const std::string& path_in_file, const Shape& shape, const float* data);
    void commit();  // close and rename into place

private:
    AtomicFile file_;
    long long id_ = -1;
};

// Reads a float32 dataset whole (merge, a resumed embed, tests); an error naming the file when
// it is missing or cannot be read.
std::vector<float> h5_read(const std::string& file, const std::string& dataset, Shape* shape);

}  // namespace bioinfer::io
