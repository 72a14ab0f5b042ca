// The inputs every job takes: a FASTA file, a folder of FASTA files, or a bare sequence, checked
// for empty and duplicate records before any work starts. A bad record does not stop the others:
// it carries its error and is reported as failed.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

#include "io/fasta.h"

namespace bioinfer::runtime {

struct InputRecord : io::FastaRecord {
    std::string error;  // why the record cannot run ("" when it can), naming it
};

// INPUT: a FASTA file, a folder of FASTA files (*.fa, *.fasta, *.faa, *.fas, sorted by name), or
// a bare sequence (letters, '<mask>'-style tokens, ':' between chains). Records that cannot run
// carry an error: an empty sequence, a duplicate id, two ids that map to one output file name, and
// in a folder a file that is not valid FASTA (one record named after the file). Errors that stop
// the run: INPUT missing, an empty folder, a single file that is not valid FASTA.
std::vector<InputRecord> collect_fasta(const std::string& input);

// Stops the run (error naming the first bad record) when no record can run; otherwise warns
// nothing here: the bad ones are reported as failed targets.
template <typename R>
void require_some_valid(const std::vector<R>& records);

// File name for a record id: '/', NUL and leading dots replaced so it stays inside out_dir.
std::string safe_file_stem(const std::string& id);

template <typename R>
void require_some_valid(const std::vector<R>& records) {
    size_t bad = 0;
    const R* first = nullptr;
    for (const auto& r : records)
        if (!r.error.empty()) {
            ++bad;
            if (!first) first = &r;
        }
    if (first && bad == records.size())
        throw std::runtime_error(bad == 1 ? first->error
                                          : first->error + " (and " + std::to_string(bad - 1) +
                                                " more records that cannot run)");
}

}  // namespace bioinfer::runtime
