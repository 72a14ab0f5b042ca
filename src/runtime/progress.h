// Progress for long runs: a self-updating line on a terminal, plain log lines otherwise.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace bioinfer::runtime {

class Progress {
public:
    Progress(std::string label, int64_t total_items, bool quiet = false);
    void advance(int64_t items, int64_t tokens);
    void finish();
    double elapsed() const;

private:
    void print(bool final);
    std::string label_;
    int64_t total_ = 0, done_ = 0, tokens_ = 0;
    bool tty_ = false, quiet_ = false, finished_ = false;
    std::chrono::steady_clock::time_point start_, last_print_;
};

// A warning line on stderr ("warning: ...").
void warn(const std::string& msg);

}  // namespace bioinfer::runtime
