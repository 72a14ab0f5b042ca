// Terminal: "\r" updates at most 10 times a second. Not a terminal: a line at most every 5 s.
#include "runtime/progress.h"

#include <unistd.h>

#include <cstdio>

namespace bioinfer::runtime {

using clk = std::chrono::steady_clock;

Progress::Progress(std::string label, int64_t total_items, bool quiet)
    : label_(std::move(label)), total_(total_items), quiet_(quiet) {
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

void Progress::print(bool final) {
    if (quiet_) return;
    last_print_ = clk::now();
    const double t = elapsed();
    const double rate = t > 0 ? double(tokens_) / t : 0.0;
    const int pct = total_ > 0 ? int(100.0 * double(done_) / double(total_)) : 100;
    if (tty_) {
        std::fprintf(stderr, "\r%s: %lld/%lld sequences (%d%%), %.0f tokens/s, %.1f s%s",
                     label_.c_str(), (long long)done_, (long long)total_, pct, rate, t,
                     final ? "\n" : "");
    } else {
        std::fprintf(stderr, "%s: %lld/%lld sequences (%d%%), %.0f tokens/s, %.1f s\n",
                     label_.c_str(), (long long)done_, (long long)total_, pct, rate, t);
    }
    std::fflush(stderr);
}

void Progress::finish() {
    if (finished_) return;
    finished_ = true;
    if (tty_) print(true);
    else if (done_ != total_ || std::chrono::duration<double>(clk::now() - last_print_).count() > 0)
        print(true);
}

void warn(const std::string& msg) {
    std::fprintf(stderr, "warning: %s\n", msg.c_str());
    std::fflush(stderr);
}

}  // namespace bioinfer::runtime
