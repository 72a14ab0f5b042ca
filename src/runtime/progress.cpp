// Terminal: "\r" updates at most 10 times a second. Not a terminal: a line at most every 5 s.
#include "runtime/progress.h"

#include <unistd.h>

#include <cstdio>

namespace bioinfer::runtime {

using clk = std::chrono::steady_clock;

Progress::Progress(std::string label, int64_t total_items, bool quiet, std::string items,
                   std::string tokens)
    : label_(std::move(label)),
      items_(std::move(items)),
      tokens_name_(std::move(tokens)),
      total_(total_items),
      quiet_(quiet) {
    tty_ = isatty(STDERR_FILENO);
    start_ = last_print_ = clk::now();
}

double Progress::elapsed() const {
    return std::chrono::duration<double>(clk::now() - start_).count();
}

void Progress::advance(int64_t items, int64_t tokens) {
    done_ += items;
    tokens_ += tokens;
    const double since = std::chrono::duration<double>(clk::now() - last_print_).count();
    if (since >= (tty_ ? 0.1 : 5.0) || done_ == total_) print(false);
}

void Progress::detail(std::string text) {
    detail_ = std::move(text);
    if (detail_.empty()) return;
    const double since = std::chrono::duration<double>(clk::now() - last_print_).count();
    if (!tty_ || since >= 0.1) print(false);
}

void Progress::print(bool final) {
    if (quiet_) return;
    last_print_ = clk::now();
    printed_done_ = done_;
    const double t = elapsed();
    const double rate = t > 0 ? double(tokens_) / t : 0.0;
    const int pct = total_ > 0 ? int(100.0 * double(done_) / double(total_)) : 100;
    const std::string extra = detail_.empty() || final ? "" : ", " + detail_;
    // "\x1b[K" clears what a longer previous line left on the terminal
    std::fprintf(stderr, "%s%s: %lld/%lld %s (%d%%), %.0f %s/s, %.1f s%s%s", tty_ ? "\r" : "",
                 label_.c_str(), (long long)done_, (long long)total_, items_.c_str(), pct, rate,
                 tokens_name_.c_str(), t, extra.c_str(), tty_ ? (final ? "\x1b[K\n" : "\x1b[K") : "\n");
    std::fflush(stderr);
}

void Progress::finish() {
    if (finished_) return;
    finished_ = true;
    if (tty_ || done_ != printed_done_) print(true);
}

void warn(const std::string& msg) {
    std::fprintf(stderr, "warning: %s\n", msg.c_str());
    std::fflush(stderr);
}

}  // namespace bioinfer::runtime
