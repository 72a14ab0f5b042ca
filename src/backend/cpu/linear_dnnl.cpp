// oneDNN matmul provider. Plain weights stay in the checkpoint's (N, K) row-major layout, described
// to oneDNN as a transposed (K, N) matrix, which oneDNN then repacks on every call. Packed weights
// are reordered once into the layout oneDNN chooses for the shape (format_tag::any); that layout
// depends on K and N only, so one packed copy serves every batch size M.
#include "backend/cpu/linear_dnnl.h"

#include <algorithm>
#include <cstdlib>
#include <dnnl.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <tuple>
#include <vector>

namespace bioinfer::cpu {
namespace {

using dnnl::memory;

dnnl::engine& engine() {
    static dnnl::engine e(dnnl::engine::kind::cpu, 0);
    return e;
}

memory::data_type dnnl_dt(DType d) {
    switch (d) {
        case DType::F32: return memory::data_type::f32;
        case DType::BF16: return memory::data_type::bf16;
        case DType::F16: return memory::data_type::f16;
        case DType::I8:
            return memory::data_type::s8;
        case DType::I32:
            return memory::data_type::s32;
    }
    return memory::data_type::f32;
}

memory::desc md(int64_t r, int64_t c, int64_t sr, int64_t sc,
                memory::data_type t = memory::data_type::f32) {
    return memory::desc({r, c}, t, memory::dims{sr, sc});
}

// The plain weights view: w (N, K) row-major seen as (K, N).
memory::desc plain_weights(int64_t K, int64_t N, memory::data_type t = memory::data_type::f32) {
    return md(K, N, 1, K, t);
}

struct Packed {
    memory::desc desc;
    memory mem;  // owns the packed buffer
    DType compute;
};

// Primitives are shared by every layer of the same shape: the packed layout is a function of
// (K, N) and the compute dtype alone, so that is all the key needs to say about the weights.
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, Act, float, bool, bool, DType>;

struct Cache {
    std::mutex mu;
    std::map<Key, dnnl::matmul> prims;
    std::map<std::pair<int64_t, int64_t>, dnnl::reorder> to_bf16;  // (M, K) -> f32 -> bf16
    // batched matmuls: (G, M, N, K, trans_a, trans_b)
    std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool>, dnnl::matmul> bmm;
    std::map<std::tuple<int64_t, int64_t, int64_t>, dnnl::matmul> int8;  // (M, K, N)
};

Cache& cache() {
    static Cache c;
    return c;
}

// Every primitive here runs on a scratchpad of the calling thread's own (scratchpad_mode::user):
// in library mode oneDNN 2.6 shares one scratchpad between primitives unless it was built for
// concurrent execution, and two threads running primitives at once (Python threads, --workers)
// overwrote each other's scratch and got wrong outputs now and then.
dnnl::primitive_attr user_scratchpad(dnnl::primitive_attr attr = {}) {
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return attr;
}

void add_scratchpad(const dnnl::primitive& p, std::unordered_map<int, memory>& args) {
    const dnnl_memory_desc_t* sd =
        dnnl_primitive_desc_query_md(p.get_primitive_desc(), dnnl_query_scratchpad_md, 0);
    if (!sd) return;
    const memory::desc d(*sd);
    const size_t bytes = d.get_size();
    if (bytes == 0) return;
    args.emplace(DNNL_ARG_SCRATCHPAD, memory(d, engine(), thread_scratch(kScratchDnnl, bytes)));
}

dnnl::matmul make(int64_t M, int64_t K, int64_t N, int64_t ldy, bool bias, Act act, float scale,
                  bool accumulate, const memory::desc& wei, DType compute) {
    dnnl::post_ops po;
    if (act == Act::Gelu) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
    if (act == Act::GeluTanh)
        po.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_tanh, 0.0f, 0.0f);
    if (act == Act::Relu) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    if (act == Act::Sigmoid) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_logistic, 0.0f, 0.0f);
    // After bias and GELU, before the residual sum: y (+)= scale * act(x.w^T + b).
    if (scale != 1.0f) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, scale, 0.0f);
    if (accumulate) po.append_sum(1.0f);
    dnnl::primitive_attr attr = user_scratchpad();
    attr.set_post_ops(po);
    auto src = md(M, K, K, 1, dnnl_dt(compute)), dst = md(M, N, ldy, 1);
    if (bias) {
        dnnl::matmul::desc d(src, wei, md(1, N, N, 1), dst);
        return dnnl::matmul(dnnl::matmul::primitive_desc(d, attr, engine()));
    }
    dnnl::matmul::desc d(src, wei, dst);
    return dnnl::matmul(dnnl::matmul::primitive_desc(d, attr, engine()));
}

}  // namespace

