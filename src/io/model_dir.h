// A model directory: a Hugging Face one (config.json plus model.safetensors, shards listed in
// model.safetensors.index.json, or a pickled pytorch_model.bin), or a torch checkpoint without
// config (a .pth file, or a folder holding one, as EvolutionaryScale's repositories do under
// data/weights/). Tensors are looked up by the checkpoint's own names.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "bioinfer/tensor.h"
#include "bioinfer/error.h"
#include "io/safetensors.h"
#include "io/torch_checkpoint.h"

namespace bioinfer::io {

// A glob over tensor names: '*' matches any run of characters (dots included), every other
// character itself. "esm.encoder.layer.*.attention.self.rotary_embeddings.inv_freq"
bool name_matches(const std::string& pattern, const std::string& name);

// The names a model load has read, shared by the loading threads (a copy carries its own record).
class ConsumedNames {
public:
    ConsumedNames() = default;
    ConsumedNames(const ConsumedNames& o) : names_(o.snapshot()) {}
    ConsumedNames& operator=(const ConsumedNames& o);
    void add(const std::string& name) const;
    std::set<std::string> snapshot() const;

private:
    mutable std::mutex mu_;
    mutable std::set<std::string> names_;
};

// Weights holding NaN or Inf are refused when a model reads them (ModelDir::get*), the error
// naming the tensor and where; allow_nonfinite(true) (--allow-nonfinite) loads them anyway.
void set_allow_nonfinite(bool allow);
bool allow_nonfinite();
// The flat index of the first NaN or Inf of a floating-point tensor (F32, BF16, F16), or -1
// (also for integer tensors). Over the OpenMP threads.
int64_t first_nonfinite(const Tensor& t);

class ModelDir {
public:
    static ModelDir open(const std::string& dir);
    // A model held in memory (tests and benchmarks at real shapes without writing a checkpoint):
    // `name` stands for the directory in errors; an empty config acts as a bare torch checkpoint.
    static ModelDir from_tensors(const std::string& name, nlohmann::json config,
                                 std::map<std::string, Tensor> tensors);

    const std::string& dir() const { return dir_; }
    // Whether get* loads tensors holding NaN or Inf: the process default (allow_nonfinite()) unless
    // a caller with its own setting (Python's load(allow_nonfinite=...)) sets it here.
    void set_allow_nonfinite(bool allow) { allow_nonfinite_ = allow; }
    // config.json, or an empty object for a bare torch checkpoint.
    const nlohmann::json& config() const { return config_; }
    bool has_config() const { return !config_.empty(); }
    // The file that held the weights when they came from a torch checkpoint, else empty.
    const std::string& torch_file() const { return torch_file_; }
    bool has(const std::string& name) const { return where_.count(name) > 0 || pickled_.count(name) > 0; }
    std::vector<std::string> names() const;
    // fp32 tensor (zero-copy when stored as F32); a missing name or a shape other than
    // `expected` is an error naming the key, the expected and the actual shape.
    Tensor get_f32(const std::string& name, const Shape& expected) const;
    Tensor get_raw(const std::string& name) const;
    // The stored tensor in its own dtype (zero-copy), shape-checked like get_f32. All three
    // refuse a tensor holding NaN or Inf unless set_allow_nonfinite(true) (or, when not
    // set, the process default allow_nonfinite()).
    Tensor get(const std::string& name, const Shape& expected) const;

    // Load accounting. get, get_f32 and get_raw record the name they hand out (has() does not).
    // Every tensor the checkpoint holds and no get has read yet, sorted; this includes the
    // integer buffers a safetensors file holds, which are never read.
    std::vector<std::string> unconsumed() const;
    // The finish step of a model load: the tensors not read must all match one of `ignorable`
    // (glob patterns of names upstream stores and the engine does not need); those are returned
    // (for logs and tests). Any other is an error naming the first few, their count, the
    // checkpoint and `model` (the loader): a renamed or extra tensor never passes silently.
    std::vector<std::string> check_consumed(const std::vector<std::string>& ignorable,
                                            const std::string& model) const;

private:
    std::string dir_;
    nlohmann::json config_;
    std::vector<std::shared_ptr<SafetensorsFile>> files_;
    std::map<std::string, size_t> where_;  // tensor name -> index into files_
    std::string torch_file_;
    // tensors of a torch checkpoint (views of its mapping), or given by from_tensors
    std::map<std::string, Tensor> pickled_;
    std::set<std::string> unread_;  // non-float tensors of the safetensors files (never read)
    ConsumedNames consumed_;
    std::optional<bool> allow_nonfinite_;
    Tensor lookup(const std::string& name) const;
};

// A hyper-parameter's value as T, checked: `what` names it in errors ("config.json key 'x'").
// An integer T takes only a JSON integer within 2^24: no size, count or id of any model comes
// near, so a larger one is damage and would end in an allocation or an overflow of the file's own
// making (and converting a huge float is undefined).
template <typename T>
T config_value(const nlohmann::json& v, const std::string& what, const std::string& where) {
    constexpr bool integral = std::is_integral_v<T> && !std::is_same_v<T, bool>;
    if constexpr (integral)
        if (!v.is_number_integer()) throw Error(where, what + " is not an integer: " + v.dump());
    T out{};
    try {
        out = v.get<T>();
    } catch (const std::exception&) {
        throw Error(where, what + " has the wrong type: " + v.dump());
    }
    if constexpr (integral)
        if (out > T(1 << 24) || (std::is_signed_v<T> && out < -T(1 << 24)))
            throw Error(where, what + " is out of range: " + v.dump());
    return out;
}

// Typed config access with an error naming the file and key when missing or mistyped.
template <typename T>
T config_get(const nlohmann::json& cfg, const std::string& key, const std::string& where) {
    auto it = cfg.find(key);
    if (it == cfg.end() || it->is_null())
        throw Error(where, "config.json lacks required key '" + key + "'");
    return config_value<T>(*it, "config.json key '" + key + "'", where);
}

template <typename T>
T config_get_or(const nlohmann::json& cfg, const std::string& key, T dflt,
                const std::string& where) {
    auto it = cfg.find(key);
    if (it == cfg.end() || it->is_null()) return dflt;
    return config_get<T>(cfg, key, where);
}

}  // namespace bioinfer::io
