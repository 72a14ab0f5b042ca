// Terminal: "\r" redraws at most 10 times a second, cut to the terminal's width. Plain: a line
// at most every 10 s for counts, one per stage change (at most one a second), one per failure,
// and the summary.
#include "runtime/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cmath>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "bioinfer/error.h"

namespace bioinfer::runtime {

using clk = std::chrono::steady_clock;
using nlohmann::json;

std::string format_duration(double s) {
    if (!std::isfinite(s) || s < 0) return "?";
    const long long t = (long long)std::llround(s);
    char buf[32];
    if (t >= 3600) std::snprintf(buf, sizeof buf, "%lldh%02lldm", t / 3600, (t % 3600) / 60);
    else if (t >= 60) std::snprintf(buf, sizeof buf, "%lldm%02llds", t / 60, t % 60);
    else std::snprintf(buf, sizeof buf, "%llds", t);
    return buf;
}

std::string format_bytes(int64_t b) {
    char buf[32];
    if (b >= int64_t(1) << 30) std::snprintf(buf, sizeof buf, "%.1f GB", double(b) / 1e9);
    else if (b >= int64_t(1) << 20) std::snprintf(buf, sizeof buf, "%.1f MB", double(b) / 1e6);
    else std::snprintf(buf, sizeof buf, "%lld bytes", (long long)b);
    return buf;
}

namespace {

std::string timestamp() {
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
    return buf;
}

std::string amount(int64_t v, bool bytes) { return bytes ? format_bytes(v) : std::to_string(v); }

int terminal_width() {
    winsize w{};
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 20) return w.ws_col;
    return 100;
}

}  // namespace

Progress::Progress(ProgressOptions o, int64_t total_items, int64_t total_tokens)
    : o_(std::move(o)), total_(total_items), total_tokens_(total_tokens) {
    tty_ = isatty(STDERR_FILENO);
    start_ = clk::now();
    last_draw_ = last_plain_ = last_stage_line_ = start_ - std::chrono::hours(1);
    if (!o_.log_path.empty()) {
        std::error_code ec;
        const auto dir = std::filesystem::path(o_.log_path).parent_path();
        if (!dir.empty()) std::filesystem::create_directories(dir, ec);
        log_.reset(std::fopen(o_.log_path.c_str(), "a"));
        BI_CHECK(log_ != nullptr, o_.log_path, "cannot open the log file for writing");
    }
    std::lock_guard<std::mutex> lock(mu_);
    log_locked(json{{"event", "start"}, {"total", total_}, {"total_" + o_.tokens, total_tokens_}});
}

Progress::~Progress() {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    log_locked(json{{"event", "aborted"}, {"done", done_}, {"skipped", skipped_}, {"failed", failed_}});
    if (!o_.quiet && tty_ && last_draw_ > start_) std::fprintf(stderr, "\r\x1b[K");
}

void Progress::note(const std::string& text) {
    std::lock_guard<std::mutex> lock(mu_);
    log_locked(json{{"event", "note"}, {"text", text}});
    if (o_.quiet) return;
    if (tty_) {
        std::fprintf(stderr, "\r\x1b[K%s: %s\n", o_.label.c_str(), text.c_str());
        draw_locked(false);
    } else {
        plain_line_locked(text);
    }
}

double Progress::elapsed() const {
    return std::chrono::duration<double>(clk::now() - start_).count();
}

void Progress::set_total(int64_t total_items, int64_t total_tokens) {
    std::lock_guard<std::mutex> lock(mu_);
    total_ = total_items;
    total_tokens_ = total_tokens;
}

void Progress::log_locked(json event) {
    if (!log_) return;
    json out = {{"time", timestamp()}, {"elapsed_s", std::round(elapsed() * 1000) / 1000}, {"job", o_.label}};
    out.update(event);
    std::fprintf(log_.get(), "%s\n", out.dump().c_str());
    std::fflush(log_.get());
}

std::string Progress::counts_locked() const {
    const int64_t finished = done_ + skipped_ + failed_;
    std::string s = cat(finished, "/", total_, " ", o_.items);
    if (skipped_) s += cat(", ", skipped_, " skipped");
    if (failed_) s += cat(", ", failed_, " failed");
    const double t = elapsed();
    const int64_t work = tokens_ - skipped_tokens_;
    if (t > 0 && work > 0) {
        const double rate = double(work) / t;
        s += o_.bytes ? cat(", ", amount(int64_t(rate), true), "/s") : cat(", ", int64_t(rate), " ", o_.tokens, "/s");
        double eta = -1;
        if (total_tokens_ > 0) eta = double(std::max<int64_t>(0, total_tokens_ - tokens_)) / rate;
        else if (done_ > 0) eta = t / double(done_) * double(std::max<int64_t>(0, total_ - finished));
        if (eta >= 0 && finished < total_) s += ", ETA " + format_duration(eta);
    }
    return s;
}

