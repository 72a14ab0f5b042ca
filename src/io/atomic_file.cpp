// Temporary names are hidden dot-files next to the target, so the rename stays on one filesystem.
#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bioinfer/error.h"
#include "io/limits.h"

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

void check_regular_file(const std::string& path, int64_t max_bytes, const std::string& raise_with) {
    struct stat st {};
    BI_CHECK(::stat(path.c_str(), &st) == 0, path, "cannot open: ", std::strerror(errno));
    BI_CHECK(!S_ISDIR(st.st_mode), path, "is a folder, not a file");
    BI_CHECK(S_ISREG(st.st_mode), path,
             S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "is a device"
             : S_ISFIFO(st.st_mode)                     ? "is a pipe"
                                                        : "is a socket",
             ", not a file");
    BI_CHECK(int64_t(st.st_size) <= max_bytes, path, "is ", size_text(int64_t(st.st_size)),
             "; files read whole are limited to ", size_text(max_bytes),
             raise_with.empty() ? std::string() : " (" + raise_with + " raises it)");
}

std::string read_file(const std::string& path, int64_t max_bytes, const std::string& raise_with) {
    // Opened first, then asked what it is (no race with a rename in between): a regular file or
    // a pipe is read; a device such as /dev/zero or a terminal never ends, and is refused.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    BI_CHECK(fd >= 0, path, "cannot open: ", std::strerror(errno));
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    BI_CHECK(::fstat(fd, &st) == 0, path, "cannot read: ", std::strerror(errno));
    BI_CHECK(!S_ISDIR(st.st_mode), path, "is a folder, not a file");
    BI_CHECK(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode), path,
             S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "is a device" : "is a socket",
             ", not a file: inputs are read from files or pipes");
    const std::string limit =
        cat("; files read whole are limited to ", size_text(max_bytes),
            raise_with.empty() ? std::string() : " (" + raise_with + " raises it)");
    if (S_ISREG(st.st_mode))
        BI_CHECK(int64_t(st.st_size) <= max_bytes, path, "is ", size_text(int64_t(st.st_size)),
                 limit);
    // blocking reads from here on (O_NONBLOCK only kept open() of a FIFO from waiting)
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    std::string out;
    if (S_ISREG(st.st_mode)) out.reserve(size_t(st.st_size));
    char buf[1 << 16];
    while (true) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        BI_CHECK(n >= 0, path, "read failed: ", std::strerror(errno));
        if (n == 0) break;
        BI_CHECK(int64_t(out.size()) + n <= max_bytes, path, "holds more than ",
                 size_text(max_bytes), limit);
        out.append(buf, size_t(n));
    }
    return out;
}

}  // namespace bioinfer::io
