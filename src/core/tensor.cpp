// Tensor storage, views and conversions.
#include "bioinfer/tensor.h"

#include <algorithm>
#include <cstring>

#include "bioinfer/error.h"
#include "core/allocator.h"

namespace bioinfer {

std::string shape_str(const Shape& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

int64_t shape_numel(const Shape& s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
}

static Shape contiguous_strides(const Shape& s) {
    Shape st(s.size());
    int64_t acc = 1;
    for (int i = int(s.size()) - 1; i >= 0; --i) {
        st[i] = acc;
        acc *= s[i];
    }
    return st;
}

void convert_to_f32(DType dt, const void* src, float* dst, size_t n) {
    const uint16_t* h = static_cast<const uint16_t*>(src);
    switch (dt) {
        case DType::F32: std::memcpy(dst, src, n * 4); break;
        case DType::BF16:
            for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
            break;
        case DType::F16:
            for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(h[i]);
            break;
        case DType::I32:
            for (size_t i = 0; i < n; ++i) dst[i] = float(static_cast<const int32_t*>(src)[i]);
            break;
        case DType::I8:
            for (size_t i = 0; i < n; ++i) dst[i] = float(static_cast<const int8_t*>(src)[i]);
            break;
    }
}

Tensor Tensor::empty(const Shape& shape, DType dt, Device device) {
    for (int64_t d : shape) BI_CHECK(d >= 0, "tensor", "negative dimension in ", shape_str(shape));
    Tensor t;
    t.shape_ = shape;
    t.strides_ = contiguous_strides(shape);
    t.dtype_ = dt;
    t.device_ = device;
    const size_t bytes = size_t(t.numel()) * dtype_size(dt);
    if (device.is_host()) {
        t.buf_ = pooled_alloc(bytes);
    } else {
        const DeviceMemory& m = device_memory(device);
        void* p = m.alloc(device, std::max<size_t>(bytes, 1));
        t.buf_ = std::shared_ptr<void>(p, [f = m.free, device](void* q) { f(device, q); });
    }
    return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dt, Device device) {
    Tensor t = empty(shape, dt, device);
    const size_t bytes = size_t(t.numel()) * dtype_size(dt);
    if (device.is_host()) std::memset(t.raw(), 0, bytes);
    else device_memory(device).zero(device, t.raw(), bytes);
    return t;
}

namespace {
template <typename T>
Tensor tensor_of(const std::vector<T>& values, Shape shape, DType dt) {
    if (shape.empty()) shape = {int64_t(values.size())};
    BI_CHECK(shape_numel(shape) == int64_t(values.size()), "tensor.of", shape_str(shape), " holds ",
             shape_numel(shape), " values, got ", values.size());
    Tensor t = Tensor::empty(shape, dt);
    if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * sizeof(T));
    return t;
}
}  // namespace

Tensor Tensor::of(const std::vector<float>& values, Shape shape) {
    return tensor_of(values, std::move(shape), DType::F32);
}

Tensor Tensor::of(const std::vector<int32_t>& values, Shape shape) {
    return tensor_of(values, std::move(shape), DType::I32);
}

Tensor Tensor::view_of(const void* data, const Shape& shape, DType dt,
                       std::shared_ptr<const void> owner) {
    if (reinterpret_cast<uintptr_t>(data) % dtype_size(dt) != 0) {
        // A file that does not align its tensors (torch.save and safetensors writers do; a
        // hand-made or damaged file may not): an aligned copy, as kernels read whole elements.
        Tensor c = empty(shape, dt);
        std::memcpy(c.raw(), data, size_t(shape_numel(shape)) * dtype_size(dt));
        return c;
    }
    Tensor t;
    t.shape_ = shape;
    t.strides_ = contiguous_strides(shape);
    t.dtype_ = dt;
    t.buf_ = std::shared_ptr<void>(std::const_pointer_cast<void>(owner), const_cast<void*>(data));
    return t;
}

bool Tensor::is_contiguous() const { return strides_ == contiguous_strides(shape_); }

namespace {
void check_dtype(DType got, DType want) {
    BI_CHECK(got == want, "tensor", "expected ", dtype_name(want), " data, got ", dtype_name(got));
}
}  // namespace

float* Tensor::f32() {
    check_dtype(dtype_, DType::F32);
    return static_cast<float*>(raw());
}

const float* Tensor::f32() const {
    check_dtype(dtype_, DType::F32);
    return static_cast<const float*>(raw());
}

int32_t* Tensor::i32() {
    check_dtype(dtype_, DType::I32);
    return static_cast<int32_t*>(raw());
}

const int32_t* Tensor::i32() const {
    check_dtype(dtype_, DType::I32);
    return static_cast<const int32_t*>(raw());
}

Tensor Tensor::reshape(const Shape& shape) const {
    BI_CHECK(is_contiguous(), "tensor.reshape", "tensor is not contiguous");
    BI_CHECK(shape_numel(shape) == numel(), "tensor.reshape", "cannot view ", shape_str(shape_),
             " as ", shape_str(shape));
    Tensor t = *this;
    t.shape_ = shape;
    t.strides_ = contiguous_strides(shape);
    return t;
}

Tensor Tensor::narrow0(int64_t begin, int64_t end) const {
    BI_CHECK(is_contiguous() && ndim() >= 1 && 0 <= begin && begin <= end && end <= shape_[0],
             "tensor.narrow0", "rows [", begin, ", ", end, ") out of ", shape_str(shape_));
    Tensor t = *this;
    t.shape_[0] = end - begin;
    t.offset_ += size_t(begin * strides_[0]) * dtype_size(dtype_);
    return t;
}

Tensor Tensor::slice(int dim, int64_t begin, int64_t end) const {
    const int d = dim < 0 ? dim + ndim() : dim;
    BI_CHECK(d >= 0 && d < ndim() && 0 <= begin && begin <= end && end <= shape_[size_t(d)],
             "tensor.slice", "[", begin, ", ", end, ") along dim ", dim, " out of ",
             shape_str(shape_));
    Tensor t = *this;
    t.shape_[size_t(d)] = end - begin;
    t.offset_ += size_t(begin * strides_[size_t(d)]) * dtype_size(dtype_);
    return t;
}

Tensor Tensor::permute(const std::vector<int>& dims) const {
    BI_CHECK(int(dims.size()) == ndim(), "tensor.permute", "expected ", ndim(), " dims, got ",
             dims.size());
    std::vector<bool> seen(dims.size(), false);
    Tensor t = *this;
    for (size_t i = 0; i < dims.size(); ++i) {
        const int d = dims[i];
        BI_CHECK(d >= 0 && d < ndim() && !seen[size_t(d)], "tensor.permute",
                 "dims must be a permutation of 0..", ndim() - 1);
        seen[size_t(d)] = true;
        t.shape_[i] = shape_[size_t(d)];
        t.strides_[i] = strides_[size_t(d)];
    }
    return t;
}

Tensor Tensor::expand(const Shape& shape) const {
    const int extra = int(shape.size()) - ndim();
    BI_CHECK(extra >= 0, "tensor.expand", "cannot expand ", shape_str(shape_), " to ", shape_str(shape));
    Tensor t = *this;
    t.shape_ = shape;
    t.strides_.assign(shape.size(), 0);
    for (int d = 0; d < ndim(); ++d) {
        const size_t o = size_t(d + extra);
        BI_CHECK(shape_[size_t(d)] == shape[o] || shape_[size_t(d)] == 1, "tensor.expand",
                 "cannot expand ", shape_str(shape_), " to ", shape_str(shape));
        t.strides_[o] = shape_[size_t(d)] == shape[o] ? strides_[size_t(d)] : 0;
    }
    return t;
}

Tensor Tensor::to(Device device) const {
    if (device == device_) return *this;
    BI_CHECK(is_contiguous(), "tensor.to", "copy a strided view to contiguous memory first");
    Tensor t = empty(shape_, dtype_, device);
    const size_t bytes = size_t(numel()) * dtype_size(dtype_);
    // The device that is not the host does the copy (both not the host: the source's).
    const Device driver = device_.is_host() ? device : device_;
    device_memory(driver).copy(t.raw(), device, raw(), device_, bytes);
    return t;
}

Tensor Tensor::to_f32() const {
    BI_CHECK(is_host(), "tensor.to_f32", "tensor lives on ", device_.str(), ": copy it to the host first");
    BI_CHECK(is_contiguous(), "tensor.to_f32", "tensor is not contiguous");
    Tensor t = empty(shape_, DType::F32);
    convert_to_f32(dtype_, raw(), t.f32(), size_t(numel()));
    return t;
}

Tensor Tensor::clone() const {
    BI_CHECK(is_contiguous(), "tensor.clone", "tensor is not contiguous");
    Tensor t = empty(shape_, dtype_, device_);
    const size_t bytes = size_t(numel()) * dtype_size(dtype_);
    if (is_host()) std::memcpy(t.raw(), raw(), bytes);
    else device_memory(device_).copy(t.raw(), device_, raw(), device_, bytes);
    return t;
}

}  // namespace bioinfer
