// The own AMX GEMMs (backend/cpu/gemm_amx.h) against exact references, on CPUs with AMX (skipped
// elsewhere): int8 sums equal, to the last bit, a scalar int32 loop and oneDNN's u8 x s8 GEMM on
// the same operands; bf16 sums equal an fp64 loop over the bf16-rounded operands to fp32
// accumulation's error. Shapes leave partial row blocks, column tiles and K tiles.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/gemm_amx.h"
#include "backend/cpu/linear_dnnl.h"
#include "bioinfer/dtype.h"

namespace bioinfer::cpu {
namespace {

struct Collect {
    std::vector<int32_t> i;  // int8: the sums
    std::vector<float> f;    // bf16: the sums
    std::vector<int> seen;   // how often each output was handed out
    int64_t N = 0;
};

template <bool Int8>
void collect(void* ctx, const void* block, int64_t m0, int64_t rows, int64_t n0, int64_t cols) {
    auto& c = *static_cast<Collect*>(ctx);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < cols; ++j) {
            const size_t at = size_t((m0 + r) * c.N + n0 + j);
            if constexpr (Int8)
                c.i[at] = static_cast<const int32_t*>(block)[r * 32 + j];
            else
                c.f[at] = static_cast<const float*>(block)[r * 32 + j];
            ++c.seen[at];
        }
}

struct Shape {
    int64_t M, K, N;
};
const Shape kShapes[] = {{1, 64, 32}, {7, 100, 33}, {33, 130, 17}, {70, 257, 96}, {300, 1280, 80}};

TEST(GemmAmx, Int8SumsEqualScalarAndOneDnn) {
    if (!amx_gemm_usable()) GTEST_SKIP() << "no AMX on this CPU";
    std::mt19937 rng(7);
    for (const Shape& s : kShapes) {
        SCOPED_TRACE(std::to_string(s.M) + "x" + std::to_string(s.K) + "x" + std::to_string(s.N));
        std::vector<int8_t> w(size_t(s.N * s.K));
        for (auto& v : w) v = int8_t(int(rng() % 255) - 127);
        AmxWeights* p = pack_amx(w.data(), DType::I8, s.K, s.N, DType::I8);
        ASSERT_NE(p, nullptr);
        const int64_t lda = amx_lda(*p), rows = (s.M + kAmxRows - 1) / kAmxRows * kAmxRows;
        ASSERT_GE(lda, s.K);
        std::vector<uint8_t> a(size_t(rows * lda), 128), dense(size_t(s.M * s.K));
        for (int64_t m = 0; m < s.M; ++m)
            for (int64_t k = 0; k < s.K; ++k)
                a[size_t(m * lda + k)] = dense[size_t(m * s.K + k)] = uint8_t(rng() % 256);
        Collect c{
            std::vector<int32_t>(size_t(s.M * s.N)), {}, std::vector<int>(size_t(s.M * s.N)), s.N};
        amx_gemm(a.data(), *p, s.M, collect<true>, &c);
        void* pd = pack_linear_dnnl(w.data(), DType::I8, s.K, s.N, DType::I8);
        std::vector<int32_t> dnnl(size_t(s.M * s.N));
        linear_int8_dnnl(dense.data(), pd, dnnl.data(), s.M, s.K, s.N);
        free_packed_dnnl(pd);
        for (int64_t m = 0; m < s.M; ++m)
            for (int64_t n = 0; n < s.N; ++n) {
                int32_t want = 0;
                for (int64_t k = 0; k < s.K; ++k)
                    want += int32_t(dense[size_t(m * s.K + k)]) * w[size_t(n * s.K + k)];
                const size_t at = size_t(m * s.N + n);
                ASSERT_EQ(c.seen[at], 1) << m << "," << n;
                ASSERT_EQ(c.i[at], want) << m << "," << n;
                ASSERT_EQ(c.i[at], dnnl[at]) << m << "," << n;
            }
        free_amx(p);
    }
}

TEST(GemmAmx, Bf16SumsMatchFp64OverRoundedOperands) {
    if (!amx_gemm_usable()) GTEST_SKIP() << "no AMX on this CPU";
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (const Shape& s : kShapes) {
        SCOPED_TRACE(std::to_string(s.M) + "x" + std::to_string(s.K) + "x" + std::to_string(s.N));
        std::vector<float> x(size_t(s.M * s.K)), w(size_t(s.N * s.K));
        for (auto& v : x) v = nd(rng);
        for (auto& v : w) v = nd(rng);
        std::vector<uint16_t> wb(w.size());
        for (size_t i = 0; i < w.size(); ++i) wb[i] = f32_to_bf16(w[i]);
        // fp32 weights are rounded at packing exactly as bf16 ones are stored
        for (DType wd : {DType::F32, DType::BF16}) {
            AmxWeights* p =
                pack_amx(wd == DType::F32 ? static_cast<const void*>(w.data()) : wb.data(), wd, s.K,
                         s.N, DType::BF16);
            ASSERT_NE(p, nullptr);
            const int64_t lda = amx_lda(*p), rows = (s.M + kAmxRows - 1) / kAmxRows * kAmxRows;
            std::vector<uint16_t> xb(size_t(rows * lda), 0xffff);
            amx_round_bf16(x.data(), s.M, s.K, xb.data(), lda);
            std::fill(xb.begin() + s.M * lda, xb.end(), uint16_t(0));
            for (int64_t m = 0; m < s.M; ++m) {
                for (int64_t k = 0; k < s.K; ++k)
                    ASSERT_EQ(xb[size_t(m * lda + k)], f32_to_bf16(x[size_t(m * s.K + k)]));
                for (int64_t k = s.K; k < lda; ++k) ASSERT_EQ(xb[size_t(m * lda + k)], 0);
            }
            Collect c{{},
                      std::vector<float>(size_t(s.M * s.N)),
                      std::vector<int>(size_t(s.M * s.N)),
                      s.N};
            amx_gemm(xb.data(), *p, s.M, collect<false>, &c);
            for (int64_t m = 0; m < s.M; ++m)
                for (int64_t n = 0; n < s.N; ++n) {
                    double want = 0, mag = 0;
                    for (int64_t k = 0; k < s.K; ++k) {
                        const double t = double(bf16_to_f32(xb[size_t(m * lda + k)])) *
                                         bf16_to_f32(wb[size_t(n * s.K + k)]);
                        want += t;
                        mag += std::fabs(t);
                    }
                    const size_t at = size_t(m * s.N + n);
                    ASSERT_EQ(c.seen[at], 1) << m << "," << n;
                    // products are exact in fp32; only the K additions round
                    ASSERT_NEAR(c.f[at], want, 1e-6 * mag + 1e-6) << m << "," << n;
                }
            free_amx(p);
        }
    }
}

}  // namespace
}  // namespace bioinfer::cpu
