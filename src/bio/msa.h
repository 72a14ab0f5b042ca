// A multiple sequence alignment as the models read it: aligned rows of one-letter codes with
// their insertions and pairing keys (io/msa.h reads the a3m and CSV files).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace bioinfer::bio {

struct MsaRow {
    std::string residues;  // aligned columns: upper-case letters and '-', one per query residue
    // (column index, count) for each run of insertions (lower-case letters) before that column
    std::vector<std::pair<int32_t, int32_t>> deletions;
    int64_t taxonomy = -1;  // pairing key (CSV `key`), -1 when none
    int line = 0;           // 1-based line in the file
};

struct Msa {
    std::string source;
    std::vector<MsaRow> rows;  // row 0 is the query
};

}  // namespace bioinfer::bio
