// Checks for untrusted text: see untrusted.h.
#include "io/untrusted.h"

namespace bioinfer::io {

bool is_plain_relative_path(const std::string& p) {
    if (p.empty() || p.size() > 4096 || p.front() == '/') return false;
    for (unsigned char c : p)
        if (c < 0x20 || c == 0x7f || c == '\\') return false;
    size_t start = 0;
    while (true) {
        const size_t slash = p.find('/', start);
        const std::string part =
            p.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
        if (part.empty() || part == "." || part == "..") return false;
        if (slash == std::string::npos) return true;
        start = slash + 1;
    }
}

bool parse_decimal(std::string_view s, size_t max_digits, int64_t& out) {
    if (s.empty() || s.size() > max_digits || max_digits > 18) return false;
    int64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + (c - '0');
    }
    out = v;
    return true;
}

}  // namespace bioinfer::io
