// Thread count shared by our kernels and oneDNN (both run on the OpenMP runtime).
#include "core/threads.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>

#include "bioinfer/error.h"

namespace bioinfer {

int usable_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
    return std::max(1, omp_get_num_procs());
}

int max_threads() { return kMaxThreadsPerCpu * usable_cpus(); }

int checked_thread_count(long long n, const std::string& where) {
    BI_CHECK(n >= 0 && n <= max_threads(), where, "expected 0 (all ", usable_cpus(),
             " CPUs) to ", max_threads(), " (", kMaxThreadsPerCpu,
             " per CPU this process may use), got ", n);
    return n == 0 ? usable_cpus() : int(n);
}

void set_num_threads(int n) {
    if (n <= 0) n = usable_cpus();
    omp_set_num_threads(std::min(n, max_threads()));
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace bioinfer
