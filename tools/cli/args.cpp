// Option parsing with errors that name the option.
#include "args.h"

#include <cmath>
#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "bioinfer/error.h"
#include "core/threads.h"
#include "io/limits.h"
#include "io/model_dir.h"
#include "io/untrusted.h"
#include "ops/ops.h"

namespace bioinfer::cli {

std::string Args::get(const std::string& k, const std::string& dflt) const {
    auto it = opts.find(k);
    return it == opts.end() ? dflt : it->second;
}

double Args::get_double(const std::string& k, double dflt) const {
    auto it = opts.find(k);
    if (it == opts.end()) return dflt;
    char* end = nullptr;
    const double v = std::strtod(it->second.c_str(), &end);
    BI_CHECK(!it->second.empty() && end && *end == 0 && std::isfinite(v), "--" + k,
             "expected a number, got '", it->second, "'");
    return v;
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

long long Args::get_int_in(const std::string& k, long long dflt, long long lo, long long hi) const {
    if (!has(k)) return dflt;
    const long long v = get_int(k, dflt);
    BI_CHECK(v >= lo && v <= hi, "--" + k, "expected ", lo, " to ", hi, ", got ", v);
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

namespace {

// Spellings users of other tools type, mapped to bioinfer's own options (after '_' -> '-'):
// Boltz's --recycling_steps, --cache, --devices, --checkpoint, --write_full_pae; fair-esm's
// --truncation_seq_length; esm-fold's --max-tokens-per-batch.
const std::map<std::string, std::string>& aliases() {
    static const std::map<std::string, std::string> a = {
        {"recycling-steps", "num-recycles"}, {"cache", "cache-dir"},
        {"devices", "workers"},              {"checkpoint", "weights"},
        {"write-full-pae", "write-pae"},     {"truncation-seq-length", "truncate"},
        {"max-tokens-per-batch", "toks-per-batch"},
    };
    return a;
}

}  // namespace

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
            const std::string typed = "--" + key;
            std::replace(key.begin(), key.end(), '_', '-');
            if (!valued.count(key) && !flags.count(key))
                if (auto it = aliases().find(key); it != aliases().end()) key = it->second;
            if (flags.count(key)) {
                BI_CHECK(!has_val, typed, "takes no value");
                a.opts[key] = "1";
            } else if (valued.count(key)) {
                if (!has_val) {
                    BI_CHECK(i + 1 < argc, typed, "needs a value");
                    val = argv[++i];
                }
                BI_CHECK(!a.opts.count(key) || a.opts[key] == val, typed, "given twice (as --", key,
                         " ", a.opts[key], " and ", val, ")");
                a.opts[key] = val;
            } else {
                fail(typed, "unknown option (see --help)");
            }
        } else {
            a.positional.push_back(s);
        }
    }
    return a;
}

runtime::HubOptions hub_options(const Args& a) {
    runtime::HubOptions o = runtime::HubOptions::from_env(a.get("cache-dir"), a.has("offline"));
    o.quiet = a.has("quiet");
    return o;
}

std::string weights_dir_from(const Args& a) {
    BI_CHECK(a.has("weights") != a.has("model"), "arguments",
             "give exactly one of --weights DIR or --model NAME");
    return a.has("weights") ? a.get("weights") : runtime::ensure_model(hub_options(a), a.get("model"));
}

int threads_from(const Args& a) {
    return checked_thread_count(a.get_int("threads", 0), "--threads");
}

// --workers N over --threads T (sets the process's thread count too).
static std::vector<runtime::Worker> workers_from(const Args& a) {
    const int threads = threads_from(a);
    // each worker is a thread of its own: the same bound as --threads
    const long long workers = a.get_int("workers", 1);
    BI_CHECK(workers >= 1 && workers <= max_threads(), "--workers", "expected 1 to ", max_threads(),
             " (", kMaxThreadsPerCpu, " per CPU this process may use), got ", workers);
    const std::string acc = a.get("accelerator", "cpu");
    BI_CHECK(acc == "cpu", "--accelerator", "this build runs on the CPU only, got '", acc, "'");
    set_num_threads(threads);
    return runtime::cpu_workers(int(workers), threads);
}

