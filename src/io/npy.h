// NumPy .npy / .npz (stored zip, readable by numpy.load) writer and a small reader for tests.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"

namespace bioinfer::io {

struct NamedArray {
    std::string name;  // key in the npz (".npy" is appended)
    Shape shape;
    const float* data;
};

std::string npy_bytes(const Shape& shape, const float* data);
// Writes an uncompressed npz atomically (temporary name, then rename).
void write_npz(const std::string& path, const std::vector<NamedArray>& arrays);

struct LoadedArray {
    Shape shape;
    std::vector<float> data;
};
// Reads float32 C-order arrays from an npz written by write_npz or numpy.savez.
std::map<std::string, LoadedArray> read_npz(const std::string& path);
// The arrays' names and shapes only: reads each member's headers and seeks past its data.
std::map<std::string, Shape> npz_shapes(const std::string& path);

}  // namespace bioinfer::io
