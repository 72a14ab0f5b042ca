// Progress for long runs: a self-updating line on a terminal, plain log lines otherwise.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace bioinfer::runtime {

class Progress {
public:
    // items / tokens: what is counted ("sequences" and "tokens" for embeddings, "targets" and
    // "residues" for structures).
    Progress(std::string label, int64_t total_items, bool quiet = false,
             std::string items = "sequences", std::string tokens = "tokens");
    void advance(int64_t items, int64_t tokens);
    // What the current item is doing ("T1042 (256 aa): trunk pass 2/4"); shown after the counts,
    // a plain line each time when stderr is not a terminal.
    void detail(std::string text);
    void finish();
    double elapsed() const;

private:
    void print(bool final);
    std::string label_, items_, tokens_name_, detail_;
    int64_t total_ = 0, done_ = 0, tokens_ = 0, printed_done_ = -1;
    bool tty_ = false, quiet_ = false, finished_ = false;
    std::chrono::steady_clock::time_point start_, last_print_;
};

// A warning line on stderr ("warning: ...").
void warn(const std::string& msg);

}  // namespace bioinfer::runtime
