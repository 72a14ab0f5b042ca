// AlphaFold's residue constants as ESMFold uses them: atom names, the atom14/atom37 layouts, and
// the rigid groups (default frames, literature atom positions) that turn torsion angles into
// atoms. Residues are indexed in AlphaFold's order (bio::kAminoAcidLetters, bio::amino_acid_index);
// index 20 is the unknown residue X (UNK), which has no atoms.
#pragma once
#include <cstdint>

#include "bio/residues.h"

namespace bioinfer::esmfold::rc {

constexpr int kNumRestypes = bio::kNumAminoAcids + 1;  // 20 amino acids in AlphaFold order, then X
constexpr int kNumAtom14 = 14, kNumAtom37 = 37, kNumGroups = 8;

inline constexpr auto& kAtomTypes = bio::kAtom37Names;  // atom37 names: N, CA, C, CB, O, ...
extern const char* const kAtom14Names[21][14];  // "" where a residue has fewer atoms
extern const int8_t kAtom14ToAtom37[21][14];
extern const int8_t kAtom37ToAtom14[21][37];
extern const float kAtom37Mask[21][37];
extern const int8_t kAtom14ToGroup[21][14];   // rigid group of each atom14 slot
extern const float kAtom14Mask[21][14];
extern const float kAtom14GroupPositions[21][14][3];  // in the atom's group frame (Angstrom)
extern const float kDefaultFrames[21][8][4][4];       // group frame -> backbone, homogeneous

}  // namespace bioinfer::esmfold::rc
