// The CPU's register-level arithmetic peaks: each instruction family the GEMMs can run on (fp32
// FMA on AVX2 and AVX-512, AVX512-BF16 dot products, AMX-BF16 and AMX-INT8 tiles, int8 on AVX2's
// vpmaddubsw / vpmaddwd pair and on AVX-VNNI / AVX512-VNNI) timed in a loop of independent
// accumulators on every worker thread, with no memory traffic. The ceiling a kernel's GFLOP/s is
// held against: a GEMM can reach at most this.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace bioinfer::cpu {

struct PeakKernel {
    std::string name;          // e.g. "fp32_fma_avx2"
    std::string dtype;         // the operands: fp32, bf16, int8
    std::string isa;           // the CPU features it needs, as /proc/cpuinfo names them
    double ops_per_instr = 0;  // multiply-adds count 2 ops
    bool supported = false;    // this CPU (and, for AMX, the kernel) lets it run
};

// Whether /proc/cpuinfo's flags line lists `flag` (its spelling: "avx512_vnni", "amx_int8").
bool cpu_has_flag(const std::string& flag);

// Whether Linux grants this process the AMX tile data state (asked once).
bool amx_permitted();
// Configures tiles 0-7 as 16 rows of 64 bytes on the calling thread (AMX CPUs only).
void amx_load_tiles();

// Every kernel this build knows, with `supported` set for this CPU.
std::vector<PeakKernel> peak_kernels();

struct PeakResult {
    double ops_per_s = 0;  // all threads together, best of the repetitions
    double seconds = 0;    // the best repetition's wall time
    int64_t instructions_per_thread = 0;
};

// Runs `k` on `threads` threads, each `iters` loop iterations (12 instructions or, for AMX, 4
// tile products each), best of `reps`; checks every thread's accumulators against the closed
// form of what the loop adds (throws if one disagrees: the loop did not run as counted).
PeakResult measure_peak(const PeakKernel& k, int threads, int64_t iters, int reps);

// Iterations that take about `seconds` on one thread at a nominal 3 GHz (each kernel's own
// throughput per cycle), capped where the accumulators stay exact.
int64_t peak_iterations(const PeakKernel& k, double seconds);

}  // namespace bioinfer::cpu
