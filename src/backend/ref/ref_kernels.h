// The reference backend: plain fp32 loops (double accumulation where it costs nothing in
// clarity), the oracle every other table is tested against. Registered as "ref".
#pragma once
#include "backend/kernels.h"

namespace bioinfer::kernels {

const KernelTable& ref_kernels();

}  // namespace bioinfer::kernels
