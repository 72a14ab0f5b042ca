// config.json (and a Boltz-2 checkpoint's hyper_parameters) interpreted per model: the
// architecture detected and the model built as far as the first tensor it reads (none given).
#include <nlohmann/json.hpp>

#include "fuzz_target.h"
#include "io/model_dir.h"
#include "models/boltz2/config.h"
#include "models/language_model.h"
#include "models/structure_model.h"

using namespace bioinfer;

BIOINFER_FUZZ_TARGET(config) {
    const nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return;  // not JSON: the JSON library's own domain
    const io::ModelDir dir = io::ModelDir::from_tensors("config.json", j, {});
    attempt([&] { lm::load(dir); });
    attempt([&] { fold::load_spec(dir); });
    attempt([&] { fold::load(dir); });
    attempt([&] { boltz2::Config::load(dir); });
}
