// Option parsing with errors that name the option.
#include "args.h"

#include "bioinfer/error.h"
#include "ops/ops.h"

namespace bioinfer::cli {

std::string Args::get(const std::string& k, const std::string& dflt) const {
    auto it = opts.find(k);
    return it == opts.end() ? dflt : it->second;
}

long long Args::get_int(const std::string& k, long long dflt) const {
    auto it = opts.find(k);
    if (it == opts.end()) return dflt;
    size_t used = 0;
    long long v = 0;
    try {
        v = std::stoll(it->second, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    BI_CHECK(used == it->second.size() && used > 0, "--" + k, "expected an integer, got '",
             it->second, "'");
    return v;
}

std::vector<int> Args::get_int_list(const std::string& k, const std::vector<int>& dflt) const {
    auto it = opts.find(k);
    if (it == opts.end()) return dflt;
    std::vector<int> out;
    const std::string& s = it->second;
    size_t p = 0;
    while (p <= s.size()) {
        size_t q = s.find_first_of(", ", p);
        if (q == std::string::npos) q = s.size();
        const std::string w = s.substr(p, q - p);
        if (!w.empty()) {
            size_t used = 0;
            int v = 0;
            try {
                v = std::stoi(w, &used);
            } catch (const std::exception&) {
                used = 0;
            }
            BI_CHECK(used == w.size() && used > 0, "--" + k, "expected integers, got '", w, "'");
            out.push_back(v);
        }
        p = q + 1;
    }
    BI_CHECK(!out.empty(), "--" + k, "expected at least one integer");
    return out;
}

Args parse_args(int argc, char** argv, const std::set<std::string>& valued,
                const std::set<std::string>& flags) {
    Args a;
    for (int i = 0; i < argc; ++i) {
        std::string s = argv[i];
        if (s.size() > 2 && s.rfind("--", 0) == 0) {
            std::string key = s.substr(2), val;
            bool has_val = false;
            if (auto eq = key.find('='); eq != std::string::npos) {
                val = key.substr(eq + 1);
                key = key.substr(0, eq);
                has_val = true;
            }
            if (flags.count(key)) {
                BI_CHECK(!has_val, "--" + key, "takes no value");
                a.opts[key] = "1";
            } else if (valued.count(key)) {
                if (!has_val) {
                    BI_CHECK(i + 1 < argc, "--" + key, "needs a value");
                    val = argv[++i];
                }
                a.opts[key] = val;
            } else {
                fail("--" + key, "unknown option (see --help)");
            }
        } else {
            a.positional.push_back(s);
        }
    }
    return a;
}

}  // namespace bioinfer::cli

#include "runtime/hf_cache.h"

namespace bioinfer::cli {

std::string weights_dir_from(const Args& a) {
    BI_CHECK(a.has("weights") != a.has("model"), "arguments",
             "give exactly one of --weights DIR or --model NAME");
    return a.has("weights") ? a.get("weights") : runtime::resolve_cached_model(a.get("model"));
}

std::string apply_precision(const Args& a) {
    std::string p = a.get("precision", a.has("fast") ? "bf16" : "fp32");
    BI_CHECK(!(a.has("fast") && p != "bf16"), "--fast", "means --precision bf16, not ", p);
    BI_CHECK(p == "fp32" || p == "bf16", "--precision", "expected fp32 or bf16, got '", p, "'");
    ops::set_matmul_precision(p == "bf16" ? DType::BF16 : DType::F32);
    return p;
}

}  // namespace bioinfer::cli
