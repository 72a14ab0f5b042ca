// One fuzz target per input surface. A target's body hands the bytes to a parser the way the
// CLI would; what the parser may do with them: return, or throw bioinfer::Error (the one-line
// "[where] what" the CLI prints). Anything else is a finding and aborts: another exception type
// escaping (the CLI would print a bare "stoll" or "json.exception..."), an error message that is
// not one printable line, and whatever ASan and UBSan report (out-of-range reads, leaks, overflow).
//
// Built two ways from the same sources (CMakeLists.txt):
//  - with BIOINFER_FUZZ (clang): each target is its own libFuzzer binary, fuzz_<name>;
//  - in the normal test suite: every target's body registers itself, and bioinfer_fuzz_replay
//    runs it over tests/fuzz/regressions/<name>/ (the inputs that once failed, and the seeds).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "bioinfer/error.h"

namespace bioinfer::fuzz {

using Body = void (*)(std::string_view data);

// Runs `body` on `data` under the rules above; aborts with a description on a finding.
void run_one(const char* target, Body body, std::string_view data);

// A finding unless `what` is an error message by the rules above (the target running is named).
void check_error_message(const char* what);

// Reports a finding of the target running (a property the target checks itself) and aborts.
[[noreturn]] void finding_here(const std::string& what);

// Runs `f`; a bioinfer::Error it throws is an answer (its message checked), not a finding. For a
// target that hands one input to several parsers.
template <typename F>
void attempt(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        check_error_message(e.what());
    }
}

// A file holding `data`, named with `suffix` (".pdb", ".npz"), rewritten on each call, in a
// directory of this process's own; for readers that take a path (most map the file).
std::string write_temp(std::string_view data, const std::string& suffix);
// A fresh empty directory of this process's own (emptied on each call).
std::string temp_dir(const std::string& name);

// Splits `data` into up to `n` parts at each occurrence of `sep` (the last part keeps the rest),
// so one input can stand for several files.
std::vector<std::string_view> split_parts(std::string_view data, std::string_view sep, size_t n);

#ifndef BIOINFER_LIBFUZZER
struct Registration {
    Registration(const char* name, Body body);
};
#endif

}  // namespace bioinfer::fuzz

using namespace bioinfer::fuzz;  // for the target bodies

#ifdef BIOINFER_LIBFUZZER
#define BIOINFER_FUZZ_TARGET(name)                                                        \
    static void fuzz_body_##name(std::string_view data);                                  \
    extern "C" int LLVMFuzzerTestOneInput(const uint8_t* d, size_t n) {                   \
        ::bioinfer::fuzz::run_one(#name, fuzz_body_##name,                                \
                                  std::string_view(reinterpret_cast<const char*>(d), n)); \
        return 0;                                                                         \
    }                                                                                     \
    static void fuzz_body_##name(std::string_view data)
#else
#define BIOINFER_FUZZ_TARGET(name)                                                                 \
    static void fuzz_body_##name(std::string_view data);                                           \
    static const ::bioinfer::fuzz::Registration fuzz_registration_##name(#name, fuzz_body_##name); \
    static void fuzz_body_##name(std::string_view data)
#endif
