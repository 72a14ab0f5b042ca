// RDKit's error and warning logs captured while RDKit works, so its messages become part of
// bioinfer's one-line errors instead of timestamped lines on stderr (the ligand and SMILES
// standardisation code share it).
#pragma once
#include <RDGeneral/RDLog.h>

#include <cctype>
#include <mutex>
#include <sstream>
#include <string>

namespace bioinfer::boltz2 {

// RDKit reports parse and sanitisation problems on its error log (and some also as exceptions).
// While one is alive, the error and warning logs go to a buffer, so the message can be put into
// bioinfer's error instead of RDKit's timestamped lines on stderr. RDKit's logs are process-wide,
// hence the lock (recursive: a capture may open inside another).
class RdkitLogCapture {
  public:
    RdkitLogCapture() : lock_(mutex()) {
        if (!rdErrorLog || !rdWarningLog) RDLog::InitLogs();
        old_err_ = rdErrorLog->dp_dest;
        old_warn_ = rdWarningLog->dp_dest;
        rdErrorLog->dp_dest = &buf_;
        rdWarningLog->dp_dest = &sink_;
    }
    ~RdkitLogCapture() {
        rdErrorLog->dp_dest = old_err_;
        rdWarningLog->dp_dest = old_warn_;
    }
    RdkitLogCapture(const RdkitLogCapture&) = delete;
    RdkitLogCapture& operator=(const RdkitLogCapture&) = delete;

    // The captured lines without RDKit's "[hh:mm:ss] " prefixes, joined by "; ".
    std::string text() const {
        std::istringstream in(buf_.str());
        std::string line, out;
        while (std::getline(in, line)) {
            if (line.size() > 11 && line[0] == '[' && line[9] == ']') line = line.substr(11);
            while (!line.empty() && std::isspace((unsigned char)line.back())) line.pop_back();
            if (line.empty()) continue;
            out += (out.empty() ? "" : "; ") + line;
        }
        return out;
    }

  private:
    static std::recursive_mutex& mutex() {
        static std::recursive_mutex m;
        return m;
    }
    std::lock_guard<std::recursive_mutex> lock_;
    std::ostringstream buf_, sink_;
    std::ostream* old_err_ = nullptr;
    std::ostream* old_warn_ = nullptr;
};

}  // namespace bioinfer::boltz2
