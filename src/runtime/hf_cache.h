// Finds a model already in the local Hugging Face hub cache by name (no network).
#pragma once
#include <string>
#include <vector>

namespace bioinfer::runtime {

struct KnownModel {
    std::string name;                // what --model accepts
    std::vector<std::string> repos;  // Hugging Face repositories holding it, preferred first
};

// The released checkpoints bioinfer runs: ESM-2 (facebook/<name>), ESM C (the transformers
// layout under biohub/, the esm package's .pth under EvolutionaryScale/) and ESMFold
// (facebook/esmfold_v1, as "esmfold").
const std::vector<KnownModel>& known_models();

// "esm2_t33_650M_UR50D", "esmc-300m" or an "org/name" repository id -> the snapshot directory in
// $HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub. Error when not cached.
std::string resolve_cached_model(const std::string& name);

}  // namespace bioinfer::runtime
