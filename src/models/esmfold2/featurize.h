// ESMFold2's protein featurizer (transformers' protein_utils.prepare_protein_features, extended to
// several chains as the esm package's builder lays them out): one token per residue, each
// residue's heavy atoms with the reference conformer's coordinates as they are (no centring, no
// motion), element, formal charge, name characters and residue uid; atoms padded to a multiple
// of 32; a single-sequence MSA (the query row).
#pragma once
#include <array>
#include <string>
#include <vector>
#include "io/msa.h"

#include "models/esmfold2/trunk.h"

namespace bioinfer::esmfold2 {

struct ProteinAtom {
    const char* name;
    char element;  // first letter of the name: C, N, O, S
    int charge;    // +1 on LYS NZ, ARG NH2, HIS ND1
    std::array<float, 3> pos;
};
struct ProteinResidue {
    const char* name;  // "ALA", ..., "UNK"
    int esm_token;     // ESM C's token (UNK: <unk>)
    std::vector<ProteinAtom> atoms;
    // bio's (bio/residues.h): the one-letter code ('X' for UNK) and boltz's 33-class token id
    // (ALA 2 ... VAL 21, UNK 22)
    char letter = 'X';
    int res_type = 0;
};
// The 20 amino acids and UNK, each with its bio letter and token id.
const std::vector<ProteinResidue>& protein_residues();
// The same without them (generated: protein_data.cpp).
std::vector<ProteinResidue> protein_residue_table();

// The inputs of protein chains (upper-case one-letter codes; letters outside the 20 amino acids
// are UNK, whose atoms N, CA, C, O sit at the origin as the reference's table has them).
// Chains: residue numbers restart per chain, token numbers and uids run over the target;
// identical sequences are copies of one entity (entity by first appearance, sym_id the copy).
Inputs featurize(const std::vector<std::string>& chains, const std::string& where);

// MSA rows ESMFold2 reads by default: the official model's msa_max_depth.
constexpr int64_t kMsaMaxRows = 1024;

// Replaces the single-sequence MSA with the chains' alignments (null: that chain's own sequence),
// as the esm package's ESMFold2 builder lays them out: rows grouped by the headers' pairing keys
// (a key seen more than once; groups touching the most chains first; shorter groups cycled, the
// chains outside a group taking their next unpaired row), up to 8192 rows with the query, then
// the unpaired rows of every chain side by side (gaps where a chain has run out), up to 16384.
// A token reads its residue's column (the last column past the alignment's end). Features: the
// residue classes (A-V as the residue vocabulary, '-' 1, other letters 22), has_deletion,
// deletion_value = pi/2 atan(d / 3) and its mean over the rows (the esm package's transform).
// The first max_rows rows are kept (the query row first): the official model reads at most 1024
// rows per loop (a random subset, redrawn each loop); transformers' port reads them all.
void attach_msas(Inputs& in, const std::vector<const bio::Msa*>& per_chain, const std::string& where,
                 int64_t max_rows = kMsaMaxRows);

}  // namespace bioinfer::esmfold2
