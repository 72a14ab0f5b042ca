// A tar archive as bioinfer unpacks Boltz-2's molecule archive (mols.tar from the hub): every
// entry must land inside the destination, whatever names, pax records or links it holds.
#include <filesystem>
#include <fstream>

#include "fuzz_target.h"
#include "runtime/boltz_cache.h"

using namespace bioinfer;
namespace fs = std::filesystem;

BIOINFER_FUZZ_TARGET(tar) {
    // box/archive.tar, unpacked into box/a/b/dest: an entry that climbs out of dest by up to
    // three levels lands in the box, where it is seen
    const fs::path box = temp_dir("tar");
    const fs::path tar = box / "archive.tar", dest = box / "a" / "b" / "dest";
    fs::create_directories(dest);
    std::ofstream(tar, std::ios::binary).write(data.data(), std::streamsize(data.size()));
    attempt([&] { runtime::extract_tar(tar.string(), dest.string()); });
    for (const auto& e : fs::recursive_directory_iterator(box)) {
        const fs::path& p = e.path();
        if (e.is_symlink()) finding_here("a link was created: " + p.string());
        const bool ours = p == tar || p == box / "a" || p == box / "a" / "b" || p == dest;
        const auto rel = p.lexically_relative(dest);
        if (!ours && (rel.empty() || *rel.begin() == ".."))
            finding_here("an entry was written outside the destination: " + p.string());
    }
}
