// The confidence plot ColabFold users expect next to a prediction: per-residue pLDDT (coloured
// by AlphaFold's confidence bands) and the predicted aligned error matrix, as one PNG.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace bioinfer::bio {
struct Prediction;
}

namespace bioinfer::io {

// plddt: L values in [0, 100]; pae: L x L row-major in Angstrom (coloured over [0, max_pae]);
// chain_starts: residue indices where a new chain begins (drawn as lines). Written atomically.
void write_confidence_png(const std::string& path, const std::string& title,
                          const std::vector<float>& plddt, const std::vector<float>& pae,
                          const std::vector<int64_t>& chain_starts, float max_pae = 30.0f);
// The same plot for sample `sample` of a prediction: per-token pLDDT and PAE (which it must
// have), a line where each chain after the first starts.
void write_confidence_png(const std::string& path, const std::string& title,
                          const bio::Prediction& p, size_t sample);

}  // namespace bioinfer::io
