// The ESM-2 / ESMFold alphabet (fair-esm "ESM-1b" alphabet, 33 tokens) and its tokenizer.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace bioinfer::esm {

constexpr int32_t kCls = 0, kPad = 1, kEos = 2, kUnk = 3, kMask = 32;
constexpr int kVocab = 33;

const std::vector<std::string>& alphabet();

// Residue tokens of `seq` (no <cls>/<eos>). Letters are upper-cased; special tokens written as
// <mask>, <unk>, ... are recognised. An unknown letter is an error naming `record` and position.
std::vector<int32_t> tokenize(const std::string& seq, const std::string& record);

}  // namespace bioinfer::esm
