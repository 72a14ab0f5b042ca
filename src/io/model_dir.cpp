// Model directory loading: config, single-file or sharded safetensors.
#include "io/model_dir.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <set>

#include "bioinfer/error.h"
#include "io/atomic_file.h"

namespace bioinfer::io {

namespace fs = std::filesystem;
using nlohmann::json;

static json parse_json_file(const std::string& path) {
    std::string text = read_file(path);
    try {
        return json::parse(text);
    } catch (const std::exception& e) {
        fail(path, cat("not valid JSON: ", e.what()));
    }
}

static bool is_torch_file(const fs::path& p) {
    const std::string e = p.extension().string();
    return e == ".pth" || e == ".pt" || e == ".bin" || e == ".ckpt";
}

// The single .pth/.pt/.ckpt in dir or dir/data/weights (EvolutionaryScale's repository layout).
// A boltz cache (~/.boltz) holds several Lightning checkpoints; its structure model,
// boltz2_conf.ckpt, is the one a folder names.
static std::string find_torch_checkpoint(const std::string& dir) {
    std::vector<std::string> found;
    if (fs::is_regular_file(fs::path(dir) / "boltz2_conf.ckpt"))
        return (fs::path(dir) / "boltz2_conf.ckpt").string();
    for (const fs::path& sub : {fs::path(dir), fs::path(dir) / "data" / "weights"}) {
        std::error_code ec;
        if (!fs::is_directory(sub, ec)) continue;
        for (auto& e : fs::directory_iterator(sub, ec)) {
            const std::string ext = e.path().extension().string();
            if (e.is_regular_file() && (ext == ".pth" || ext == ".pt" || ext == ".ckpt"))
                found.push_back(e.path().string());
        }
    }
    BI_CHECK(found.size() <= 1, dir, "holds ", found.size(), " torch checkpoints; point --weights at one");
    return found.empty() ? "" : found[0];
}

// Reads a torch checkpoint into m. A trainer (Lightning) checkpoint gives its `state_dict`
// (names without that prefix) and its `hyper_parameters` as the config.
static void read_torch_into(ModelDir& m, std::map<std::string, Tensor>& pickled, json& config,
                            const std::string& path) {
    TorchCheckpoint ck = read_torch_checkpoint_full(path);
    const bool trainer = ck.data.is_object() && ck.data.contains("state_dict") &&
                         ck.data["state_dict"].is_object();
    if (!trainer) {
        pickled = std::move(ck.tensors);
        return;
    }
    const std::string prefix = "state_dict.";
    for (auto& [name, t] : ck.tensors)
        if (name.rfind(prefix, 0) == 0) pickled[name.substr(prefix.size())] = t;
    BI_CHECK(!pickled.empty(), path, "trainer checkpoint with an empty state_dict");
    auto hp = ck.data.find("hyper_parameters");
    if (hp != ck.data.end() && hp->is_object()) config = *hp;
    (void)m;
}

ModelDir ModelDir::open(const std::string& dir) {
    ModelDir m;
    m.dir_ = dir;
    m.config_ = json::object();
    std::error_code ec;
    if (fs::is_regular_file(dir, ec) && is_torch_file(dir)) {
        m.torch_file_ = dir;
        read_torch_into(m, m.pickled_, m.config_, dir);
        return m;
    }
    BI_CHECK(fs::is_directory(dir), dir, "weights directory does not exist");
    const std::string cfg = (fs::path(dir) / "config.json").string();
    if (!fs::exists(cfg)) {
        const std::string pth = find_torch_checkpoint(dir);
        BI_CHECK(!pth.empty(), cfg, "missing: a model directory needs config.json (or a torch "
                                    "checkpoint such as data/weights/esmc_300m_2024_12_v0.pth)");
        m.torch_file_ = pth;
        read_torch_into(m, m.pickled_, m.config_, pth);
        return m;
    }
    m.config_ = parse_json_file(cfg);
    BI_CHECK(m.config_.is_object(), cfg, "config is not a JSON object");

    const fs::path single = fs::path(dir) / "model.safetensors";
    const fs::path index = fs::path(dir) / "model.safetensors.index.json";
    std::vector<std::string> shard_names;
    if (fs::exists(single)) {
        shard_names.push_back("model.safetensors");
    } else if (fs::exists(index)) {
        json idx = parse_json_file(index.string());
        BI_CHECK(idx.is_object() && idx.contains("weight_map") && idx["weight_map"].is_object(),
                 index.string(), "has no weight_map object");
        std::set<std::string> uniq;
        for (auto& [k, v] : idx["weight_map"].items()) {
            BI_CHECK(v.is_string(), index.string(), "weight_map entry '", k, "' is not a file name");
            const std::string s = v.get<std::string>();
            BI_CHECK(s.find('/') == std::string::npos && s.find("..") == std::string::npos,
                     index.string(), "shard name '", s, "' must be a plain file name");
            uniq.insert(s);
        }
        shard_names.assign(uniq.begin(), uniq.end());
    } else if (fs::exists(fs::path(dir) / "pytorch_model.bin")) {
        m.torch_file_ = (fs::path(dir) / "pytorch_model.bin").string();
        m.pickled_ = read_torch_checkpoint(m.torch_file_);
        return m;
    } else {
        fail(dir, "no model.safetensors or model.safetensors.index.json");
    }
    for (auto& s : shard_names) {
        auto f = SafetensorsFile::open((fs::path(dir) / s).string());
        const size_t idx = m.files_.size();
        for (auto& [name, info] : f->tensors()) {
            BI_CHECK(!m.where_.count(name), f->path(), "tensor '", name,
                     "' also appears in another shard");
            m.where_[name] = idx;
        }
        for (auto& [name, dtype] : f->skipped()) m.unread_.insert(name);
        m.files_.push_back(std::move(f));
    }
    return m;
}

ModelDir ModelDir::from_tensors(const std::string& name, json config,
                               std::map<std::string, Tensor> tensors) {
    ModelDir m;
    m.dir_ = name;
    m.config_ = config.is_null() ? json::object() : std::move(config);
    BI_CHECK(m.config_.is_object(), name, "config is not a JSON object");
    if (m.config_.empty()) m.torch_file_ = name;
    m.pickled_ = std::move(tensors);
    return m;
}

std::vector<std::string> ModelDir::names() const {
    std::vector<std::string> out;
    for (auto& [k, v] : where_) out.push_back(k);
    for (auto& [k, v] : pickled_) out.push_back(k);
    return out;
}

namespace {
std::atomic<bool> g_allow_nonfinite{false};
}  // namespace

void set_allow_nonfinite(bool allow) {
    g_allow_nonfinite = allow;
}

bool allow_nonfinite() {
    return g_allow_nonfinite;
}

int64_t first_nonfinite(const Tensor& t) {
    // exponent bits all set: Inf or NaN
    auto scan = [&](const auto* v, auto mask) -> int64_t {
        const int64_t n = t.numel(), chunk = int64_t(1) << 20;
        const int64_t chunks = (n + chunk - 1) / chunk;
        int64_t first = n;
#pragma omp parallel for schedule(static) reduction(min : first)
        for (int64_t c = 0; c < chunks; ++c) {
            const int64_t e = std::min(n, (c + 1) * chunk);
            bool bad = false;
            for (int64_t i = c * chunk; i < e; ++i) bad |= (v[i] & mask) == mask;
            if (!bad) continue;
            for (int64_t i = c * chunk; i < e; ++i)
                if ((v[i] & mask) == mask) {
                    first = std::min(first, i);
                    break;
                }
        }
        return first == n ? -1 : first;
    };
    if (!t.is_contiguous() &&
        (t.dtype() == DType::F32 || t.dtype() == DType::BF16 || t.dtype() == DType::F16))
        return first_nonfinite(t.to_f32());  // a strided view: scanned in its logical order
    switch (t.dtype()) {
        case DType::F32:
            return scan(static_cast<const uint32_t*>(t.raw()), uint32_t(0x7f800000u));
        case DType::BF16:
            return scan(static_cast<const uint16_t*>(t.raw()), uint16_t(0x7f80u));
        case DType::F16:
            return scan(static_cast<const uint16_t*>(t.raw()), uint16_t(0x7c00u));
        default:
            return -1;
    }
}

Tensor ModelDir::lookup(const std::string& name) const {
    Tensor t;
    if (auto p = pickled_.find(name); p != pickled_.end()) {
        t = p->second;
    } else {
        auto it = where_.find(name);
        BI_CHECK(it != where_.end(), dir_, "missing tensor '", name, "'");
        t = files_[it->second]->get(name);
    }
    if (!allow_nonfinite_.value_or(allow_nonfinite())) {
        const int64_t i = first_nonfinite(t);
        BI_CHECK(i < 0, dir_, "tensor '", name, "' holds a non-finite value (",
                 std::isnan(t.to_f32().f32()[i]) ? "NaN" : "Inf", ") at flat index ", i,
                 ": the checkpoint is damaged (--allow-nonfinite, or allow_nonfinite=True in Python, "
                 "loads it anyway)");
    }
    return t;
}

Tensor ModelDir::get_raw(const std::string& name) const {
    Tensor t = lookup(name);
    consumed_.add(name);
    return t;
}

Tensor ModelDir::get(const std::string& name, const Shape& expected) const {
    Tensor t = lookup(name);
    BI_CHECK(t.shape() == expected, dir_, "tensor '", name, "': expected shape ",
             shape_str(expected), ", got ", shape_str(t.shape()));
    consumed_.add(name);
    return t;
}

Tensor ModelDir::get_f32(const std::string& name, const Shape& expected) const {
    Tensor t = get(name, expected);
    return t.dtype() == DType::F32 ? t : t.to_f32();
}

bool name_matches(const std::string& pattern, const std::string& name) {
    // Iterative glob with backtracking to the last '*': linear in practice for these short names.
    size_t p = 0, n = 0, star = std::string::npos, mark = 0;
    while (n < name.size()) {
        if (p < pattern.size() && pattern[p] == '*') {
            star = p++;
            mark = n;
        } else if (p < pattern.size() && pattern[p] == name[n]) {
            ++p;
            ++n;
        } else if (star != std::string::npos) {
            p = star + 1;
            n = ++mark;
        } else {
            return false;
        }
    }
    while (p < pattern.size() && pattern[p] == '*') ++p;
    return p == pattern.size();
}

ConsumedNames& ConsumedNames::operator=(const ConsumedNames& o) {
    if (this != &o) {
        std::set<std::string> s = o.snapshot();
        std::lock_guard<std::mutex> lock(mu_);
        names_ = std::move(s);
    }
    return *this;
}

void ConsumedNames::add(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mu_);
    names_.insert(name);
}

