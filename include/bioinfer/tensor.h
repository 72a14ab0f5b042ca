// Tensor: shape, strides (in elements, PyTorch order: last dim contiguous), dtype and a shared
// buffer that is either pooled activation memory, an owned copy, or a view into a mapped file.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "bioinfer/dtype.h"

namespace bioinfer {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s);
int64_t shape_numel(const Shape& s);

class Tensor {
public:
    Tensor() = default;

    // Uninitialised tensor from the caching allocator (activations).
    static Tensor empty(const Shape& shape, DType dt = DType::F32);
    static Tensor zeros(const Shape& shape, DType dt = DType::F32);
    // Non-owning view of external memory kept alive by `owner` (e.g. an mmapped file).
    static Tensor view_of(const void* data, const Shape& shape, DType dt,
                          std::shared_ptr<const void> owner);

    bool defined() const { return static_cast<bool>(buf_); }
    const Shape& shape() const { return shape_; }
    const Shape& strides() const { return strides_; }
    int ndim() const { return int(shape_.size()); }
    int64_t size(int d) const { return shape_[d < 0 ? d + ndim() : d]; }
    int64_t numel() const { return shape_numel(shape_); }
    DType dtype() const { return dtype_; }
    bool is_contiguous() const;

    void* raw() { return static_cast<char*>(buf_.get()) + offset_; }
    const void* raw() const { return static_cast<const char*>(buf_.get()) + offset_; }
    float* f32();
    const float* f32() const;

    // Same storage, new contiguous shape (numel must match).
    Tensor reshape(const Shape& shape) const;
    // Rows [begin, end) along dim 0 of a contiguous tensor (shares storage).
    Tensor narrow0(int64_t begin, int64_t end) const;
    // A contiguous fp32 copy (converts bf16/f16).
    Tensor to_f32() const;
    Tensor clone() const;

private:
    std::shared_ptr<void> buf_;
    size_t offset_ = 0;  // bytes
    Shape shape_, strides_;
    DType dtype_ = DType::F32;
};

}  // namespace bioinfer
