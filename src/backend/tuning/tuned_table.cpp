#include "backend/tuning/tuned_table.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bioinfer/error.h"

namespace bioinfer::tuning {

extern const char* const kBuiltinTable;  // generated from src/backend/tuning/tuned_table.json

namespace {

std::map<std::string, int64_t> int_map(const nlohmann::json& j, const std::string& where) {
    std::map<std::string, int64_t> out;
    if (j.is_null()) return out;
    BI_CHECK(j.is_object(), where, "expected an object of integers, got ", j.dump());
    for (auto it = j.begin(); it != j.end(); ++it) {
        BI_CHECK(it.value().is_number_integer(), where, "'", it.key(),
                 "' must be an integer, got ", it.value().dump());
        out[it.key()] = it.value().get<int64_t>();
    }
    return out;
}

// Choices forced by live Force guards, innermost last.
struct Forced {
    std::atomic<bool> any{false};
    std::vector<std::pair<std::string, Choice>> stack;
};

Forced& forced() {
    static Forced f;
    return f;
}

double log_size(int64_t v) { return std::log(double(std::max<int64_t>(v, 0)) + 1.0); }

}  // namespace

Table parse_table(const std::string& text, const std::string& where) {
    nlohmann::json doc;
    try {
        doc = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        fail(where, cat("not valid JSON: ", e.what()));
    }
    BI_CHECK(doc.is_object() && doc.contains("entries") && doc["entries"].is_array(), where,
             "expected an object with an 'entries' array");
    Table t;
    t.origin = where;
    size_t i = 0;
    for (const auto& e : doc["entries"]) {
        const std::string at = where + ": entry " + std::to_string(i++);
        BI_CHECK(e.is_object(), at, "expected an object");
        for (const char* key : {"kernels", "op", "dtype", "variant"})
            BI_CHECK(e.contains(key) && e[key].is_string(), at, "'", key, "' must be a string");
        Entry en;
        en.kernels = e["kernels"].get<std::string>();
        en.op = e["op"].get<std::string>();
        en.dtype = e["dtype"].get<std::string>();
        en.shape = int_map(e.value("shape", nlohmann::json()), at + " shape");
        en.choice.variant = e["variant"].get<std::string>();
        BI_CHECK(!en.choice.variant.empty(), at, "'variant' is empty");
        en.choice.params = int_map(e.value("params", nlohmann::json()), at + " params");
        t.entries.push_back(std::move(en));
    }
    return t;
}

namespace {

Table load() {
    const char* env = std::getenv("BIOINFER_TUNED_TABLE");
    if (!env || !*env) return parse_table(kBuiltinTable, "built-in tuned table");
    return load_table(env);
}

}  // namespace

Table load_table(const std::string& spec) {
    if (spec == "none") return Table{{}, "none (every kernel's default)"};
    std::ifstream f(spec);
    BI_CHECK(f.good(), "tuned table", "cannot read '", spec, "'");
    std::stringstream ss;
    ss << f.rdbuf();
    return parse_table(ss.str(), spec);
}

const Table& active_table() {
    static const Table t = load();
    return t;
}

void load_active_table() { (void)active_table(); }

int64_t Choice::param(const std::string& key) const {
    auto it = params.find(key);
    BI_CHECK(it != params.end(), "tuning", "variant '", variant, "' has no parameter '", key,
             "': expected a choice resolved against the kernel defaults");
    return it->second;
}

bool is_exact_dim(std::string_view op, std::string_view name) {
    return name == "causal" || name == "act" ||
           ((op == "matmul" || op == "matmul_fold") && (name == "k" || name == "n"));
}

Choice lookup_in(const Table& t, const std::string& kernels, const std::string& op,
                 const std::string& dtype, std::span<const Dim> shape) {
    const Entry* best = nullptr;
    double best_d = std::numeric_limits<double>::infinity();
    for (const Entry& e : t.entries) {
        if (e.op != op || e.dtype != dtype || e.kernels != kernels) continue;
        double d = 0;
        bool ok = true;
        for (const Dim& s : shape) {
            const bool flag = is_exact_dim(op, s.name);
            auto it = e.shape.find(s.name);
            if (it == e.shape.end()) {
                ok = !flag;
                d += 1.0;  // an entry silent on a dimension is a weaker match
            } else if (flag) {
                ok = it->second == s.value;
            } else {
                d += std::fabs(log_size(it->second) - log_size(s.value));
            }
            if (!ok) break;
        }
        if (ok && d < best_d) {
            best_d = d;
            best = &e;
        }
    }
    return best ? best->choice : Choice{};
}

namespace {
std::atomic<const Table*> g_override{nullptr};
}

void set_table_override(const Table* t) { g_override.store(t, std::memory_order_release); }

Choice lookup(const char* kernels, const char* op, const char* dtype,
              std::initializer_list<Dim> shape) {
    Forced& f = forced();
    if (f.any.load(std::memory_order_acquire))
        for (auto it = f.stack.rbegin(); it != f.stack.rend(); ++it)
            if (it->first == op) return it->second;
    const Table* o = g_override.load(std::memory_order_acquire);
    return lookup_in(o ? *o : active_table(), kernels, op, dtype,
                     std::span<const Dim>(shape.begin(), shape.size()));
}

Force::Force(std::string op, Choice c) {
    Forced& f = forced();
    f.stack.emplace_back(std::move(op), std::move(c));
    f.any.store(true, std::memory_order_release);
}

Force::~Force() {
    Forced& f = forced();
    f.stack.pop_back();
    f.any.store(!f.stack.empty(), std::memory_order_release);
}

}  // namespace bioinfer::tuning
