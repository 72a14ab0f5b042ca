// boltz's AffinityCropper (boltz 2.2.1 data/crop/affinity.py): the tokens of a predicted complex
// the affinity stage keeps around the binder ligand.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace bioinfer::boltz2 {

// A token as boltz's AffinityCropper sees it (a predicted structure's token table).
struct CropToken {
    int asym_id = 0, res_idx = 0, mol_type = 0;
    bool binder = false;            // affinity_mask
    std::array<float, 3> center{};  // the token's center atom (the atom itself for a ligand atom)
    int64_t atoms = 0;
};
struct CropLimits {
    int64_t max_tokens = 256, max_atoms = 2048;
    int64_t neighborhood = 10;   // tokens a neighbourhood grows to around each picked token
    int64_t max_receptor = 200;  // tokens other than ligands'
};
// boltz's AffinityCropper: tokens by their distance to the nearest binder token (float32, ties by
// index where numpy's unstable sort leaves them to chance); each one's chain whole when it has at
// most `neighborhood` tokens, else the smallest window of residues around it holding that many;
// stop at the first neighbourhood that would pass a limit. The kept token indices, sorted.
std::vector<int64_t> affinity_crop(const std::vector<CropToken>& tokens,
                                   const CropLimits& limits = {});

}  // namespace bioinfer::boltz2
