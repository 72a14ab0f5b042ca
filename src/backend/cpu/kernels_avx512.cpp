// AVX-512 instantiation of the CPU kernels, chosen at run time where the CPU has AVX-512F.
#include "backend/cpu/kernels_impl.h"
#include "backend/cpu/linear_dnnl.h"
#include "ops/kernels.h"

namespace bioinfer::kernels {

const KernelTable* cpu_kernels_avx512() {
    using V = cpu::VecAvx512;
    static const KernelTable t{"cpu-avx512",       cpu::linear_dnnl,   cpu::gemm_nn<V>,
                               cpu::layer_norm<V>, cpu::gelu<V>,       cpu::softmax<V>,
                               cpu::rotary<V>,     cpu::add<V>,        cpu::scale<V>};
    return &t;
}

}  // namespace bioinfer::kernels
