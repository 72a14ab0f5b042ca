// AVX2 + FMA instantiation of the CPU kernels (the baseline ISA).
#include "backend/cpu/dispatch.h"
#include "backend/cpu/kernel_table.h"

namespace bioinfer::kernels {

const KernelTable* cpu_kernels_avx2() {
    static const KernelTable t = cpu::make_kernel_table<cpu::VecAvx2>();
    return &t;
}

}  // namespace bioinfer::kernels
