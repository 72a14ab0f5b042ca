// Run-time ISA selection: the widest kernel table this CPU supports. BIOINFER_ISA=avx2|ref
// forces a narrower one (for testing and for comparing variants).
#include "backend/cpu/dispatch.h"

#include <cstdlib>
#include <cstring>

#include "backend/ref/ref_kernels.h"

namespace bioinfer::kernels {

bool cpu_runs_avx512() {
    // Ask the CPU first: building the AVX-512 table runs AVX-512 instructions.
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           cpu_kernels_avx512();
}

bool cpu_runs_avx2() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

const KernelTable& cpu_kernels() {
    static const KernelTable* chosen = [] {
        const char* force = std::getenv("BIOINFER_ISA");
        if (force && std::strcmp(force, "ref") == 0) return &ref_kernels();
        const bool want512 = !(force && std::strcmp(force, "avx2") == 0);
        if (want512 && cpu_runs_avx512()) return cpu_kernels_avx512();
        if (cpu_runs_avx2()) return cpu_kernels_avx2();
        return &ref_kernels();
    }();
    return *chosen;
}

}  // namespace bioinfer::kernels