void Progress::plain_line_locked(const std::string& text) {
    std::fprintf(stderr, "%s %s: %s\n", timestamp().c_str(), o_.label.c_str(), text.c_str());
    std::fflush(stderr);
    last_plain_ = clk::now();
}

void Progress::draw_locked(bool final) {
    if (o_.quiet || !tty_) return;
    last_draw_ = clk::now();
    const int64_t finished = done_ + skipped_ + failed_;
    const double frac = total_tokens_ > 0 ? double(tokens_) / double(total_tokens_)
                        : total_ > 0      ? double(finished) / double(total_)
                                          : 1.0;
    constexpr int kBar = 24;
    const int fill = int(std::min(1.0, std::max(0.0, frac)) * kBar);
    std::string line = o_.label + " [" + std::string(size_t(fill), '#') + std::string(size_t(kBar - fill), '.') +
                       "] " + counts_locked() + cat(", ", format_duration(elapsed()));
    if (!final)
        for (const auto& [w, d] : doing_) line += " | " + d;
    const size_t width = size_t(terminal_width()) - 1;
    if (line.size() > width) line = line.substr(0, width);
    // "\x1b[K" clears what a longer previous line left
    std::fprintf(stderr, "\r%s\x1b[K%s", line.c_str(), final ? "\n" : "");
    std::fflush(stderr);
}

void Progress::stage(const std::string& target, const std::string& stage, int worker, bool plain_line) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string d = target + ": " + stage;
    if (doing_[worker] == d) return;
    doing_[worker] = d;
    log_locked(json{{"event", "stage"}, {"target", target}, {"stage", stage}, {"worker", worker}});
    if (o_.quiet) return;
    if (tty_) {
        if (std::chrono::duration<double>(clk::now() - last_draw_).count() >= 0.1) draw_locked(false);
    } else if (plain_line && std::chrono::duration<double>(clk::now() - last_stage_line_).count() >= 1.0) {
        plain_line_locked(counts_locked() + (doing_.size() > 1 ? cat(", worker ", worker) : "") + ": " + d);
        last_stage_line_ = last_plain_;
    }
}

void Progress::tokens(int64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    tokens_ += n;
    if (o_.quiet) return;
    const double since_draw = std::chrono::duration<double>(clk::now() - last_draw_).count();
    if (tty_ && since_draw >= 0.1) draw_locked(false);
    if (!tty_ && std::chrono::duration<double>(clk::now() - last_plain_).count() >= 10.0)
        plain_line_locked(cat(counts_locked(), ", ", amount(tokens_, o_.bytes), " ",
                              o_.bytes ? "done" : o_.tokens));
}

void Progress::done(const std::string& target, int64_t tokens, double seconds, int worker) {
    std::lock_guard<std::mutex> lock(mu_);
    ++done_;
    tokens_ += tokens;
    doing_.erase(worker);
    log_locked(json{{"event", "done"}, {"target", target}, {o_.tokens, tokens}, {"seconds", seconds},
                    {"worker", worker}});
    if (o_.quiet) return;
    if (tty_) {
        if (std::chrono::duration<double>(clk::now() - last_draw_).count() >= 0.1 ||
            done_ + skipped_ + failed_ == total_)
            draw_locked(false);
    } else if (std::chrono::duration<double>(clk::now() - last_plain_).count() >= 10.0) {
        plain_line_locked(counts_locked());
    }
}

void Progress::skipped(const std::string& target, int64_t tokens) {
    std::lock_guard<std::mutex> lock(mu_);
    ++skipped_;
    tokens_ += tokens;
    skipped_tokens_ += tokens;
    log_locked(json{{"event", "skipped"}, {"target", target}, {o_.tokens, tokens}});
}

void Progress::failed(const std::string& target, const std::string& error, int64_t tokens, int worker) {
    std::lock_guard<std::mutex> lock(mu_);
    ++failed_;
    tokens_ += tokens;
    skipped_tokens_ += tokens;  // no work was done for them: keep them out of the rate
    doing_.erase(worker);
    log_locked(json{{"event", "failed"}, {"target", target}, {"error", error}, {"worker", worker}});
    if (o_.quiet) return;
    if (tty_) std::fprintf(stderr, "\r\x1b[K");
    if (tty_) std::fprintf(stderr, "failed: %s: %s\n", target.c_str(), error.c_str());
    else plain_line_locked("failed: " + target + ": " + error);
    std::fflush(stderr);
    if (tty_) draw_locked(false);
}

void Progress::finish() {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    finished_ = true;
    doing_.clear();
    log_locked(json{{"event", "finish"}, {"done", done_}, {"skipped", skipped_}, {"failed", failed_},
                    {"total", total_}, {"seconds", elapsed()}});
    if (o_.quiet) return;
    if (tty_) draw_locked(true);
    else plain_line_locked(cat(counts_locked(), " in ", format_duration(elapsed())));
}

void warn(const std::string& msg) {
    std::fprintf(stderr, "warning: %s\n", msg.c_str());
    std::fflush(stderr);
}

}  // namespace bioinfer::runtime
