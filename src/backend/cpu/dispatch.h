// The CPU's kernel tables, one per ISA, and the run-time choice among them (dispatch.cpp).
#pragma once
#include "backend/kernels.h"

namespace bioinfer::kernels {

const KernelTable* cpu_kernels_avx2();
const KernelTable* cpu_kernels_avx512();  // call only where cpu_runs_avx512() holds
// The best table this CPU runs (AVX-512 where present, else AVX2, else the reference).
const KernelTable& cpu_kernels();
// Whether this CPU runs a table (its ISA is present).
bool cpu_runs_avx2();
bool cpu_runs_avx512();

}  // namespace bioinfer::kernels
