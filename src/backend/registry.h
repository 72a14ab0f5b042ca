// The backend registry: a backend is a named kernel table that runs on one device. The CPU's
// tables register themselves (the reference, and cpu-avx2 / cpu-avx512 where this CPU runs them);
// another backend (a GPU) is one more folder under src/backend/ and one register_backend call,
// plus its device's memory functions (bioinfer/device.h).
#pragma once
#include <string>
#include <vector>

#include "backend/kernels.h"
#include "bioinfer/device.h"

namespace bioinfer::backend {

struct Backend {
    std::string name;  // "ref", "cpu-avx2", "cpu-avx512", ...
    Device device;     // where its kernels read and write
    const kernels::KernelTable* kernels = nullptr;
};

// Adds a backend; a name taken already (or "cpu", the alias below) is an error.
void register_backend(const Backend& b);

// Every registered backend, the built-in ones first, in registration order.
std::vector<const Backend*> backends();

// The backend of that name, or null. "cpu" names the best CPU backend of this machine (AVX-512
// where present, else AVX2, else the reference; BIOINFER_ISA=avx2|ref narrows the choice).
const Backend* find(const std::string& name);
// The same; an unknown name is an error listing the registered ones.
const Backend& get(const std::string& name);

// The backend a worker on `device` runs: "cpu" on the host; on another device, the first backend
// registered for it.
const Backend& for_device(Device device);

}  // namespace bioinfer::backend
