// CPU glue kernels: strided copies (row copies, or 32 x 32 tiled transposes when the two sides
// are contiguous along different dims), gathers, and the per-unit ops of backend/glue_units.h over
// the threads. Built without ISA flags (see glue_kernels.h); the geometry kernels are in
// geometry_kernels.cpp.
#include "backend/cpu/glue_kernels.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/glue_units.h"

namespace bioinfer::cpu::glue {
namespace {

// Below this many elements a copy runs on the calling thread (a team costs more than it saves).
constexpr int64_t kSerialElements = 1 << 15;
constexpr int kMaxDims = 8;

struct Layout {
    int n = 0;
    int64_t shape[kMaxDims], src[kMaxDims], dst[kMaxDims];
};

// Drops size-1 dims and merges neighbours that are contiguous on both sides. Returns false for an
// empty index space.
bool coalesce(int ndim, const int64_t* shape, const int64_t* ss, const int64_t* ds, Layout& l) {
    for (int i = 0; i < ndim; ++i) {
        if (shape[i] == 0) return false;
        if (shape[i] == 1) continue;
        if (l.n > 0 && l.src[l.n - 1] == ss[i] * shape[i] && l.dst[l.n - 1] == ds[i] * shape[i]) {
            l.shape[l.n - 1] *= shape[i];
            l.src[l.n - 1] = ss[i];
            l.dst[l.n - 1] = ds[i];
            continue;
        }
        l.shape[l.n] = shape[i];
        l.src[l.n] = ss[i];
        l.dst[l.n] = ds[i];
        ++l.n;
    }
    return true;
}

// Offsets of flat index o over the dims of l except `skip_a` and `skip_b`.
inline void offsets(const Layout& l, int64_t o, int skip_a, int skip_b, int64_t& so, int64_t& dof) {
    so = 0;
    dof = 0;
    for (int d = l.n - 1; d >= 0; --d) {
        if (d == skip_a || d == skip_b) continue;
        const int64_t i = o % l.shape[d];
        o /= l.shape[d];
        so += i * l.src[d];
        dof += i * l.dst[d];
    }
}

template <bool Acc>
inline void move(const uint32_t* s, uint32_t* d) {
    if constexpr (Acc) {
        float a, b;
        std::memcpy(&a, s, 4);
        std::memcpy(&b, d, 4);
        b += a;
        std::memcpy(d, &b, 4);
    } else {
        *d = *s;
    }
}

template <bool Acc>
void copy_impl(const uint32_t* src, uint32_t* dst, const Layout& l) {
    int64_t total = 1;
    for (int d = 0; d < l.n; ++d) total *= l.shape[d];
    const bool par = total > kSerialElements;
    if (l.n == 0) {
        move<Acc>(src, dst);
        return;
    }
    const int last = l.n - 1;
    if (l.src[last] == 1 && l.dst[last] == 1) {  // contiguous rows on both sides
        const int64_t inner = l.shape[last], outer = total / inner;
#pragma omp parallel for schedule(static) if (par)
        for (int64_t o = 0; o < outer; ++o) {
            int64_t so, dof;
            offsets(l, o, last, -1, so, dof);
            if constexpr (Acc) {
                const float* s = reinterpret_cast<const float*>(src + so);
                float* d = reinterpret_cast<float*>(dst + dof);
                for (int64_t i = 0; i < inner; ++i) d[i] += s[i];
            } else {
                std::memcpy(dst + dof, src + so, size_t(inner) * 4);
            }
        }
        return;
    }
    int a = -1, b = -1;  // the dims along which dst and src are contiguous
    for (int d = 0; d < l.n; ++d) {
        if (l.dst[d] == 1) a = d;
        if (l.src[d] == 1) b = d;
    }
    if (a >= 0 && b >= 0 && a != b) {  // a transpose: 32 x 32 tiles through an L1 buffer
        // Reading the tile straight into place would walk the source with a stride of a whole row,
        // often a power of two that maps every line of the tile onto one cache set; each source
        // row segment is read whole into the buffer first, and each destination row written whole.
        constexpr int64_t T = 32;
        const int64_t na = l.shape[a], nb = l.shape[b], ta = (na + T - 1) / T, tb = (nb + T - 1) / T;
        const int64_t outer = total / (na * nb), tiles = outer * ta * tb;
#pragma omp parallel for schedule(static) if (par)
        for (int64_t t = 0; t < tiles; ++t) {
            const int64_t o = t / (ta * tb), ia0 = (t / tb % ta) * T, ib0 = (t % tb) * T;
            int64_t so, dof;
            offsets(l, o, a, b, so, dof);
            const int64_t ma = std::min(na, ia0 + T) - ia0, mb = std::min(nb, ib0 + T) - ib0;
            alignas(64) uint32_t buf[T][T];  // buf[ia - ia0][ib - ib0]
            for (int64_t i = 0; i < ma; ++i)
                std::memcpy(buf[i], src + so + (ia0 + i) * l.src[a] + ib0, size_t(mb) * 4);
            for (int64_t j = 0; j < mb; ++j) {
                uint32_t* d = dst + dof + ia0 + (ib0 + j) * l.dst[b];
                for (int64_t i = 0; i < ma; ++i) move<Acc>(&buf[i][j], d + i);
            }
        }
        return;
    }
    const int64_t inner = l.shape[last], outer = total / inner;  // any strides: element by element
#pragma omp parallel for schedule(static) if (par)
    for (int64_t o = 0; o < outer; ++o) {
        int64_t so, dof;
        offsets(l, o, last, -1, so, dof);
        for (int64_t i = 0; i < inner; ++i)
            move<Acc>(src + so + i * l.src[last], dst + dof + i * l.dst[last]);
    }
}

// Parallel only when the work is large enough to pay for a team.
inline bool big(int64_t n) { return n > kSerialElements; }

}  // namespace

void copy_strided(const Context&, const void* src, void* dst, int ndim, const int64_t* shape,
                  const int64_t* src_strides, const int64_t* dst_strides, bool accumulate) {
    Layout l;
    if (!coalesce(ndim, shape, src_strides, dst_strides, l)) return;
    const auto* s = static_cast<const uint32_t*>(src);
    auto* d = static_cast<uint32_t*>(dst);
    if (accumulate) copy_impl<true>(s, d, l);
    else copy_impl<false>(s, d, l);
}

void binary_rows(const Context&, int op, const float* a, int64_t lda, const float* b, int64_t ldb,
                 float* y, int64_t ldy, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (big(rows * cols))
    for (int64_t r = 0; r < rows; ++r) {
        const float* ar = a + r * lda;
        const float* br = b + r * ldb;
        float* yr = y + r * ldy;
        switch (op) {
            case kernels::kBinaryAdd:
                for (int64_t c = 0; c < cols; ++c) yr[c] = ar[c] + br[c];
                break;
            case kernels::kBinaryMul:
                for (int64_t c = 0; c < cols; ++c) yr[c] = ar[c] * br[c];
                break;
            default:
                for (int64_t c = 0; c < cols; ++c) yr[c] += ar[c] * br[c];
                break;
        }
    }
}

void add_mul(const Context&, const float* a, const float* b, float* y, int64_t n) {
#pragma omp parallel for schedule(static) if (big(n))
    for (int64_t i = 0; i < n; ++i) y[i] += a[i] * b[i];
}

void axpy(const Context&, float alpha, const float* x, float* y, int64_t n) {
#pragma omp parallel for schedule(static) if (big(n))
    for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void scale_rows(const Context&, const float* x, const float* f, float* y, int64_t rows,
                int64_t cols) {
#pragma omp parallel for schedule(static) if (big(rows * cols))
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = x[r * cols + c] * f[r];
}

void activation(const Context&, Act act, const float* x, float shift, float* y, int64_t n) {
#pragma omp parallel for schedule(static) if (big(n))
    for (int64_t i = 0; i < n; ++i) y[i] = kernels::glue::act_1(act, x[i] + shift);
}

void embedding(const Context&, const int32_t* ids, int64_t n, const float* table, int64_t D,
               float* out, bool accumulate) {
#pragma omp parallel for schedule(static) if (big(n * D))
    for (int64_t i = 0; i < n; ++i) {
        float* o = out + i * D;
        if (ids[i] < 0) {  // a zero row
            if (!accumulate) std::memset(o, 0, size_t(D) * 4);
            continue;
        }
        const float* row = table + int64_t(ids[i]) * D;
        if (accumulate)
            for (int64_t d = 0; d < D; ++d) o[d] += row[d];
        else
            std::memcpy(o, row, size_t(D) * 4);
    }
}

void token_dropout(const Context&, float* x, const int32_t* ids, const int64_t* cu, int64_t B,
                   int64_t D, int32_t mask_id, float keep) {
#pragma omp parallel for schedule(dynamic, 1) if (B > 1)
    for (int64_t b = 0; b < B; ++b)
        kernels::glue::token_dropout_seq(x + cu[b] * D, ids + cu[b], cu[b + 1] - cu[b], D, mask_id,
                                         keep);
}

void outer_product_difference(const Context&, const float* qk, int64_t L, int64_t I, int64_t r0,
                              int64_t r1, float* out) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = r0; i < r1; ++i)
        for (int64_t j = 0; j < L; ++j)
            kernels::glue::outer_product_difference_row(qk, I, i, j,
                                                        out + ((i - r0) * L + j) * 2 * I);
}

