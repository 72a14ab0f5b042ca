// Minimal option parser shared by the subcommands: --key value, --key=value, --flag, positionals.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "runtime/hub.h"
#include "runtime/jobs.h"

namespace bioinfer::cli {

struct Args {
    std::vector<std::string> positional;
    std::map<std::string, std::string> opts;
    bool has(const std::string& k) const { return opts.count(k) > 0; }
    std::string get(const std::string& k, const std::string& dflt = "") const;
    long long get_int(const std::string& k, long long dflt) const;
    // get_int within [lo, hi] (the default need not be): outside, "[--k] expected lo to hi, got v".
    long long get_int_in(const std::string& k, long long dflt, long long lo, long long hi) const;
    // A byte count: digits with an optional unit (K, M, G, T; KB/KiB... all powers of 1024).
    int64_t get_size(const std::string& k, int64_t dflt) const;
    // A finite number; anything else is "[--k] expected a number, got 'v'".
    double get_double(const std::string& k, double dflt) const;
    std::vector<int> get_int_list(const std::string& k, const std::vector<int>& dflt) const;
};

// valued: options taking a value; flags: options without one. Unknown options are errors.
// Snake-case spellings are accepted (--out_dir), and the names other tools use for the same
// things (--recycling_steps for --num-recycles, --cache for --cache-dir, ...).
Args parse_args(int argc, char** argv, const std::set<std::string>& valued,
                const std::set<std::string>& flags);


// parse_args for a batch job (embed, predict): the options every job takes are added to its own
// (--workers, --threads, --log, --shard, --cache-dir, --accelerator; flags --override,
// --offline, --quiet, --help).
Args parse_job_args(int argc, char** argv, std::set<std::string> valued, std::set<std::string> flags);
// Fills the options every job shares from them (and --out-dir, which is required).
void apply_job_options(const Args& a, runtime::JobOptions& o);
// The --help lines for those shared options.
const char* job_options_help();
// The hub settings: environment (HF_ENDPOINT, HF_HUB_CACHE, HF_HOME, HF_TOKEN, HF_HUB_OFFLINE)
// with --cache-dir and --offline.
runtime::HubOptions hub_options(const Args& a);
// --weights DIR, or --model NAME from the Hugging Face cache, downloaded on first use.
std::string weights_dir_from(const Args& a);

// The ranges numeric options share (docs/reliability.md lists them all): counts of tokens,
// residues, rows and repetitions far past anything a machine holds are typing mistakes, and
// refused before they reach an allocation or a loop.
inline constexpr long long kMaxTokensOption = 1 << 24;   // --toks-per-batch, --truncate, --chunk-size
inline constexpr long long kMaxRepeatOption = 100000;    // bench/sweep repetitions

// --max-input-size, --max-records, --max-ligand-atoms, --conformer-timeout (those given) into
// io::input_limits(), checked. apply_job_options does it for the job commands.
void apply_input_limits(const Args& a);

// --threads N, checked (0 or absent: all usable CPUs; at most max_threads()).
int threads_from(const Args& a);

// --precision fp32|bf16 (or --fast = bf16), and int8 where `allow_int8` (the language models'
// embed and bench; not yet the structure models): sets the GEMM compute dtype; returns its name.
std::string apply_precision(const Args& a, bool allow_int8 = false);
}  // namespace bioinfer::cli
