// The confidence plot ColabFold users expect next to a prediction: per-residue pLDDT (coloured
// by AlphaFold's confidence bands) and the predicted aligned error matrix, as one PNG.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace bioinfer::io {

// plddt: L values in [0, 100]; pae: L x L row-major in Angstrom (coloured over [0, max_pae]);
// chain_starts: residue indices where a new chain begins (drawn as lines). Written atomically.
void write_confidence_png(const std::string& path, const std::string& title,
                          const std::vector<float>& plddt, const std::vector<float>& pae,
                          const std::vector<int64_t>& chain_starts, float max_pae = 30.0f);

}  // namespace bioinfer::io
