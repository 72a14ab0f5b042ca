// One finished shard as merge reads it: results.json, manifest.json and one record's npz
// (p1.npz), the input's parts separated by a line "--8<--".
#include <filesystem>
#include <fstream>

#include "fuzz_target.h"
#include "runtime/merge.h"

using namespace bioinfer;

BIOINFER_FUZZ_TARGET(merge) {
    const auto parts = split_parts(data, "\n--8<--\n", 3);
    const std::string dir = temp_dir("shard-0-of-1");
    const char* names[] = {"results.json", "manifest.json", "p1.npz"};
    for (size_t i = 0; i < parts.size(); ++i) {
        std::ofstream f(std::filesystem::path(dir) / names[i], std::ios::binary);
        f.write(parts[i].data(), std::streamsize(parts[i].size()));
    }
    const std::string out = temp_dir("merged");
    std::filesystem::remove(out);
    attempt([&] { runtime::merge_outputs({dir}, out, ""); });
}
