// AVX-512 instantiation of the CPU kernels, chosen at run time where the CPU has AVX-512F.
#include "backend/cpu/dispatch.h"
#include "backend/cpu/kernel_table.h"

namespace bioinfer::kernels {

const KernelTable* cpu_kernels_avx512() {
    static const KernelTable t = cpu::make_kernel_table<cpu::VecAvx512>();
    return &t;
}

}  // namespace bioinfer::kernels
