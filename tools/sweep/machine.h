// What a benchmark records about the machine it ran on: the CPU model, its ISA flags, the
// threads, the kernels and libraries in use; and the machine's measured ceilings (register-level
// arithmetic peaks per instruction family, the GEMM's peak, memory bandwidth) that results are
// stated as fractions of.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace bioinfer::tuning {

std::string cpu_model();
// The ISA flags the kernels choose between, as /proc/cpuinfo names them (true / false).
nlohmann::json isa_flags();
// cpu, isa, cores, threads, kernels, libraries.
nlohmann::json machine_facts();

// Register-level peaks of every instruction family this CPU runs (cpu::peak_kernels), each loop
// about `seconds` per repetition, best of `reps`, on `threads` threads: rows of name, dtype, isa,
// supported and, where supported, ops_per_s (G units: gflops for fp32/bf16, gops for int8).
nlohmann::json register_peaks(int threads, double seconds, int reps);

// The packed GEMM's peak (a 2048^3 GEMM per compute dtype the CPU has) and the memory bandwidth
// (y = a + b over 64 MiB fp32 arrays): gemm_gflops {fp32, bf16}, memory_gbps, method.
nlohmann::json measure_gemm_and_memory_peaks();

}  // namespace bioinfer::tuning
