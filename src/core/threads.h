// One thread pool for the whole engine: OpenMP (the runtime oneDNN is built against on Debian).
#pragma once

namespace bioinfer {

// n <= 0 means all cores.
void set_num_threads(int n);
int num_threads();

}  // namespace bioinfer
