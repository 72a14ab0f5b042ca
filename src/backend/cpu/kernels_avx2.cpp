// AVX2 + FMA instantiation of the CPU kernels (the baseline ISA).
#include "backend/cpu/kernels_impl.h"
#include "backend/cpu/linear_dnnl.h"
#include "ops/kernels.h"

namespace bioinfer::kernels {

const KernelTable* cpu_kernels_avx2() {
    using V = cpu::VecAvx2;
    static const KernelTable t{"cpu-avx2",         cpu::linear_dnnl,   cpu::gemm_nn<V>,
                               cpu::layer_norm<V>, cpu::gelu<V>,       cpu::softmax<V>,
                               cpu::rotary<V>,     cpu::add<V>,        cpu::scale<V>};
    return &t;
}

}  // namespace bioinfer::kernels
