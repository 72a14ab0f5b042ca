// Tensor: shape, strides (in elements, PyTorch order: last dim contiguous), dtype, the device its
// buffer lives on, and a shared buffer that is pooled activation memory, an owned copy, or a view
// into a mapped file. Data moves between devices only through explicit copies (to()).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "bioinfer/device.h"
#include "bioinfer/dtype.h"

namespace bioinfer {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s);
int64_t shape_numel(const Shape& s);

class Tensor {
public:
    Tensor() = default;

    // Uninitialised tensor from the caching allocator (activations), on the host or on `device`
    // (through the memory functions its backend registered).
    static Tensor empty(const Shape& shape, DType dt = DType::F32, Device device = kHost);
    static Tensor zeros(const Shape& shape, DType dt = DType::F32, Device device = kHost);
    // Host tensors holding a copy of the caller's values, of `shape` (default: 1-D).
    static Tensor of(const std::vector<float>& values, Shape shape = {});
    static Tensor of(const std::vector<int32_t>& values, Shape shape = {});
    // Non-owning view of external memory kept alive by `owner` (e.g. an mmapped file); a copy
    // when `data` is not aligned to the element size.
    static Tensor view_of(const void* data, const Shape& shape, DType dt,
                          std::shared_ptr<const void> owner);

    bool defined() const { return static_cast<bool>(buf_); }
    const Shape& shape() const { return shape_; }
    const Shape& strides() const { return strides_; }
    int ndim() const { return int(shape_.size()); }
    int64_t size(int d) const { return shape_[d < 0 ? d + ndim() : d]; }
    int64_t numel() const { return shape_numel(shape_); }
    DType dtype() const { return dtype_; }
    Device device() const { return device_; }
    bool is_host() const { return device_.is_host(); }
    bool is_contiguous() const;

    // The first element's address on the tensor's device (a host pointer only when is_host()).
    void* raw() { return static_cast<char*>(buf_.get()) + offset_; }
    const void* raw() const { return static_cast<const char*>(buf_.get()) + offset_; }
    float* f32();
    const float* f32() const;
    int32_t* i32();
    const int32_t* i32() const;

    // Same storage, new contiguous shape (numel must match).
    Tensor reshape(const Shape& shape) const;
    // Rows [begin, end) along dim 0 of a contiguous tensor (shares storage).
    Tensor narrow0(int64_t begin, int64_t end) const;
    // Views that share storage and keep strides (ops::copy makes them contiguous):
    // [begin, end) along `dim`, and the dims reordered (out dim i is this tensor's dims[i]).
    Tensor slice(int dim, int64_t begin, int64_t end) const;
    Tensor permute(const std::vector<int>& dims) const;
    // `shape` from this tensor's size-1 dims repeated (stride 0; leading dims may be added).
    Tensor expand(const Shape& shape) const;
    // A contiguous fp32 copy on the host (converts bf16/f16/i32).
    Tensor to_f32() const;
    Tensor clone() const;
    // The same data on `device`: this tensor when it is there already, else a contiguous copy.
    Tensor to(Device device) const;

private:
    std::shared_ptr<void> buf_;
    size_t offset_ = 0;  // bytes
    Shape shape_, strides_;
    DType dtype_ = DType::F32;
    Device device_;
};

}  // namespace bioinfer