void contact_apc(const Context&, const float* probs, int64_t H, int64_t P, int64_t L,
                 const float* w, float* acc) {
    // Row sums of every head first; then each output row adds the heads in order, as one pass per
    // head would.
    std::vector<double> rows(static_cast<size_t>(H * L)), totals(static_cast<size_t>(H));
#pragma omp parallel for schedule(static) if (H > 1 && L > 64)
    for (int64_t h = 0; h < H; ++h)
        totals[size_t(h)] = kernels::glue::contact_row_sums(probs + h * P * P, P, L, rows.data() + h * L);
#pragma omp parallel for schedule(static) if (L > 64)
    for (int64_t i = 0; i < L; ++i)
        for (int64_t h = 0; h < H; ++h)
            kernels::glue::contact_apc_row(probs + h * P * P, P, L, w[h], rows.data() + h * L,
                                           totals[size_t(h)], i, acc);
}

void l2_normalize(const Context&, const float* x, float* y, int64_t rows, int64_t d, float eps) {
#pragma omp parallel for schedule(static) if (big(rows * d))
    for (int64_t r = 0; r < rows; ++r) kernels::glue::l2_normalize_row(x + r * d, y + r * d, d, eps);
}

void rms_norm(const Context&, const float* x, float* y, int64_t rows, int64_t d, float eps) {
#pragma omp parallel for schedule(static) if (big(rows * d))
    for (int64_t r = 0; r < rows; ++r) kernels::glue::rms_norm_row(x + r * d, y + r * d, d, eps);
}

