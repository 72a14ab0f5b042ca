// RDKit helpers the ligand and SMILES standardisation code share: RDKit's error and warning logs
// captured while it works, and SMILES parsing with RDKit's own message in a one-line error.
#pragma once
#include <GraphMol/RWMol.h>
#include <GraphMol/SmilesParse/SmilesParse.h>
#include <RDGeneral/RDLog.h>

#include <cctype>
#include <exception>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>

#include "bioinfer/error.h"
#include "io/limits.h"

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

// The molecule of a SMILES parsed with `params` (RDKit's defaults sanitise it), or an error naming
// `where` with RDKit's own message (an exception's, else what it logged).
inline std::unique_ptr<RDKit::RWMol> parse_smiles(const std::string& smiles, const std::string& where,
                                                  const RDKit::SmilesParserParams& params = {}) {
    io::check_smiles_size(smiles, where);  // RDKit's parse is superlinear on huge molecules
    RdkitLogCapture logs;
    std::unique_ptr<RDKit::RWMol> mol;
    try {
        mol.reset(RDKit::SmilesToMol(smiles, params));
    } catch (const std::exception& e) {  // sanitisation: valence, kekulisation, ...
        const std::string msg = logs.text();
        fail(where, cat("invalid SMILES '", smiles, "': ", msg.empty() ? e.what() : msg));
    }
    if (!mol) {
        const std::string msg = logs.text();
        fail(where, cat("invalid SMILES '", smiles, "'", msg.empty() ? "" : ": ", msg));
    }
    return mol;
}

}  // namespace bioinfer::boltz2
