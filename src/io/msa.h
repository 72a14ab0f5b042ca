// Multiple sequence alignments (bio::Msa) read as boltz reads them: .a3m (one sequence per line,
// lower case = insertions) and boltz's .csv (columns `key,sequence`; the key is the pairing
// taxonomy); and as the esm package reads a3m files.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "bio/msa.h"

namespace bioinfer::io {

// boltz's parse rules (boltz/data/parse/a3m.py, csv.py): blank lines and '#' lines are skipped;
// every non-header a3m line is one sequence (no line wrapping); a row is dropped when its
// gap-stripped, upper-cased text (insertions included) was seen before; reading stops after
// max_seqs kept rows (max_seqs <= 0: no limit). Stricter than boltz: a character other than
// A-Z, a-z and '-', a row whose column count differs from the first row's, a CSV key that is not
// an integer, and an MSA without rows are errors naming the file and line.
bio::Msa parse_a3m(std::string_view text, const std::string& source, int64_t max_seqs);
bio::Msa parse_msa_csv(std::string_view text, const std::string& source, int64_t max_seqs);
// The esm package's a3m rules (ESMFold2's MSA.from_a3m): a record's sequence lines are joined;
// every row is kept (no dedup); lower-case letters and '.' are insertions; the pairing key is
// the header's first "key=N" (-1 when none). Blank and '#' lines are skipped; stricter checks as
// above (letters, equal column counts, at least one row).
bio::Msa parse_a3m_esm(std::string_view text, const std::string& source, int64_t max_seqs);
// By extension, .a3m or .csv (as boltz: anything else is refused).
bio::Msa read_msa(const std::string& path, int64_t max_seqs);

}  // namespace bioinfer::io