void* thread_scratch(ScratchSlot slot, size_t bytes) {
    struct Free {
        void operator()(void* p) const { std::free(p); }
    };
    thread_local std::unique_ptr<void, Free> buf[kScratchSlots];
    thread_local size_t cap[kScratchSlots] = {};
    if (cap[slot] < bytes) {
        const size_t rounded = (bytes + 63) / 64 * 64;
        buf[slot].reset(std::aligned_alloc(64, std::max<size_t>(rounded, 64)));
        if (!buf[slot]) throw std::bad_alloc();
        cap[slot] = rounded;
    }
    return buf[slot].get();
}

void* pack_linear_dnnl(const void* w, DType w_dtype, int64_t K, int64_t N, DType compute) {
    auto& eng = engine();
    if (compute == DType::F16) return nullptr;
    // Ask the matmul which weights layout it wants at a representative batch size.
    constexpr int64_t kProbeM = 4096;
    const auto ct = dnnl_dt(compute);
    memory::desc any({K, N}, ct, memory::format_tag::any);
    // int8: u8 activations (s8 shifted by 128) times s8 weights into s32
    const bool int8 = compute == DType::I8;
    const auto src_dt = int8 ? memory::data_type::u8 : ct;
    const auto dst_dt = int8 ? memory::data_type::s32 : memory::data_type::f32;
    dnnl::matmul::primitive_desc pd;
    try {
        pd = dnnl::matmul::primitive_desc(
            dnnl::matmul::desc(md(kProbeM, K, K, 1, src_dt), any, md(kProbeM, N, N, 1, dst_dt)),
            eng);
    } catch (const dnnl::error&) {
        return nullptr;  // no kernel for this compute dtype on this CPU
    }
    auto* p = new Packed{pd.weights_desc(), memory(pd.weights_desc(), eng), compute};
    // One reorder converts the stored dtype and blocks the layout (bf16 stays bf16 throughout).
    // oneDNN 2.6 has no fast reorder out of f16, or out of bf16 into f32: such a matrix is first
    // widened into an fp32 staging buffer of its own (one matrix at a time, freed at once).
    std::vector<float> staged;
    const void* src_ptr = w;
    DType src_dtype = w_dtype;
    if (w_dtype == DType::F16 || (w_dtype == DType::BF16 && compute == DType::F32)) {
        staged.resize(size_t(K * N));
        const auto* h = static_cast<const uint16_t*>(w);
        const bool half = w_dtype == DType::F16;
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < K * N; ++i) staged[size_t(i)] = half ? f16_to_f32(h[i]) : bf16_to_f32(h[i]);
        src_ptr = staged.data();
        src_dtype = DType::F32;
    }
    memory src(plain_weights(K, N, dnnl_dt(src_dtype)), eng, const_cast<void*>(src_ptr));
    dnnl::stream s(eng);
    dnnl::reorder(src, p->mem).execute(s, src, p->mem);
    s.wait();
    return p;
}

void linear_int8_dnnl(const uint8_t* xq, const void* packed, int32_t* acc, int64_t M, int64_t K,
                      int64_t N) {
    const auto* p = static_cast<const Packed*>(packed);
    dnnl::matmul prim;
    {
        Cache& c = cache();
        std::lock_guard<std::mutex> lock(c.mu);
        const auto key = std::make_tuple(M, K, N);
        auto it = c.int8.find(key);
        if (it == c.int8.end()) {
            dnnl::matmul::desc d(md(M, K, K, 1, memory::data_type::u8), p->desc,
                                 md(M, N, N, 1, memory::data_type::s32));
            it = c.int8.emplace(key, dnnl::matmul(dnnl::matmul::primitive_desc(d, user_scratchpad(), engine())))
                     .first;
        }
        prim = it->second;
    }
    auto& eng = engine();
    dnnl::stream s(eng);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, memory(md(M, K, K, 1, memory::data_type::u8), eng, const_cast<uint8_t*>(xq))},
        {DNNL_ARG_WEIGHTS, p->mem},
        {DNNL_ARG_DST, memory(md(M, N, N, 1, memory::data_type::s32), eng, acc)}};
    add_scratchpad(prim, args);
    prim.execute(s, args);
    s.wait();
}

