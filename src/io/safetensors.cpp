// safetensors: 8-byte little-endian header length, a JSON header, then the raw tensor bytes.
#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "bioinfer/error.h"
#include "io/atomic_file.h"

namespace bioinfer::io {

using nlohmann::json;

SafetensorsFile::~SafetensorsFile() = default;

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY);
    BI_CHECK(fd >= 0, path, "cannot open weights file: ", std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) != 0) {
        ::close(fd);
        fail(path, "cannot stat weights file");
    }
    const size_t size = size_t(st.st_size);
    if (size < 8) {
        ::close(fd);
        fail(path, cat("not a safetensors file: ", size, " bytes, expected at least 8"));
    }
    void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    BI_CHECK(p != MAP_FAILED, path, "mmap failed: ", std::strerror(errno));
    auto f = std::shared_ptr<SafetensorsFile>(new SafetensorsFile());
    f->path_ = path;
    f->map_ = std::shared_ptr<const void>(p, [size](const void* q) { munmap(const_cast<void*>(q), size); });
    const char* base = static_cast<const char*>(p);

    uint64_t hlen = 0;
    std::memcpy(&hlen, base, 8);  // little-endian on every supported host
    BI_CHECK(hlen <= size - 8 && hlen <= (uint64_t(100) << 20), path, "header length ", hlen,
             " does not fit in a file of ", size, " bytes (truncated or not safetensors)");
    json header;
    try {
        header = json::parse(base + 8, base + 8 + hlen);
    } catch (const std::exception& e) {
        fail(path, cat("header is not valid JSON: ", e.what()));
    }
    BI_CHECK(header.is_object(), path, "header is not a JSON object");
    f->data_ = base + 8 + hlen;
    const size_t data_size = size - 8 - hlen;

    std::vector<std::pair<size_t, size_t>> ranges;
    for (auto& [name, v] : header.items()) {
        if (name == "__metadata__") continue;
        const std::string where = path + ": tensor '" + name + "'";
        BI_CHECK(v.is_object() && v.contains("dtype") && v.contains("shape") &&
                     v.contains("data_offsets"),
                 where, "entry needs dtype, shape and data_offsets");
        TensorInfo ti;
        const std::string dt = v["dtype"].is_string() ? v["dtype"].get<std::string>() : "?";
        // Integer and fp64 buffers (e.g. ESMFold's af2_to_esm index table) are checked for size
        // and skipped: the engine reads only float weights and derives such tables itself.
        static const std::map<std::string, size_t> kOther{
            {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"I16", 2}, {"U16", 2}, {"I32", 4},
            {"U32", 4}, {"I64", 8}, {"U64", 8}, {"F64", 8}};
        size_t elem = 0;
        if (dt == "F32") ti.dtype = DType::F32;
        else if (dt == "BF16") ti.dtype = DType::BF16;
        else if (dt == "F16") ti.dtype = DType::F16;
        else if (kOther.count(dt)) elem = kOther.at(dt);
        else fail(where, cat("unsupported dtype ", dt, ": expected F32, BF16 or F16"));
        BI_CHECK(v["shape"].is_array(), where, "shape is not an array");
        for (auto& d : v["shape"]) {
            BI_CHECK(d.is_number_unsigned(), where, "shape entries must be non-negative integers");
            ti.shape.push_back(d.get<int64_t>());
        }
        auto& off = v["data_offsets"];
        BI_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
                     off[1].is_number_unsigned(),
                 where, "data_offsets must be two non-negative integers");
        ti.begin = off[0].get<size_t>();
        ti.end = off[1].get<size_t>();
        BI_CHECK(ti.begin <= ti.end && ti.end <= data_size, where, "data_offsets [", ti.begin,
                 ", ", ti.end, ") outside the data section of ", data_size,
                 " bytes (truncated file?)");
        const size_t want = size_t(shape_numel(ti.shape)) * (elem ? elem : dtype_size(ti.dtype));
        BI_CHECK(ti.end - ti.begin == want, where, "holds ", ti.end - ti.begin,
                 " bytes, but shape ", shape_str(ti.shape), " of ", dt, " needs ", want);
        ranges.emplace_back(ti.begin, ti.end);
        if (elem)
            f->skipped_.emplace(name, dt);
        else
            f->tensors_.emplace(name, std::move(ti));
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
        BI_CHECK(ranges[i].first >= ranges[i - 1].second, path, "tensor data ranges overlap at byte ",
                 ranges[i].first);
    return f;
}

Tensor SafetensorsFile::get(const std::string& name) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end() && skipped_.count(name))
        fail(path_, cat("tensor '", name, "' is ", skipped_.at(name),
                        ": only F32, BF16 and F16 tensors are read"));
    BI_CHECK(it != tensors_.end(), path_, "no tensor named '", name, "'");
    return Tensor::view_of(data_ + it->second.begin, it->second.shape, it->second.dtype, map_);
}

void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors) {
    json header = json::object();
    size_t off = 0;
    for (auto& [name, t] : tensors) {
        const size_t n = size_t(t.numel()) * dtype_size(t.dtype());
        header[name] = {{"dtype", dtype_name(t.dtype())},
                        {"shape", t.shape()},
                        {"data_offsets", {off, off + n}}};
        off += n;
    }
    std::string h = header.dump();
    while ((8 + h.size()) % 8) h += ' ';
    std::string bytes(8, '\0');
    const uint64_t hl = h.size();
    std::memcpy(bytes.data(), &hl, 8);
    bytes += h;
    for (auto& [name, t] : tensors)
        bytes.append(static_cast<const char*>(t.raw()), size_t(t.numel()) * dtype_size(t.dtype()));
    write_file_atomic(path, bytes);
}

void release_pages_hint(const void* p, size_t bytes) {
#ifdef MADV_PAGEOUT
    const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (uintptr_t(p) + page - 1) / page * page;
    const uintptr_t end = (uintptr_t(p) + bytes) / page * page;
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
#else
    (void)p;
    (void)bytes;
#endif
}

}  // namespace bioinfer::io
