// The inputs every job takes: a FASTA file, a folder of FASTA files, or a bare sequence, checked
// for empty and duplicate records before any work starts.
#pragma once
#include <string>
#include <vector>

#include "io/fasta.h"

namespace bioinfer::runtime {

// INPUT: a FASTA file, a folder of FASTA files (*.fa, *.fasta, *.faa, *.fas, sorted by name), or
// a bare sequence (letters, '<mask>'-style tokens, ':' between chains). Errors name the record:
// an empty sequence, a duplicate id, two ids that map to one output file name.
std::vector<io::FastaRecord> collect_fasta(const std::string& input);

// File name for a record id: '/', NUL and leading dots replaced so it stays inside out_dir.
std::string safe_file_stem(const std::string& id);

}  // namespace bioinfer::runtime