int64_t Args::get_size(const std::string& k, int64_t dflt) const {
    auto it = opts.find(k);
    if (it == opts.end()) return dflt;
    const std::string& v = it->second;
    size_t digits = 0;
    while (digits < v.size() && std::isdigit((unsigned char)v[digits])) ++digits;
    std::string unit = v.substr(digits);
    for (char& c : unit) c = char(std::toupper((unsigned char)c));
    static const std::map<std::string, int> shifts = {{"", 0},  {"B", 0},    {"K", 10},
                                                      {"KB", 10}, {"KIB", 10}, {"M", 20},
                                                      {"MB", 20}, {"MIB", 20}, {"G", 30},
                                                      {"GB", 30}, {"GIB", 30}, {"T", 40},
                                                      {"TB", 40}, {"TIB", 40}};
    int64_t n = 0;
    const auto shift = shifts.find(unit);
    BI_CHECK(digits > 0 && digits <= 12 && shift != shifts.end() &&
                 io::parse_decimal(std::string_view(v).substr(0, digits), 12, n) && n > 0 &&
                 n <= (int64_t(1) << (62 - shift->second)),
             "--" + k, "expected a size such as 512M or 4G, got '", v, "'");
    return n << shift->second;
}

void apply_input_limits(const Args& a) {
    io::InputLimits& l = io::input_limits();
    if (a.has("max-input-size")) l.file_bytes = l.target_file_bytes = a.get_size("max-input-size", 0);
    l.records = a.get_int_in("max-records", l.records, 1, int64_t(1) << 40);
    l.smiles_heavy_atoms = a.get_int_in("max-ligand-atoms", l.smiles_heavy_atoms, 1, 100000);
    if (a.has("conformer-timeout")) {
        const std::string v = a.get("conformer-timeout");
        char* end = nullptr;
        const double s = std::strtod(v.c_str(), &end);
        BI_CHECK(end && *end == 0 && s > 0 && s <= 1e6, "--conformer-timeout",
                 "expected seconds (a positive number), got '", v, "'");
        l.conformer_seconds = s;
    }
}

Args parse_job_args(int argc, char** argv, std::set<std::string> valued, std::set<std::string> flags) {
    valued.insert({"workers", "threads", "log", "cache-dir", "accelerator", "shard", "max-input-size",
                   "max-records", "max-ligand-atoms", "conformer-timeout"});
    flags.insert({"override", "offline", "quiet", "help", "allow-nonfinite"});
    return parse_args(argc, argv, valued, flags);
}

void apply_job_options(const Args& a, runtime::JobOptions& o) {
    BI_CHECK(a.has("out-dir"), "arguments", "--out-dir is required");
    o.out_dir = a.get("out-dir");
    apply_input_limits(a);
    io::set_allow_nonfinite(a.has("allow-nonfinite"));
    o.quiet = a.has("quiet");
    o.override_existing = a.has("override");
    o.log_path = a.get("log");
    o.workers = workers_from(a);
    o.shard = runtime::shard_from(a.get("shard"));
}

const char* job_options_help() {
    return R"(  --threads N          threads in all, at most 4 per CPU (default: all cores)
  --workers N          run N targets (embed: batches) at once, the threads and memory split
                       among them (default 1)
  --override           compute again targets whose outputs already exist (default: skip them)
  --log FILE           also write progress events to FILE as JSON lines
  --shard I/N          process part I (0-based) of N, into OUT/shard-I-of-N (default: the MPI
                       rank and size, or the Slurm array task, when present); `bioinfer merge`
                       assembles the parts
  --cache-dir DIR      Hugging Face hub cache (default: $HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/...)
  --offline            never use the network (as HF_HUB_OFFLINE=1)
  --quiet              no progress output
  --allow-nonfinite    load weights holding NaN or Inf (refused by default, naming the tensor)
  --max-input-size S   largest input file read whole: FASTA, MSA, CSV, ligand list (default
                       2G; Boltz-2 input files 4M), e.g. 512M, 8G
  --max-records N      records in one FASTA file, ligands in one list (default 1000000)
  --max-ligand-atoms N heavy atoms in one SMILES, checked before RDKit reads it (default 500)
  --conformer-timeout S  seconds RDKit may search for one SMILES ligand's conformer (default 300)
)";
}

std::string apply_precision(const Args& a, bool allow_int8) {
    std::string p = a.get("precision", a.has("fast") ? "bf16" : "fp32");
    BI_CHECK(!(a.has("fast") && p != "bf16"), "--fast", "means --precision bf16, not ", p);
    const char* expected = allow_int8 ? "expected fp32, bf16 or int8" : "expected fp32 or bf16";
    BI_CHECK(p == "fp32" || p == "bf16" || (allow_int8 && p == "int8"), "--precision", expected,
             ", got '", p, "'");
    ops::set_matmul_precision(p == "bf16" ? DType::BF16 : p == "int8" ? DType::I8 : DType::F32);
    return p;
}

}  // namespace bioinfer::cli
