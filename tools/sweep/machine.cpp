// The machine facts and measured ceilings a benchmark records (machine.h): /proc/cpuinfo, the
// peak loops of backend/cpu/peak.h, the packed GEMM and a memory stream.
#include "sweep/machine.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>
#include <vector>

#include "backend/cpu/linear_dnnl.h"
#include "backend/cpu/peak.h"
#include "core/threads.h"
#include "ops/ops.h"
#include "sweep/gemm_timing.h"

namespace bioinfer::tuning {

using nlohmann::json;

namespace {

std::string cpuinfo_field(const std::string& key) {
    std::ifstream f("/proc/cpuinfo");
    for (std::string line; std::getline(f, line);)
        if (line.rfind(key, 0) == 0 && line.find(':') != std::string::npos)
            return line.substr(line.find(':') + 1);
    return "";
}

template <typename F>
double best_seconds(int reps, F f) {
    double best = 1e300;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        best = std::min(
            best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}

}  // namespace

std::string cpu_model() {
    const std::string m = cpuinfo_field("model name");
    return m.size() > 1 ? m.substr(1) : "unknown";
}

json isa_flags() {
    json j = json::object();
    for (const char* f : {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_bf16",
                          "avx512_vnni", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8"})
        j[f] = cpu::cpu_has_flag(f);
    return j;
}

json machine_facts() {
    return {{"cpu", cpu_model()},
            {"isa", isa_flags()},
            {"cores", std::thread::hardware_concurrency()},
            {"threads", num_threads()},
            {"kernels", ops::backend_name()},
            {"libraries",
             {{"onednn", cpu::onednn_version()},
              {"compiler", "gcc " __VERSION__},
              {"openmp", _OPENMP}}}};
}

json register_peaks(int threads, double seconds, int reps) {
    json rows = json::array();
    for (const cpu::PeakKernel& k : cpu::peak_kernels()) {
        json row = {{"name", k.name},
                    {"dtype", k.dtype},
                    {"isa", k.isa},
                    {"ops_per_instruction", k.ops_per_instr},
                    {"supported", k.supported}};
        if (k.supported) {
            const cpu::PeakResult r =
                cpu::measure_peak(k, threads, cpu::peak_iterations(k, seconds), reps);
            row[k.dtype == "int8" ? "gops" : "gflops"] = r.ops_per_s * 1e-9;
            row["seconds"] = r.seconds;
            row["instructions_per_thread"] = r.instructions_per_thread;
        }
        rows.push_back(row);
    }
    return rows;
}

json measure_gemm_and_memory_peaks() {
    json g = json::object();
    const int64_t n = 2048;
    for (auto [name, dt] :
         {std::pair<const char*, DType>{"fp32", DType::F32}, {"bf16", DType::BF16}}) {
        const double s = time_packed_linear(n, n, n, dt, 5, 1);
        if (s > 0) g[name] = 2.0 * double(n * n * n) / s * 1e-9;
    }
    const int64_t m = int64_t(1) << 24;  // 64 MiB per array
    std::vector<float> a(static_cast<size_t>(m), 1.0f), b(static_cast<size_t>(m), 2.0f),
        c(static_cast<size_t>(m), 0.0f);
    const auto stream = [&] {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < m; ++i) c[size_t(i)] = a[size_t(i)] + b[size_t(i)];
    };
    stream();
    const double gbps = 3.0 * 4.0 * double(m) / best_seconds(5, stream) * 1e-9;
    return {{"gemm_gflops", g},
            {"memory_gbps", gbps},
            {"method",
             "gemm: best of 5 packed 2048^3 GEMMs; memory: best of 5 passes of "
             "y = a + b over 64 MiB fp32 arrays, 3 arrays counted"}};
}

}  // namespace bioinfer::tuning
