// Architecture detection and loading for the protein language models behind `bioinfer embed`.
#include "models/language_model.h"

#include "bioinfer/error.h"
#include "models/esm2.h"
#include "models/esmc.h"

namespace bioinfer::lm {

std::string detect_architecture(const io::ModelDir& dir) {
    if (!dir.has_config()) {  // a bare torch checkpoint: known by its tensor names
        if (esm::EsmcModel::is_original_layout(dir)) return "esmc";
        fail(dir.torch_file(), "holds no config.json and is not a known state dict (ESM C's "
                               "transformer.blocks.*)");
    }
    const std::string where = dir.dir() + "/config.json";
    const std::string type = io::config_get_or<std::string>(dir.config(), "model_type", "", where);
    if (type == "esm") return "esm2";
    if (type == "esmc") return "esmc";
    fail(where, cat("model_type '", type, "' is not a supported language model (esm, esmc)"));
}

esm::Vocab vocab_of(const std::string& architecture) {
    return architecture == "esmc" ? esm::Vocab::Esmc : esm::Vocab::Esm2;
}

std::unique_ptr<LanguageModel> load(const io::ModelDir& dir) {
    const std::string arch = detect_architecture(dir);
    if (arch == "esmc") return esm::EsmcModel::load(dir);
    return esm::Esm2Model::load(dir);
}

}  // namespace bioinfer::lm
