// FASTA parser: tolerant of CRLF, blank lines and wrapped sequences; strict about structure.
#include "io/fasta.h"

#include <cctype>

#include "bioinfer/error.h"
#include "io/atomic_file.h"
#include "io/limits.h"

namespace bioinfer::io {

std::vector<FastaRecord> parse_fasta(std::string_view text, const std::string& source) {
    std::vector<FastaRecord> out;
    int lineno = 0;
    size_t pos = 0;
    auto finish = [&]() {
        if (out.empty()) return;
        FastaRecord& r = out.back();
        if (!r.sequence.empty() && r.sequence.back() == '*') r.sequence.pop_back();
        BI_CHECK(!r.sequence.empty(), cat(source, ":", r.line), "record '", r.id,
                 "' has an empty sequence");
    };
    while (pos <= text.size()) {
        size_t nl = text.find('\n', pos);
        if (nl == std::string_view::npos) nl = text.size();
        std::string_view line = text.substr(pos, nl - pos);
        pos = nl + 1;
        ++lineno;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty()) {
            if (nl == text.size()) break;
            continue;
        }
        if (line[0] == '>') {
            finish();
            FastaRecord r;
            r.description = std::string(line.substr(1));
            size_t b = 0;
            while (b < r.description.size() && std::isspace((unsigned char)r.description[b])) ++b;
            size_t e = b;
            while (e < r.description.size() && !std::isspace((unsigned char)r.description[e])) ++e;
            r.id = r.description.substr(b, e - b);
            r.source = source;
            r.line = lineno;
            BI_CHECK(!r.id.empty(), cat(source, ":", lineno), "record header has no id");
            BI_CHECK(int64_t(out.size()) < input_limits().records, cat(source, ":", lineno),
                     "more than ", input_limits().records,
                     " records in one file (--max-records raises it; or split the file)");
            out.push_back(std::move(r));
        } else if (line[0] == ';') {
            continue;  // old-style comment line
        } else {
            BI_CHECK(!out.empty(), cat(source, ":", lineno),
                     "sequence data before the first '>' header: not a FASTA file?");
            for (char c : line)
                if (!std::isspace((unsigned char)c)) out.back().sequence.push_back(c);
        }
        if (nl == text.size()) break;
    }
    finish();
    BI_CHECK(!out.empty(), source, "no FASTA records found");
    return out;
}

std::vector<FastaRecord> read_fasta(const std::string& path) {
    return parse_fasta(read_input_file(path), path);
}

}  // namespace bioinfer::io
