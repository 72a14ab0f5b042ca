// Tensor storage, views and conversions.
#include "bioinfer/tensor.h"

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
    }
}

Tensor Tensor::empty(const Shape& shape, DType dt) {
    for (int64_t d : shape) BI_CHECK(d >= 0, "tensor", "negative dimension in ", shape_str(shape));
    Tensor t;
    t.shape_ = shape;
    t.strides_ = contiguous_strides(shape);
    t.dtype_ = dt;
    t.buf_ = pooled_alloc(size_t(t.numel()) * dtype_size(dt));
    return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dt) {
    Tensor t = empty(shape, dt);
    std::memset(t.raw(), 0, size_t(t.numel()) * dtype_size(dt));
    return t;
}

Tensor Tensor::view_of(const void* data, const Shape& shape, DType dt,
                       std::shared_ptr<const void> owner) {
    Tensor t;
    t.shape_ = shape;
    t.strides_ = contiguous_strides(shape);
    t.dtype_ = dt;
    t.buf_ = std::shared_ptr<void>(std::const_pointer_cast<void>(owner), const_cast<void*>(data));
    return t;
}

bool Tensor::is_contiguous() const { return strides_ == contiguous_strides(shape_); }

float* Tensor::f32() {
    BI_CHECK(dtype_ == DType::F32, "tensor", "expected F32 data, got ", dtype_name(dtype_));
    return static_cast<float*>(raw());
}

const float* Tensor::f32() const {
    BI_CHECK(dtype_ == DType::F32, "tensor", "expected F32 data, got ", dtype_name(dtype_));
    return static_cast<const float*>(raw());
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

Tensor Tensor::to_f32() const {
    BI_CHECK(is_contiguous(), "tensor.to_f32", "tensor is not contiguous");
    Tensor t = empty(shape_, DType::F32);
    convert_to_f32(dtype_, raw(), t.f32(), size_t(numel()));
    return t;
}

Tensor Tensor::clone() const {
    BI_CHECK(is_contiguous(), "tensor.clone", "tensor is not contiguous");
    Tensor t = empty(shape_, dtype_);
    std::memcpy(t.raw(), raw(), size_t(numel()) * dtype_size(dtype_));
    return t;
}

}  // namespace bioinfer
