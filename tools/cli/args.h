// Minimal option parser shared by the subcommands: --key value, --key=value, --flag, positionals.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

namespace bioinfer::cli {

struct Args {
    std::vector<std::string> positional;
    std::map<std::string, std::string> opts;
    bool has(const std::string& k) const { return opts.count(k) > 0; }
    std::string get(const std::string& k, const std::string& dflt = "") const;
    long long get_int(const std::string& k, long long dflt) const;
    std::vector<int> get_int_list(const std::string& k, const std::vector<int>& dflt) const;
};

// valued: options taking a value; flags: options without one. Unknown options are errors.
Args parse_args(int argc, char** argv, const std::set<std::string>& valued,
                const std::set<std::string>& flags);

}  // namespace bioinfer::cli

namespace bioinfer::cli {
// --weights DIR, or --model NAME resolved in the local Hugging Face cache.
std::string weights_dir_from(const Args& a);
// --precision fp32|bf16 (or --fast = bf16): sets the GEMM compute dtype; returns its name.
std::string apply_precision(const Args& a);
}  // namespace bioinfer::cli
