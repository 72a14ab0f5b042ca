// The backend registry: built-in CPU backends first, then whatever registers later.
#include "backend/registry.h"

#include <deque>
#include <mutex>

#include "backend/cpu/dispatch.h"
#include "backend/ref/ref_kernels.h"
#include "bioinfer/error.h"

namespace bioinfer::backend {
namespace {

struct Registry {
    std::mutex mu;
    std::deque<Backend> list;  // a deque keeps the addresses handed out stable
    const Backend* cpu = nullptr;
};

Registry& registry() {
    static Registry* r = [] {
        auto* reg = new Registry();  // leaked: workers may run past static destruction
        const auto add = [&](const kernels::KernelTable* t) {
            reg->list.push_back({t->name, kHost, t});
            return &reg->list.back();
        };
        const Backend* ref = add(&kernels::ref_kernels());
        const Backend* avx2 = kernels::cpu_runs_avx2() ? add(kernels::cpu_kernels_avx2()) : nullptr;
        const Backend* avx512 = kernels::cpu_runs_avx512() ? add(kernels::cpu_kernels_avx512()) : nullptr;
        const kernels::KernelTable& best = kernels::cpu_kernels();
        for (const Backend* b : {avx512, avx2, ref})
            if (b && b->kernels == &best) reg->cpu = b;
        return reg;
    }();
    return *r;
}

std::string known(const Registry& r) {
    std::string s = "cpu";
    for (const Backend& b : r.list) s += ", " + b.name;
    return s;
}

}  // namespace

void register_backend(const Backend& b) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    BI_CHECK(!b.name.empty() && b.kernels, "backend", "a backend needs a name and a kernel table");
    BI_CHECK(b.name != "cpu", "backend", "'cpu' is the alias of the best CPU backend");
    for (const Backend& e : r.list)
        BI_CHECK(e.name != b.name, "backend", "a backend named '", b.name, "' is registered already");
    r.list.push_back(b);
}

std::vector<const Backend*> backends() {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    std::vector<const Backend*> out;
    for (const Backend& b : r.list) out.push_back(&b);
    return out;
}

const Backend* find(const std::string& name) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    if (name == "cpu") return r.cpu;
    for (const Backend& b : r.list)
        if (b.name == name) return &b;
    return nullptr;
}

const Backend& get(const std::string& name) {
    const Backend* b = find(name);
    if (!b) {
        Registry& r = registry();
        std::lock_guard<std::mutex> lock(r.mu);
        fail("backend", cat("unknown backend '", name, "' (registered: ", known(r), ")"));
    }
    return *b;
}

const Backend& for_device(Device device) {
    if (device.is_host()) return get("cpu");
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (const Backend& b : r.list)
        if (b.device.type == device.type) return b;
    fail("backend", cat("no backend runs on ", device.str(), " in this build"));
}

}  // namespace bioinfer::backend
