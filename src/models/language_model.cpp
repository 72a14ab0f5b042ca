// The protein language models behind `bioinfer embed` and `score`, found through the registry.
#include "models/language_model.h"

#include "models/registry.h"

namespace bioinfer::lm {

std::string detect_architecture(const io::ModelDir& dir) {
    return models::language_model_of(dir).architecture;
}

esm::Vocab vocab_of(const io::ModelDir& dir) { return models::language_model_of(dir).vocab; }

std::unique_ptr<LanguageModel> load(const io::ModelDir& dir) {
    return models::language_model_of(dir).load(dir);
}

}  // namespace bioinfer::lm
