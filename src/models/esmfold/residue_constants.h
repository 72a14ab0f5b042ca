// AlphaFold's residue constants as ESMFold uses them: residue and atom names, the atom14/atom37
// layouts, and the rigid groups (default frames, literature atom positions) that turn torsion
// angles into atoms. Index 20 is the unknown residue X (UNK), which has no atoms.
#pragma once
#include <cstdint>

namespace bioinfer::esmfold::rc {

constexpr int kNumRestypes = 21;  // 20 amino acids in AlphaFold order, then X
constexpr int kNumAtom14 = 14, kNumAtom37 = 37, kNumGroups = 8;

extern const char kRestypes[21];              // "ARNDCQEGHILKMFPSTWYV" (+ NUL)
extern const char* const kResnames[21];       // three-letter names, UNK last
extern const char* const kAtomTypes[37];      // atom37 names: N, CA, C, CB, O, ...
extern const char* const kAtom14Names[21][14];  // "" where a residue has fewer atoms
extern const int8_t kAtom14ToAtom37[21][14];
extern const int8_t kAtom37ToAtom14[21][37];
extern const float kAtom37Mask[21][37];
extern const int8_t kAtom14ToGroup[21][14];   // rigid group of each atom14 slot
extern const float kAtom14Mask[21][14];
extern const float kAtom14GroupPositions[21][14][3];  // in the atom's group frame (Angstrom)
extern const float kDefaultFrames[21][8][4][4];       // group frame -> backbone, homogeneous

// AlphaFold residue index of a one-letter code (upper case); 20 (X) for anything else.
int restype_index(char c);

}  // namespace bioinfer::esmfold::rc