bool dnnl_int8_exact_products() {
    // ONEDNN_MAX_CPU_ISA can hold oneDNN below what the CPU has: ask the library, not the CPU.
    const auto isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_vnni || isa == dnnl::cpu_isa::avx512_core_bf16 ||
           isa == dnnl::cpu_isa::avx512_core_amx;
}

void free_packed_dnnl(void* packed) {
    delete static_cast<Packed*>(packed);
}

void bmm_dnnl(const float* a, const float* b, float* c, int64_t G, int64_t M, int64_t N, int64_t K,
              bool trans_a, bool trans_b) {
    const auto f32 = memory::data_type::f32;
    const memory::desc ad({G, M, K}, f32, trans_a ? memory::dims{M * K, 1, M} : memory::dims{M * K, K, 1});
    const memory::desc bd({G, K, N}, f32, trans_b ? memory::dims{K * N, 1, K} : memory::dims{K * N, N, 1});
    const memory::desc cd({G, M, N}, f32, memory::dims{M * N, N, 1});
    dnnl::matmul prim;
    {
        Cache& c = cache();
        std::lock_guard<std::mutex> lock(c.mu);
        const auto key = std::make_tuple(G, M, N, K, trans_a, trans_b);
        auto it = c.bmm.find(key);
        if (it == c.bmm.end())
            it = c.bmm.emplace(key, dnnl::matmul(dnnl::matmul::primitive_desc(
                                        dnnl::matmul::desc(ad, bd, cd), user_scratchpad(), engine())))
                     .first;
        prim = it->second;
    }
    auto& eng = engine();
    dnnl::stream s(eng);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(ad, eng, const_cast<float*>(a))},
                                         {DNNL_ARG_WEIGHTS, memory(bd, eng, const_cast<float*>(b))},
                                         {DNNL_ARG_DST, memory(cd, eng, c)}};
    add_scratchpad(prim, args);
    prim.execute(s, args);
    s.wait();
}

void linear_dnnl(const float* x, const float* w, const void* packed, const float* b, float* y,
                 int64_t M, int64_t K, int64_t N, Act act, float scale, bool accumulate,
                 int64_t ldy) {
    if (ldy == 0) ldy = N;
    const auto* p = static_cast<const Packed*>(packed);
    const memory::desc wd = p ? p->desc : plain_weights(K, N);
    const DType compute = p ? p->compute : DType::F32;
    Key key{M, K, N, ldy, b != nullptr, act, scale, accumulate, p != nullptr, compute};
    dnnl::matmul prim;
    {
        Cache& c = cache();
        std::lock_guard<std::mutex> lock(c.mu);
        auto it = c.prims.find(key);
        if (it == c.prims.end())
            it = c.prims.emplace(key, make(M, K, N, ldy, b, act, scale, accumulate, wd, compute))
                     .first;
        prim = it->second;
    }
    auto& eng = engine();
    dnnl::stream s(eng);
    memory src_mem(md(M, K, K, 1), eng, const_cast<float*>(x));
    if (compute == DType::BF16) {  // round x to bf16 (oneDNN's vectorised reorder, cached)
        memory xb(md(M, K, K, 1, memory::data_type::bf16), eng,
                  static_cast<uint16_t*>(
                      thread_scratch(kScratchBf16Activations, size_t(M * K) * sizeof(uint16_t))));
        dnnl::reorder round;
        {
            Cache& c = cache();
            std::lock_guard<std::mutex> lock(c.mu);
            auto it = c.to_bf16.find({M, K});
            if (it == c.to_bf16.end())
                it = c.to_bf16.emplace(std::make_pair(M, K), dnnl::reorder(src_mem, xb)).first;
            round = it->second;
        }
        round.execute(s, src_mem, xb);
        src_mem = xb;
    }
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src_mem},
        {DNNL_ARG_WEIGHTS, p ? p->mem : memory(wd, eng, const_cast<float*>(w))},
        {DNNL_ARG_DST, memory(md(M, N, ldy, 1), eng, y)}};
    if (b) args.emplace(DNNL_ARG_BIAS, memory(md(1, N, N, 1), eng, const_cast<float*>(b)));
    add_scratchpad(prim, args);
    prim.execute(s, args);
    s.wait();
}

std::string onednn_version() {
    const dnnl_version_t* v = dnnl_version();
    return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
           " (" + v->hash + ")";
}

}  // namespace bioinfer::cpu
