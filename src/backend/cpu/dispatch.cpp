// Run-time ISA selection: the widest kernel table this CPU supports. BIOINFER_ISA=avx2|ref
// forces a narrower one (for testing and for comparing variants).
#include <cstdlib>
#include <cstring>

#include "ops/kernels.h"

namespace bioinfer::kernels {

const KernelTable& cpu_kernels() {
    static const KernelTable* chosen = [] {
        const char* force = std::getenv("BIOINFER_ISA");
        if (force && std::strcmp(force, "ref") == 0) return &ref_kernels();
        bool want512 = !(force && std::strcmp(force, "avx2") == 0);
        __builtin_cpu_init();
        if (want512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"))
            return cpu_kernels_avx512();
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
            return cpu_kernels_avx2();
        return &ref_kernels();
    }();
    return *chosen;
}

}  // namespace bioinfer::kernels
