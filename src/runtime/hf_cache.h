// Finds a model already in the local Hugging Face hub cache by name (no network).
#pragma once
#include <string>
#include <vector>

namespace bioinfer::runtime {

// The released ESM-2 checkpoints (facebook/<name>).
const std::vector<std::string>& known_esm2_models();

// "esm2_t33_650M_UR50D" or "facebook/esm2_t33_650M_UR50D" -> the snapshot directory in
// $HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub. Error when not cached.
std::string resolve_cached_model(const std::string& name);

}  // namespace bioinfer::runtime
