// The ESM alphabet (fair-esm "ESM-1b", 33 tokens) shared by ESM-2, ESMFold and ESM C, and its
// tokenizer. ESM C puts the chain break '|' where ESM-2 has <null_1> (31).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace bioinfer::esm {

constexpr int32_t kCls = 0, kPad = 1, kEos = 2, kUnk = 3, kChainBreak = 31, kMask = 32;
constexpr int kVocab = 33;

enum class Vocab { Esm2, Esmc };

const std::vector<std::string>& alphabet(Vocab v = Vocab::Esm2);

// Residue tokens of `seq` (no <cls>/<eos>). Letters are upper-cased; special tokens written as
// <mask>, <unk>, ... are recognised. An unknown letter is an error naming `record` and position;
// so is an ESM C record of chain breaks ('|') alone.
std::vector<int32_t> tokenize(const std::string& seq, const std::string& record,
                              Vocab v = Vocab::Esm2);

// One model input row: <cls> residues... <eos> (both ESM alphabets share these ids).
std::vector<int32_t> with_specials(const std::vector<int32_t>& residues);

}  // namespace bioinfer::esm
