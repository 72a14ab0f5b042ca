// Errors: one exception type carrying "[where] what", and small helpers to build messages.
#pragma once
#include <filesystem>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace bioinfer {

// The length of the well-formed UTF-8 sequence (RFC 3629: no overlong form, no surrogate, at
// most U+10FFFF) starting at s[i], or 0.
inline size_t utf8_length_at(std::string_view s, size_t i) {
    const unsigned char c = (unsigned char)s[i];
    if (c < 0x80) return 1;
    const size_t n = c >= 0xc2 && c <= 0xdf   ? 2
                     : c >= 0xe0 && c <= 0xef ? 3
                     : c >= 0xf0 && c <= 0xf4 ? 4
                                              : 0;
    if (n == 0 || i + n > s.size()) return 0;
    const unsigned char c1 = (unsigned char)s[i + 1];
    if (c == 0xe0   ? c1 < 0xa0
        : c == 0xed ? c1 >= 0xa0
        : c == 0xf0 ? c1 < 0x90
        : c == 0xf4 ? c1 >= 0x90
                    : false)
        return 0;
    for (size_t k = 1; k < n; ++k)
        if (((unsigned char)s[i + k] & 0xc0) != 0x80) return 0;
    return n;
}

inline bool is_utf8(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
        const size_t n = utf8_length_at(s, i);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

// `s` made safe for one line of a terminal or log: printable ASCII and well-formed UTF-8 stay as
// they are; every other byte (control characters, newlines, a broken or overlong UTF-8 sequence,
// DEL, C1 controls) is written as \xHH. Error messages quote input bytes through this.
inline std::string shown_bytes(std::string_view s) {
    static const char* hex = "0123456789abcdef";
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        const unsigned char c = (unsigned char)s[i];
        const size_t n = utf8_length_at(s, i);
        const bool c1_control = c == 0xc2 && n == 2 && (unsigned char)s[i + 1] < 0xa0;
        if ((c >= 0x20 && c < 0x7f) || (n > 1 && !c1_control)) {
            out.append(s.substr(i, n));
            i += n;
            continue;
        }
        out += "\\x";
        out += hex[c >> 4];
        out += hex[c & 15];
        ++i;
    }
    return out;
}

// The message is "[where] what", one line: input bytes in either part are shown as shown_bytes.
class Error : public std::runtime_error {
public:
    Error(const std::string& where, const std::string& what)
        : std::runtime_error(shown_bytes("[" + where + "] " + what)) {}
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

// The one line the CLI and the Python module show for an exception: an Error's own message; a
// filesystem error as "[path] what failed: reason" (never the library's raw text); running out of
// memory as such; anything else its message, made printable.
inline std::string error_line(const std::exception& e) {
    if (dynamic_cast<const Error*>(&e)) return e.what();
    if (const auto* f = dynamic_cast<const std::filesystem::filesystem_error*>(&e)) {
        // what(): "filesystem error: <operation>: <reason> [path1] [path2]"
        std::string op = f->what();
        const std::string prefix = "filesystem error: ", reason = f->code().message();
        if (op.rfind(prefix, 0) == 0) op = op.substr(prefix.size());
        if (const size_t r = op.find(": " + reason); r != std::string::npos) op = op.substr(0, r);
        if (op == "status" || op == "symlink_status") op = "cannot be read";  // the library's names
        std::string where = f->path1().string();
        if (!f->path2().empty()) where += " -> " + f->path2().string();
        return Error(where.empty() ? "filesystem" : where, op + ": " + reason).what();
    }
    if (dynamic_cast<const std::bad_alloc*>(&e))
        return "out of memory (fewer --workers, a smaller --toks-per-batch or --max-memory help)";
    return shown_bytes(e.what());
}

}  // namespace bioinfer

#define BI_CHECK(cond, where, ...)                                          \
    do {                                                                    \
        if (!(cond)) ::bioinfer::fail((where), ::bioinfer::cat(__VA_ARGS__)); \
    } while (0)
