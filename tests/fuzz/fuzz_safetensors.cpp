// A safetensors file: header, JSON, dtypes and offsets checked on open; then every tensor is
// read whole (the non-finite scan touches each byte the header claims).
#include "fuzz_target.h"
#include "io/model_dir.h"
#include "io/safetensors.h"

using namespace bioinfer;

BIOINFER_FUZZ_TARGET(safetensors) {
    const std::string path = write_temp(data, ".safetensors");
    attempt([&] {
        const auto f = io::SafetensorsFile::open(path);
        for (const auto& [name, info] : f->tensors()) io::first_nonfinite(f->get(name));
    });
}
