// The kernels' default variants and parameters, and the resolution of a table choice against them.
#include "backend/tuning/defaults.h"

#include <atomic>

#include "bioinfer/error.h"

namespace bioinfer::tuning {

namespace {

struct VariantDefaults {
    const char* op;
    Choice choice;    // the variant and the parameters it runs with when the table gives none
    bool is_default;  // the op's default variant (one per op)
};

const std::vector<VariantDefaults>& table() {
    static const std::vector<VariantDefaults> t = [] {
        std::vector<VariantDefaults> v{
            // GEMM: oneDNN on weights packed at load; the own register-tiled GEMM when the
            // table names it, with this blocking where the entry gives none.
            {"matmul", {"onednn_packed", {}}, true},
            {"matmul",
             {"own_packed", {{"m_block", 96}, {"n_block", 256}, {"k_block", 256}}},
             false},
            // The same choice for a weight packed under ops::LinearRowsScope (a fold's, run at
            // one protein's residues), timed at those rows.
            {"matmul_fold", {"onednn_packed", {}}, true},
            {"matmul_fold",
             {"own_packed", {{"m_block", 96}, {"n_block", 256}, {"k_block", 256}}},
             false},
            // A linear's activation as a oneDNN post-op (or "separate": one pass after the GEMM).
            {"matmul_act", {"fused", {}}, true},
            // Flash-style tiles of q_block queries by k_block keys (or "materialised").
            {"attention", {"tiled", {{"q_block", 64}, {"k_block", 128}}}, true},
            // Max, exp-sum, scale over each row (or "online").
            {"softmax", {"three_pass", {}}, true},
            // Mean, then variance of the centred row, rows over the threads (or "one_pass").
            {"layer_norm", {"two_pass", {{"parallel", 1}}}, true},
            // The triangle ops and the pair MLP: 0 is the memory-bounded automatic row chunk.
            {"trimul", {"chunked", {{"chunk", 0}}}, true},
            {"triatt", {"chunked", {{"chunk", 0}}}, true},
            {"pair_mlp", {"chunked", {{"chunk", 0}}}, true},
        };
        // Elementwise ops and rotary: SIMD over all threads (parallel = 0: the calling thread).
        for (const char* op : {"rotary", "gelu", "gelu_tanh", "swiglu", "relu", "sigmoid", "mul"})
            v.push_back({op, {"simd", {{"parallel", 1}}}, true});
        return v;
    }();
    return t;
}

const VariantDefaults* find(const std::string& op, const std::string* variant) {
    for (const VariantDefaults& d : table())
        if (d.op == op && (variant ? d.choice.variant == *variant : d.is_default)) return &d;
    return nullptr;
}

std::atomic<ChoiceObserver> g_observer{nullptr};

}  // namespace

const Choice& default_choice(const std::string& op) {
    const VariantDefaults* d = find(op, nullptr);
    BI_CHECK(d != nullptr, "tuning", "op '", op,
             "' has no default choice: expected it in the kernels' defaults "
             "(backend/tuning/defaults.h)");
    return d->choice;
}

std::vector<std::string> default_ops() {
    std::vector<std::string> out;
    for (const VariantDefaults& d : table())
        if (d.is_default) out.push_back(d.op);
    return out;
}

Choice resolve(const std::string& op, Choice c) {
    if (c.variant.empty()) return default_choice(op);
    if (const VariantDefaults* own = find(op, &c.variant))
        c.params.insert(own->choice.params.begin(), own->choice.params.end());
    const Choice& d = default_choice(op);
    c.params.insert(d.params.begin(), d.params.end());  // insert keeps the choice's own values
    return c;
}

Choice choose(const char* kernels, const char* op, const char* dtype,
              std::initializer_list<Dim> shape) {
    Choice c = resolve(op, lookup(kernels, op, dtype, shape));
    if (ChoiceObserver f = g_observer.load(std::memory_order_acquire)) f(op, c);
    return c;
}

void set_choice_observer(ChoiceObserver f) {
    g_observer.store(f, std::memory_order_release);
}

}  // namespace bioinfer::tuning
