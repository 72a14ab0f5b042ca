// Temporary names are hidden dot-files next to the target, so the rename stays on one filesystem.
#include "io/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bioinfer/error.h"

namespace bioinfer::io {

AtomicFile::AtomicFile(std::string final_path) : final_(std::move(final_path)) {
    std::filesystem::path p(final_);
    std::string name = ".";
    name += p.filename().string();
    name += ".tmp.";
    name += std::to_string(getpid());
    tmp_ = (p.parent_path() / name).string();
}

AtomicFile::~AtomicFile() {
    if (!done_) std::remove(tmp_.c_str());
}

void AtomicFile::commit() {
    if (std::rename(tmp_.c_str(), final_.c_str()) != 0)
        fail(final_, cat("cannot rename temporary file into place: ", std::strerror(errno)));
    done_ = true;
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
    AtomicFile f(path);
    {
        std::ofstream out(f.tmp_path(), std::ios::binary | std::ios::trunc);
        BI_CHECK(out, path, "cannot open for writing: ", std::strerror(errno));
        out.write(bytes.data(), std::streamsize(bytes.size()));
        out.flush();
        BI_CHECK(out, path, "write failed: ", std::strerror(errno));
    }
    f.commit();
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    BI_CHECK(in, path, "cannot open: ", std::strerror(errno));
    std::ostringstream ss;
    ss << in.rdbuf();
    BI_CHECK(!in.bad(), path, "read failed");
    return ss.str();
}

}  // namespace bioinfer::io
