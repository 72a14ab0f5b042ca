// The op sweep's engine: plans cases, runs and times variants, admits them against references,
// picks the winner per tuned-table decision, writes results, reports, and updates a table file.
#include "sweep/sweep.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "backend/cpu/linear_dnnl.h"
#include "bioinfer/error.h"
#include "core/threads.h"
#include "io/atomic_file.h"
#include "ops/ops.h"
#include "sweep/gemm_timing.h"
#include "sweep/machine.h"

namespace bioinfer::tuning::sweep {

using nlohmann::json;

namespace {

constexpr double kAdmitPcc = 0.999;
constexpr double kMaxErrorVsDefault = 4.0;
// A variant replaces the default only when it is this much faster by its minimum time, and
// faster by its mean too: smaller gaps are within the run-to-run noise of a shared machine and
// would make the table flip between sweeps.
constexpr double kMinGain = 1.05;

json dims_json(const Dims& d) {
    json j = json::object();
    for (const auto& [k, v] : d) j[k] = v;
    return j;
}

// A results file's lookup shape as the kernels would pass it (the Dims point into `names`).
struct LookupShape {
    std::vector<std::string> names;
    std::vector<Dim> dims;
    explicit LookupShape(const json& shape) {
        for (auto it = shape.begin(); it != shape.end(); ++it) names.push_back(it.key());
        size_t i = 0;
        for (auto it = shape.begin(); it != shape.end(); ++it, ++i)
            dims.push_back({names[i].c_str(), it.value().get<int64_t>()});
    }
};

// ---- running ----------------------------------------------------------------------------

struct Plan {
    const OpSweep* op;
    Shape shape;
    std::string dtype;
    std::vector<Variant> variants;
};

std::vector<Plan> plan(const OpSweep& op, const std::vector<std::string>& sets,
                       const std::vector<std::string>& dtypes) {
    std::vector<Plan> out;
    for (const std::string& set : sets)
        for (const Shape& s : op.shapes(set))
            for (const std::string& dt : dtypes) {
                auto vs = op.variants(s.dims, dt);
                if (!vs.empty()) out.push_back({&op, s, dt, std::move(vs)});
            }
    return out;
}

json variant_json(const Variant& v) {
    return {{"variant", v.name}, {"params", v.params}, {"table_op", v.table_op}, {"selectable", v.selectable}};
}

struct Timing {
    int iters, reps;
};

json run_case(const Plan& p, const Timing& t, const json& peaks, json& errors) {
    json rows = json::array();
    std::unique_ptr<Case> c;
    std::string setup_error;
    try {
        c = p.op->make(p.shape.dims, p.dtype);
    } catch (const std::exception& e) {
        setup_error = e.what();
    }
    const double work = p.op->work(p.shape.dims);
    for (const Variant& v : p.variants) {
        json row = {{"op", v.table_op},
                    {"sweep", p.op->name},
                    {"set", p.shape.set},
                    {"shape", dims_json(p.shape.dims)},
                    {"label", p.shape.label},
                    {"table_shape", dims_json(p.op->table_shape(p.shape.dims, v.table_op))},
                    {"dtype", p.dtype},
                    {"variant", v.name},
                    {"params", v.params},
                    {"selectable", v.selectable}};
        try {
            BI_CHECK(c != nullptr, "setup", setup_error);
            // Forced even when the table may not select it (one-pass layer norm): the kernel runs
            // it only when asked; the references (ref, onednn_plain) take their own path anyway.
            Force force(v.table_op, Choice{v.name, v.params});
            auto call = c->prepare(v);
            call();  // the checked call, and the warm-up
            const Agreement a = c->check();
            std::vector<double> us;
            for (int r = 0; r < t.reps; ++r) {
                const auto t0 = std::chrono::steady_clock::now();
                for (int i = 0; i < t.iters; ++i) call();
                const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                us.push_back(s / t.iters * 1e6);
            }
            const double mn = *std::min_element(us.begin(), us.end());
            double mean = 0;
            for (double u : us) mean += u / double(us.size());
            row["status"] = "ok";
            row["us"] = {{"min", mn}, {"mean", mean}, {"reps", us}};
            const bool admitted = std::isfinite(a.pcc) && a.pcc >= kAdmitPcc;
            row["pcc"] = std::isfinite(a.pcc) ? json(a.pcc) : json(nullptr);
            row["max_abs"] = std::isfinite(a.max_abs) ? json(a.max_abs) : json(nullptr);
            row["rel_l2"] = std::isfinite(a.rel_l2) ? json(a.rel_l2) : json(nullptr);
            row["admitted"] = admitted;
            if (p.op->compute_bound) {
                const double gf = work / mn * 1e-3;
                row["gflops"] = gf;
                const json& pk = peaks.value("gemm_gflops", json::object());
                if (pk.contains(p.dtype)) row["peak_fraction"] = gf / pk[p.dtype].get<double>();
            } else {
                const double gb = work / mn * 1e-3;
                row["gbps"] = gb;
                if (peaks.contains("memory_gbps")) row["peak_fraction"] = gb / peaks["memory_gbps"].get<double>();
            }
        } catch (const std::exception& e) {
            row["status"] = "error";
            row["admitted"] = false;
            row["error"] = e.what();
            errors.push_back(cat(p.op->name, " ", p.shape.label, " ", p.dtype, " ",
                                 variant_key(v.name, v.params), ": ", e.what()));
        }
        rows.push_back(row);
    }
    // fp32 variants must also keep the fp32 path's accuracy: no more than kMaxErrorVsDefault
    // times the default kernel's max-abs error at this shape (PCC alone admits a variant whose
    // error, compounded over a model's layers, breaks the fp32 parity bar).
    if (p.dtype == "fp32")
        for (json& row : rows) {
            if (row["status"] != "ok" || !row["admitted"].get<bool>()) continue;
            const Variant dv = default_variant(row["op"]);
            for (const json& d : rows)
                if (d["op"] == row["op"] && d["variant"] == dv.name && d["params"] == json(dv.params) &&
                    d["status"] == "ok" && !d["max_abs"].is_null()) {
                    const double bound = kMaxErrorVsDefault * d["max_abs"].get<double>();
                    if (!row["max_abs"].is_null() && row["max_abs"].get<double>() > bound) {
                        row["admitted"] = false;
                        row["not_admitted"] = cat("max-abs ", row["max_abs"].get<double>(), " > ",
                                                  kMaxErrorVsDefault, " x the default's ",
                                                  d["max_abs"].get<double>());
                    }
                }
        }
    return rows;
}

// ---- stages (winners) -------------------------------------------------------------------

json variant_ref(const std::string& name, const json& params, double us) {
    return {{"variant", name}, {"params", params}, {"us", us}};
}

json read_json(const std::string& path) {
    std::ifstream f(path);
    BI_CHECK(f.good(), path, "cannot read");
    try {
        return json::parse(f);
    } catch (const json::exception& e) {
        fail(path, cat("not valid JSON: ", e.what()));
    }
}

void check_results(const json& doc, const std::string& path) {
    BI_CHECK(doc.is_object() && doc.value("bench", "") == "bioinfer bench sweep", path,
             "not a sweep results file (no \"bench\": \"bioinfer bench sweep\")");
    BI_CHECK(doc.value("schema_version", 0) == kSchemaVersion, path, "schema version ",
             doc.value("schema_version", 0), ", this build reads ", kSchemaVersion);
    BI_CHECK(doc.contains("rows") && doc["rows"].is_array() && doc.contains("machine"), path,
             "missing rows or machine");
}

std::string fmt_us(double us) {
    char b[32];
    std::snprintf(b, sizeof b, us >= 1000 ? "%.0f us" : "%.1f us", us);
    return b;
}

// printf into a string.
[[gnu::format(printf, 2, 3)]] void appendf(std::string& out, const char* fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    const int n = std::vsnprintf(nullptr, 0, fmt, ap);
    va_end(ap);
    if (n > 0) {
        std::string buf(size_t(n) + 1, '\0');
        std::vsnprintf(buf.data(), buf.size(), fmt, ap2);
        out.append(buf.data(), size_t(n));
    }
    va_end(ap2);
}

}  // namespace

// Groups rows by the table decision they inform (table op, dtype, lookup shape); a variant's
// total is its summed minimum time over every shape of the group, counted only when it ran and
// was admitted at all of them. The winner is the fastest admitted variant the engine can select.
json stages_from_rows(const json& rows) {
    struct Group {
        std::string op, dtype;
        json table_shape;
        std::vector<std::string> labels;
        std::map<std::string, std::pair<double, int>> totals;  // key -> (sum us, shapes)
        std::map<std::string, double> means;                    // key -> sum of mean us
        std::map<std::string, std::pair<std::string, json>> names;  // key -> (variant, params)
        std::set<std::string> selectable;
        json rejected = json::array();
    };
    std::map<std::string, Group> groups;
    std::vector<std::string> order;
    for (const json& r : rows) {
        const std::string gk = r["op"].get<std::string>() + "|" + r["dtype"].get<std::string>() +
                               "|" + r["table_shape"].dump();
        if (!groups.count(gk)) order.push_back(gk);
        Group& g = groups[gk];
        g.op = r["op"];
        g.dtype = r["dtype"];
        g.table_shape = r["table_shape"];
        const std::string label = r["label"];
        if (std::find(g.labels.begin(), g.labels.end(), label) == g.labels.end()) g.labels.push_back(label);
        const std::string key = variant_key(r["variant"], r["params"].get<std::map<std::string, int64_t>>());
        g.names[key] = {r["variant"], r["params"]};
        if (r.value("selectable", true)) g.selectable.insert(key);
        auto& tot = g.totals[key];
        if (r["status"] == "ok" && r["admitted"].get<bool>()) {
            tot.first += r["us"]["min"].get<double>();
            tot.second += 1;
            g.means[key] += r["us"]["mean"].get<double>();
        } else {
            g.rejected.push_back({{"variant", key},
                                  {"shape", label},
                                  {"reason", r["status"] != "ok"
                                                 ? cat("error: ", r.value("error", std::string()))
                                                 : r.contains("not_admitted")
                                                 ? cat("not admitted: ", r["not_admitted"].get<std::string>())
                                                 : cat("not admitted: pcc ", r["pcc"].dump())}});
        }
    }
    json stages = json::array();
    for (const std::string& gk : order) {
        const Group& g = groups[gk];
        const int n = int(g.labels.size());
        json totals = json::object();
        std::string best, best_sel;
        for (const auto& [key, tot] : g.totals) {
            if (tot.second != n) {
                totals[key] = nullptr;
                continue;
            }
            totals[key] = tot.first;
            if (best.empty() || tot.first < g.totals.at(best).first) best = key;
            if (g.selectable.count(key) && (best_sel.empty() || tot.first < g.totals.at(best_sel).first))
                best_sel = key;
        }
        const Variant dv = default_variant(g.op);
        const std::string dkey = variant_key(dv.name, dv.params);
        if (!best_sel.empty() && best_sel != dkey && totals.contains(dkey) && !totals[dkey].is_null() &&
            (totals[dkey].get<double>() < kMinGain * g.totals.at(best_sel).first ||
             g.means.at(dkey) <= g.means.at(best_sel)))
            best_sel = dkey;
        json st = {{"op", g.op},           {"dtype", g.dtype},   {"table_shape", g.table_shape},
                   {"shapes", g.labels},  {"totals_us", totals}, {"rejected", g.rejected},
                   {"default", {{"variant", dv.name}, {"params", dv.params}}}};
        if (totals.contains(dkey) && !totals[dkey].is_null()) st["default"]["us"] = totals[dkey];
        if (!best.empty()) {
            const auto& nm = g.names.at(best);
            st["fastest"] = variant_ref(nm.first, nm.second, g.totals.at(best).first);
            st["fastest"]["selectable"] = g.selectable.count(best) > 0;
        }
        if (!best_sel.empty()) {
            const auto& nm = g.names.at(best_sel);
            st["winner"] = variant_ref(nm.first, nm.second, g.totals.at(best_sel).first);
            if (st["default"].contains("us"))
                st["gain_vs_default"] = st["default"]["us"].get<double>() / g.totals.at(best_sel).first;
        }
        stages.push_back(st);
    }
    return stages;
}

// ---- reading results, --report ---------------------------------------------------------

json read_results(const std::string& path) {
    json doc = read_json(path);
    check_results(doc, path);
    return doc;
}

std::string report(const json& doc, const Table& table) {
    const json stages = stages_from_rows(doc["rows"]);
    const std::string kernels = doc["machine"].value("kernels", "");
    std::string out;
    appendf(out, "sweep %s on %s (%s), %zu rows; tuned table: %s\n", doc.value("sweep", "?").c_str(),
            doc["machine"].value("cpu", "?").c_str(), kernels.c_str(), doc["rows"].size(),
            table.origin.c_str());
    appendf(out, "%-10s %-5s %-52s %-46s %-46s %s\n", "op", "dtype", "shape", "table", "sweep winner",
            "gain");
    for (const json& st : stages) {
        const std::string op = st["op"], dtype = st["dtype"];
        const LookupShape shape_key(st["table_shape"]);
        Choice c = lookup_in(table, kernels, op, dtype, shape_key.dims);
        std::string tname = c.variant, origin = "table";
        std::map<std::string, int64_t> tparams = c.params;
        if (tname.empty()) {
            const Variant dv = default_variant(op);
            tname = dv.name;
            tparams = dv.params;
            origin = "default";
        }
        const std::string tkey = variant_key(tname, tparams);
        const json& totals = st["totals_us"];
        const bool measured = totals.contains(tkey) && !totals[tkey].is_null();
        std::string tcol = tkey + " (" + origin + ") " + (measured ? fmt_us(totals[tkey]) : "not measured");
        std::string bcol = "-", gain = "-";
        if (st.contains("winner")) {
            const json& w = st["winner"];
            bcol = variant_key(w["variant"], w["params"].get<std::map<std::string, int64_t>>()) + " " +
                   fmt_us(w["us"]);
            if (measured) {
                char g[32];
                std::snprintf(g, sizeof g, "%.2fx", totals[tkey].get<double>() / w["us"].get<double>());
                gain = g;
            }
        }
        std::string shape;
        for (auto it = st["table_shape"].begin(); it != st["table_shape"].end(); ++it)
            shape += (shape.empty() ? "" : " ") + it.key() + "=" + std::to_string(it.value().get<int64_t>());
        appendf(out, "%-10s %-5s %-52s %-46s %-46s %s\n", op.c_str(), dtype.c_str(), shape.c_str(),
                tcol.c_str(), bcol.c_str(), gain.c_str());
        if (st.contains("fastest") && st.contains("winner") &&
            (st["fastest"]["variant"] != st["winner"]["variant"] ||
             st["fastest"]["params"] != st["winner"]["params"])) {
            const json& f = st["fastest"];
            appendf(out, "    fastest admitted: %s %s%s\n",
                    variant_key(f["variant"], f["params"].get<std::map<std::string, int64_t>>()).c_str(),
                    fmt_us(f["us"]).c_str(),
                    !f.value("selectable", true) ? " (not selectable: a reference, or a variant the table never takes)"
                                                 : " (within the noise margin of the default)");
        }
        for (const json& r : st["rejected"])
            appendf(out, "    rejected %s at %s: %s\n", r["variant"].get<std::string>().c_str(),
                    r["shape"].get<std::string>().c_str(), r["reason"].get<std::string>().c_str());
    }
    return out;
}

// ---- --update-table ---------------------------------------------------------------------

TableUpdate update_table(const std::vector<std::string>& files, const std::string& table_path) {
    json table = std::filesystem::exists(table_path) ? read_json(table_path)
                                                     : json{{"schema_version", 1}, {"entries", json::array()}};
    (void)parse_table(table.dump(), table_path);  // the current file must be a table
    json fresh = json::array();
    for (const std::string& f : files) {
        const json doc = read_results(f);
        const std::string kernels = doc["machine"].value("kernels", "");
        for (const json& st : stages_from_rows(doc["rows"])) {
            if (!st.contains("winner")) continue;
            json e = {{"kernels", kernels},
                      {"op", st["op"]},
                      {"dtype", st["dtype"]},
                      {"shape", st["table_shape"]},
                      {"variant", st["winner"]["variant"]},
                      {"params", st["winner"]["params"]},
                      {"us", st["winner"]["us"]}};
            if (st["default"].contains("us")) e["default_us"] = st["default"]["us"];
            fresh.push_back(e);
        }
    }
    const auto same = [](const json& a, const json& b) {
        return a["kernels"] == b["kernels"] && a["op"] == b["op"] && a["dtype"] == b["dtype"] &&
               a["shape"] == b["shape"];
    };
    json entries = json::array();
    for (const json& e : table["entries"])
        if (std::none_of(fresh.begin(), fresh.end(), [&](const json& f) { return same(e, f); }))
            entries.push_back(e);
    for (const json& f : fresh) entries.push_back(f);
    std::vector<json> sorted(entries.begin(), entries.end());
    std::stable_sort(sorted.begin(), sorted.end(), [](const json& a, const json& b) {
        return std::tie(a["kernels"].get_ref<const std::string&>(), a["op"].get_ref<const std::string&>(),
                        a["dtype"].get_ref<const std::string&>()) <
               std::tie(b["kernels"].get_ref<const std::string&>(), b["op"].get_ref<const std::string&>(),
                        b["dtype"].get_ref<const std::string&>());
    });
    table["entries"] = sorted;
    // Every results file an entry still comes from: the earlier ones, then these (once each).
    std::vector<std::string> made_from;
    if (table.contains("made_from"))
        for (const json& f : table["made_from"]) made_from.push_back(f.get<std::string>());
    for (const std::string& f : files)
        if (std::find(made_from.begin(), made_from.end(), f) == made_from.end()) made_from.push_back(f);
    table["made_from"] = made_from;
    const std::string text = table.dump(1) + "\n";
    (void)parse_table(text, table_path);  // what the kernels will read
    io::write_file_atomic(table_path, text);
    return {sorted.size(), fresh.size()};
}

// ---- the sweep --------------------------------------------------------------------------

const OpSweep* find_op_sweep(const std::string& name) {
    for (const OpSweep& o : op_sweeps())
        if (o.name == name) return &o;
    return nullptr;
}

namespace {

json pending_json() {
    json pending = json::array();
    for (const auto& [name, why] : pending_sweeps()) pending.push_back({{"sweep", name}, {"reason", why}});
    return pending;
}

}  // namespace

json plan_document(const Options& o) {
    json sweeps = json::array();
    size_t n_variants = 0, n_cases = 0;
    for (const OpSweep* op : o.ops) {
        json cases = json::array();
        for (const Plan& p : plan(*op, o.sets, o.dtypes)) {
            json vs = json::array();
            for (const Variant& v : p.variants) vs.push_back(variant_json(v));
            n_variants += p.variants.size();
            ++n_cases;
            cases.push_back({{"set", p.shape.set}, {"label", p.shape.label},
                             {"shape", dims_json(p.shape.dims)}, {"dtype", p.dtype}, {"variants", vs}});
        }
        sweeps.push_back({{"sweep", op->name}, {"cases", cases}});
    }
    return {{"bench", "bioinfer bench sweep"}, {"schema_version", kSchemaVersion},
            {"dry_run", true},                {"arguments", o.arguments},
            {"sweeps", sweeps},               {"pending", pending_json()},
            {"cases", n_cases},               {"variants", n_variants}};
}

RunSummary run(const Options& o, const std::function<void(const std::string&)>& log) {
    BI_CHECK(o.iters > 0 && o.reps > 0, "sweep", "iterations and repetitions must be positive, got ",
             o.iters, " and ", o.reps);
    BI_CHECK(!o.out_dir.empty(), "sweep", "no output folder");
    const Timing timing{o.iters, o.reps};
    load_active_table();
    std::filesystem::create_directories(o.out_dir);
    log("sweep: measuring the machine's GEMM and memory peaks");
    const json peaks = measure_gemm_and_memory_peaks();
    json machine = machine_facts();
    machine["peaks"] = peaks;
    const std::string tag = [&] {
        std::string t;
        for (const std::string& s : o.sets) t += (t.empty() ? "" : "+") + s;
        return t;
    }();
    RunSummary summary;
    for (const OpSweep* op : o.ops) {
        const auto plans = plan(*op, o.sets, o.dtypes);
        json rows = json::array(), errors = json::array();
        const auto t0 = std::chrono::steady_clock::now();
        for (size_t i = 0; i < plans.size(); ++i) {
            const Plan& p = plans[i];
            json r = run_case(p, timing, peaks, errors);
            std::string best;
            double best_us = 1e300;
            for (const json& row : r)
                if (row["status"] == "ok" && row["admitted"].get<bool>() && row["us"]["min"].get<double>() < best_us) {
                    best_us = row["us"]["min"];
                    best = variant_key(row["variant"], row["params"].get<std::map<std::string, int64_t>>());
                }
            std::string line;
            appendf(line, "sweep %s [%zu/%zu] %s %s: fastest %s %s", op->name.c_str(), i + 1, plans.size(),
                    p.shape.label.c_str(), p.dtype.c_str(), best.empty() ? "none admitted" : best.c_str(),
                    best.empty() ? "" : fmt_us(best_us).c_str());
            log(line);
            for (json& row : r) rows.push_back(std::move(row));
        }
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        json doc = {{"bench", "bioinfer bench sweep"},
                    {"schema_version", kSchemaVersion},
                    {"sweep", op->name},
                    {"machine", machine},
                    {"arguments", o.arguments},
                    {"method",
                     {{"timing", cat("per variant: one checked call (also the warm-up), then ", timing.reps,
                                     " timings of ", timing.iters,
                                     " back-to-back calls; us.min (the minimum over timings, per call) counts")},
                      {"admission", cat("PCC >= ", kAdmitPcc, " against the reference (fp64 over sampled ",
                                        "rows for matmul and attention, the fp32 reference kernels otherwise); ",
                                        "fp32 variants also max-abs <= ", kMaxErrorVsDefault,
                                        "x the default kernel's at the shape")},
                      {"stages", cat("per tuned-table decision (op, dtype, lookup shape): the fastest "
                                     "admitted selectable variant by summed us.min over the decision's "
                                     "shapes; the default stays unless the winner is ",
                                     kMinGain, "x faster by that and faster by summed us.mean")},
                      {"seconds", secs}}},
                    {"tuned_table", active_table().origin},
                    {"pending", pending_json()},
                    {"stages", stages_from_rows(rows)},
                    {"rows", rows},
                    {"errors", errors}};
        const std::string path = o.out_dir + "/" + op->name + "-" + tag + ".json";
        io::write_file_atomic(path, doc.dump(1) + "\n");
        std::string line;
        appendf(line, "sweep %s: %zu rows, %zu errors, %.0f s -> %s", op->name.c_str(), rows.size(),
                errors.size(), secs, path.c_str());
        log(line);
        summary.files.push_back(path);
        summary.errors += errors.size();
    }
    return summary;
}

}  // namespace bioinfer::tuning::sweep
