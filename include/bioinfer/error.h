// Errors: one exception type carrying "[where] what", and small helpers to build messages.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace bioinfer {

class Error : public std::runtime_error {
public:
    Error(const std::string& where, const std::string& what)
        : std::runtime_error("[" + where + "] " + what) {}
};

// Concatenates anything streamable: cat("expected ", 3, ", got ", 4).
template <typename... Args>
std::string cat(Args&&... args) {
    std::ostringstream os;
    (os << ... << std::forward<Args>(args));
    return os.str();
}

[[noreturn]] inline void fail(const std::string& where, const std::string& what) {
    throw Error(where, what);
}

}  // namespace bioinfer

#define BI_CHECK(cond, where, ...)                                          \
    do {                                                                    \
        if (!(cond)) ::bioinfer::fail((where), ::bioinfer::cat(__VA_ARGS__)); \
    } while (0)
