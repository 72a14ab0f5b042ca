// Progress of long runs (embedding, folding, downloads), shown three ways:
//  - on a terminal: one live line, redrawn in place: a bar, counts, rate, ETA and what each
//    worker is doing ("T1042 (256 aa): trunk pass 2/4");
//  - otherwise (a log, a batch job): plain timestamped lines, a few per minute, plus every
//    stage change, failure and the summary;
//  - --log FILE: every event as one JSON object per line, whatever the two above do.
// Thread-safe: workers report concurrently.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

namespace bioinfer::runtime {

struct ProgressOptions {
    std::string label;               // "embed", "predict", "download facebook/esmfold_v1"
    std::string items = "sequences";  // what is counted
    std::string tokens = "tokens";    // the work inside items, for the rate and the ETA
    bool bytes = false;               // tokens are bytes: shown as MB, MB/s
    bool quiet = false;               // no display (the log file is still written)
    std::string log_path;             // JSON lines; empty: none
};

class Progress {
public:
    // total_tokens: the work ahead, for the ETA (0: ETA from item counts).
    Progress(ProgressOptions o, int64_t total_items, int64_t total_tokens = 0);
    ~Progress();
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;

    void set_total(int64_t total_items, int64_t total_tokens);
    // What `worker` is doing now: target and stage ("loading", "language model", "trunk pass
    // 2/4", "structure module", "writing").
    // plain_line=false: shown on a terminal and logged, but no plain line (loading weights: its
    // line comes with note() once it is done, so a failed load leaves only the error).
    void stage(const std::string& target, const std::string& stage, int worker = 0, bool plain_line = true);
    // A message: a plain line (above the live line on a terminal) and a log event.
    void note(const std::string& text);
    // Work done inside the current item (downloaded bytes), before it completes.
    void tokens(int64_t n);
    void done(const std::string& target, int64_t tokens, double seconds, int worker = 0);
    void skipped(const std::string& target, int64_t tokens);
    void failed(const std::string& target, const std::string& error, int64_t tokens, int worker = 0);
    // The summary line (and the terminal line's final state). Without it (an error ended the
    // run), the destructor only closes the terminal line and logs "aborted".
    void finish();
    double elapsed() const;

private:
    void draw_locked(bool final);
    void plain_line_locked(const std::string& text);
    void log_locked(nlohmann::json event);
    std::string counts_locked() const;
    ProgressOptions o_;
    std::mutex mu_;
    int64_t total_ = 0, total_tokens_ = 0, done_ = 0, skipped_ = 0, failed_ = 0;
    int64_t tokens_ = 0, skipped_tokens_ = 0;
    std::map<int, std::string> doing_;  // worker -> "target: stage"
    bool tty_ = false, finished_ = false;
    std::chrono::steady_clock::time_point start_, last_draw_, last_plain_, last_stage_line_;
    std::unique_ptr<FILE, int (*)(FILE*)> log_{nullptr, std::fclose};
};

// A warning line on stderr ("warning: ...").
void warn(const std::string& msg);
// "1h02m", "4m05s", "12s".
std::string format_duration(double seconds);
// "8.4 GB", "31.4 MB", "512 bytes".
std::string format_bytes(int64_t bytes);

}  // namespace bioinfer::runtime
