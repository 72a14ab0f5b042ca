// FASTA reading: records with id (first word of the header), description and sequence.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace bioinfer::io {

struct FastaRecord {
    std::string id;           // first whitespace-delimited word after '>'
    std::string description;  // the whole header line after '>'
    std::string sequence;     // lines joined, whitespace removed, a trailing '*' dropped
    std::string source;       // file the record came from
    int line = 0;             // header line number (1-based)
};

// Errors (naming source and line): data before the first header, an empty id, an empty record.
std::vector<FastaRecord> parse_fasta(std::string_view text, const std::string& source);
std::vector<FastaRecord> read_fasta(const std::string& path);

}  // namespace bioinfer::io
