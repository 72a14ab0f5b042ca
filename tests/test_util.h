// Test helpers: seeded random tensors and comparisons that report PCC, max-abs and relative L2.
#pragma once
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "backend/kernels.h"
#include "backend/registry.h"
#include "bioinfer/error.h"
#include "bioinfer/tensor.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "core/agreement.h"
#include "ops/ops.h"

namespace bioinfer::test {

// Runs f and returns the error message it throws (fails the test when it does not throw).
template <typename F>
std::string error_of(F f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected an error";
    return "";
}

// `s` contains `part`.
inline void expect_contains(const std::string& s, const std::string& part) {
    EXPECT_NE(s.find(part), std::string::npos) << "'" << s << "' lacks '" << part << "'";
}

// A fresh folder under the system's temporary folder, removed with everything in it at scope end.
struct TempDir {
    std::filesystem::path path;
    TempDir() {
        static int counter = 0;
        path = std::filesystem::temp_directory_path() /
               ("bioinfer_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
        std::filesystem::create_directories(path);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string operator/(const std::string& n) const { return (path / n).string(); }
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
}

// A parity fixture folder (tools/reference/make_*_fixtures.py): cases.json (its "cases" as id and
// sequence, the rest kept as `meta`) and reference.safetensors.
struct ParityCase {
    std::string id, sequence;
};
struct ParityFixture {
    std::string dir;
    std::vector<ParityCase> cases;
    nlohmann::json meta;
    std::shared_ptr<io::SafetensorsFile> ref;
    bool has(const std::string& k) const { return ref->has(k); }
    Tensor get(const std::string& k) const { return ref->get(k).to_f32(); }
};

#ifdef BIOINFER_FIXTURES
inline ParityFixture load_parity_fixture(const std::string& name) {
    ParityFixture f;
    f.dir = std::string(BIOINFER_FIXTURES) + "/" + name;
    f.meta = nlohmann::json::parse(io::read_file(f.dir + "/cases.json"));
    for (auto& c : f.meta["cases"]) f.cases.push_back({c["id"], c["sequence"]});
    f.ref = io::SafetensorsFile::open(f.dir + "/reference.safetensors");
    return f;
}
#endif

// a + b and a - b into new tensors (the tests' sums of reference stages).
inline Tensor plus(const Tensor& a, const Tensor& b) {
    Tensor out = Tensor::empty(a.shape());
    ops::add(a, b, out);
    return out;
}
inline Tensor minus(const Tensor& a, const Tensor& b) {
    Tensor nb = Tensor::empty(b.shape());
    ops::scale(b, -1.0f, nb);
    return plus(a, nb);
}

inline Tensor random_tensor(const Shape& s, uint32_t seed, float mean = 0.0f, float sd = 1.0f) {
    Tensor t = Tensor::empty(s);
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(mean, sd);
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = d(rng);
    return t;
}

using Stats = Agreement;

inline Stats stats(const float* a, const float* b, int64_t n) { return agreement(a, b, n); }

// Elementwise |got - ref| <= atol + rtol * |ref|.
inline void compare(const Tensor& got, const Tensor& ref, double atol, double rtol,
                    const std::string& what) {
    ASSERT_EQ(got.numel(), ref.numel()) << what;
    int bad = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
        const double g = got.f32()[i], r = ref.f32()[i];
        if (!(std::fabs(g - r) <= atol + rtol * std::fabs(r)) && bad++ < 5)
            ADD_FAILURE() << what << " [" << i << "]: got " << g << ", expected " << r;
    }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.numel() << " elements differ";
}

// Whether this CPU has a bf16 GEMM: without one, loaders fall back to fp32 and a bf16 test
// would test nothing new.
inline bool has_bf16_gemm() {
    return ops::pack_linear_weight(Tensor::zeros({16, 16}), DType::BF16) != nullptr;
}

// The CPU's table without its model-specific entries (kernels::core_only), registered once as
// "cpu-core": what a new backend that fills only the core runs, ops composing the rest.
inline const std::string& core_only_backend() {
    static const std::string name = [] {
        static kernels::KernelTable t = kernels::core_only(*backend::get("cpu").kernels);
        t.name = "cpu-core";
        backend::register_backend({t.name, kHost, &t});
        return std::string(t.name);
    }();
    return name;
}

}  // namespace bioinfer::test
