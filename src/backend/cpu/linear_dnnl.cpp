// oneDNN matmul provider. Weights stay in the checkpoint's (N, K) row-major layout, described to
// oneDNN as a transposed (K, N) matrix; oneDNN packs them per call.
#include "backend/cpu/linear_dnnl.h"

#include <dnnl.hpp>
#include <map>
#include <mutex>
#include <tuple>

namespace bioinfer::cpu {
namespace {

using dnnl::memory;

dnnl::engine& engine() {
    static dnnl::engine e(dnnl::engine::kind::cpu, 0);
    return e;
}

using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, bool>;

struct Cache {
    std::mutex mu;
    std::map<Key, dnnl::matmul> prims;
};

Cache& cache() {
    static Cache c;
    return c;
}

memory::desc md(int64_t r, int64_t c, int64_t sr, int64_t sc) {
    return memory::desc({r, c}, memory::data_type::f32, memory::dims{sr, sc});
}

dnnl::matmul make(int64_t M, int64_t K, int64_t N, bool bias, bool gelu, bool accumulate) {
    dnnl::post_ops po;
    if (gelu) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
    if (accumulate) po.append_sum(1.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    auto src = md(M, K, K, 1), wei = md(K, N, 1, K), dst = md(M, N, N, 1);
    if (bias) {
        dnnl::matmul::desc d(src, wei, md(1, N, N, 1), dst);
        return dnnl::matmul(dnnl::matmul::primitive_desc(d, attr, engine()));
    }
    dnnl::matmul::desc d(src, wei, dst);
    return dnnl::matmul(dnnl::matmul::primitive_desc(d, attr, engine()));
}

}  // namespace

void linear_dnnl(const float* x, const float* w, const float* b, float* y, int64_t M, int64_t K,
                 int64_t N, bool gelu, bool accumulate) {
    Key key{M, K, N, b != nullptr, gelu, accumulate};
    dnnl::matmul prim;
    {
        Cache& c = cache();
        std::lock_guard<std::mutex> lock(c.mu);
        auto it = c.prims.find(key);
        if (it == c.prims.end()) it = c.prims.emplace(key, make(M, K, N, b, gelu, accumulate)).first;
        prim = it->second;
    }
    auto& eng = engine();
    dnnl::stream s(eng);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, memory(md(M, K, K, 1), eng, const_cast<float*>(x))},
        {DNNL_ARG_WEIGHTS, memory(md(K, N, 1, K), eng, const_cast<float*>(w))},
        {DNNL_ARG_DST, memory(md(M, N, N, 1), eng, y)}};
    if (b) args.emplace(DNNL_ARG_BIAS, memory(md(1, N, N, 1), eng, const_cast<float*>(b)));
    prim.execute(s, args);
    s.wait();
}

}  // namespace bioinfer::cpu