void bin_expectation(const Context&, const float* probs, const float* values, float* out,
                     int64_t rows, int64_t K) {
#pragma omp parallel for schedule(static) if (big(rows * K))
    for (int64_t r = 0; r < rows; ++r)
        out[r] = kernels::glue::bin_expectation_row(probs + r * K, values, K);
}

void max_value(const Context&, const float* x, int64_t n, float* out) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
    out[0] = m;
}

void relpos_classes(const Context&, const int32_t* index, int64_t L, int64_t bins, int32_t* out) {
#pragma omp parallel for schedule(static) if (big(L * L))
    for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < L; ++j) out[i * L + j] = kernels::glue::relpos_class(index, bins, i, j);
}

void fill_table(kernels::KernelTable& t) {
    t.copy_strided = copy_strided;
    t.binary_rows = binary_rows;
    t.add_mul = add_mul;
    t.axpy = axpy;
    t.scale_rows = scale_rows;
    t.activation = activation;
    t.embedding = embedding;
    t.token_dropout = token_dropout;
    t.outer_product_difference = outer_product_difference;
    t.contact_apc = contact_apc;
    t.l2_normalize = l2_normalize;
    t.rms_norm = rms_norm;
    t.bin_expectation = bin_expectation;
    t.max_value = max_value;
    t.relpos_classes = relpos_classes;
}

}  // namespace bioinfer::cpu::glue