std::set<std::string> ConsumedNames::snapshot() const {
    std::lock_guard<std::mutex> lock(mu_);
    return names_;
}

std::vector<std::string> ModelDir::unconsumed() const {
    const std::set<std::string> used = consumed_.snapshot();
    std::set<std::string> out;
    for (auto& [k, v] : where_)
        if (!used.count(k)) out.insert(k);
    for (auto& [k, v] : pickled_)
        if (!used.count(k)) out.insert(k);
    for (auto& k : unread_) out.insert(k);
    return {out.begin(), out.end()};
}

std::vector<std::string> ModelDir::check_consumed(const std::vector<std::string>& ignorable,
                                                  const std::string& model) const {
    std::vector<std::string> ignored, unexpected;
    for (const std::string& name : unconsumed()) {
        const bool known = std::any_of(ignorable.begin(), ignorable.end(),
                                       [&](const std::string& p) { return name_matches(p, name); });
        (known ? ignored : unexpected).push_back(name);
    }
    if (!unexpected.empty()) {
        constexpr size_t kShown = 8;
        std::string list;
        for (size_t i = 0; i < unexpected.size() && i < kShown; ++i)
            list += cat(i ? ", " : "", "'", unexpected[i], "'");
        if (unexpected.size() > kShown) list += cat(" and ", unexpected.size() - kShown, " more");
        fail(torch_file_.empty() ? dir_ : torch_file_,
             cat(unexpected.size() == 1 ? "tensor " : cat(unexpected.size(), " tensors "), list,
                 unexpected.size() == 1 ? " is" : " are", " not used by the ", model,
                 " loader: expected every checkpoint tensor to be read or known as ignorable "
                 "(renamed, extra, or a layout this loader does not read)"));
    }
    return ignored;
}

}  // namespace bioinfer::io
