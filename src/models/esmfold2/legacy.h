// ESMFold2's research checkpoint layout (biohub/ESMFold2 and -Fast before transformers shipped the
// model): a trunk-only model.safetensors under a nested config.json ("type": "release", d_pair,
// ...), with the ESM C 6B tower stored apart in TransformerEngine names (biohub/ESMC-6B). It is
// read as the transformers layout the rest of ESMFold2 loads: config fields mapped, trunk keys
// renamed, fused q/k/v and k/v rows split, the conditioning transitions' a/b projections joined,
// the tower's fused q/k/v and gate/up rows split, as transformers' conversion does. Tensors stay
// views of the mapped files, except the joined transitions.
#pragma once
#include <string>

#include "io/model_dir.h"

namespace bioinfer::esmfold2 {

// True for the research layout: a config with "type" and "d_pair" and no model_type.
bool is_legacy_layout(const io::ModelDir& dir);

// The research config as transformers' EsmFold2Config (the tower's config, and widths the config
// lacks, read from the tensors' headers; no tensor is mapped).
nlohmann::json legacy_config(const io::ModelDir& dir);

// The research checkpoint in `dir` as the transformers layout. The tower is read from
// `dir`/esmc (biohub/ESMC-6B's config.json and safetensors shards). Errors name the file and key.
io::ModelDir from_legacy(const io::ModelDir& dir);

}  // namespace bioinfer::esmfold2
