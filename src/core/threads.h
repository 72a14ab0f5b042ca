// One thread pool for the whole engine: OpenMP (the runtime oneDNN is built against on Debian).
#pragma once
#include <string>

namespace bioinfer {

// A thread count may be at most this many times the CPUs the process may use: more only
// oversubscribes the cores, and counts far beyond it make the OpenMP runtime fail to create
// threads or allocate gigabytes of thread state (docs/reliability.md).
inline constexpr int kMaxThreadsPerCpu = 4;

// The CPUs this process may run on (its affinity mask; at least 1).
int usable_cpus();
// The largest thread count accepted: kMaxThreadsPerCpu * usable_cpus().
int max_threads();
// `n` from the user (`where`: the option or argument that gave it) as a thread count: 0 means
// all usable CPUs; negative or above max_threads() is an error naming `where`.
int checked_thread_count(long long n, const std::string& where);

// n <= 0 means all cores; n must be at most max_threads() (checked_thread_count gives such n).
void set_num_threads(int n);
int num_threads();

}  // namespace bioinfer
