// NumPy .npy / .npz (stored zip, readable by numpy.load): the writer, and a checking reader.
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
// Reads float32 C-order arrays from an npz written by write_npz or numpy.savez, through its zip
// directory; a member whose bytes do not match its CRC-32, or whose .npy header does not parse or
// does not match its size, is an error naming the file and the member.
std::map<std::string, LoadedArray> read_npz(const std::string& path);
// The arrays' names and shapes only: the zip directory and each member's .npy header are checked
// as read_npz checks them, the data are not read (no CRC check).
std::map<std::string, Shape> npz_shapes(const std::string& path);

}  // namespace bioinfer::io
