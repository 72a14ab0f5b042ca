// AVX2 + FMA instantiation of the CPU kernels (the baseline ISA).
#include "backend/cpu/kernels_impl.h"
#include "backend/cpu/linear_dnnl.h"
#include "ops/kernels.h"

namespace bioinfer::kernels {

const KernelTable* cpu_kernels_avx2() {
    using V = cpu::VecAvx2;
    static const KernelTable t{.name = "cpu-avx2",
                               .linear = cpu::linear_dnnl,
                               .pack_linear = cpu::pack_linear_dnnl,
                               .free_packed = cpu::free_packed_dnnl,
                               .gemm_nn = cpu::gemm_nn<V>,
                               .attention = cpu::attention<V>,
                               .layer_norm = cpu::layer_norm<V>,
                               .gelu = cpu::gelu<V>,
                               .swiglu = cpu::swiglu<V>,
                               .softmax = cpu::softmax<V>,
                               .rotary = cpu::rotary<V>,
                               .add = cpu::add<V>,
                               .scale = cpu::scale<V>};
    return &t;
}

}  // namespace bioinfer::kernels
