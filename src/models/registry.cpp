// The model rows (see registry.h). A checkpoint is recognised by its config or its tensor names,
// never by its folder's name.
#include "models/registry.h"

#include "bioinfer/error.h"
#include "models/boltz2/boltz2_structure.h"
#include "models/boltz2/names.h"
#include "models/esm2.h"
#include "models/esmc.h"
#include "models/esmfold/esmfold_structure.h"
#include "models/esmfold2/esmfold2.h"
#include "models/esmfold2/legacy.h"

namespace bioinfer::models {
namespace {

std::string config_where(const io::ModelDir& dir) {
    return dir.has_config() ? dir.dir() + "/config.json" : dir.dir();
}

std::string model_type(const io::ModelDir& dir) {
    return io::config_get_or<std::string>(dir.config(), "model_type", "", config_where(dir));
}

// ---- language models ----

bool is_esm2(const io::ModelDir& dir) { return dir.has_config() && model_type(dir) == "esm"; }

bool is_esmc(const io::ModelDir& dir) {
    return dir.has_config() ? model_type(dir) == "esmc" : esm::EsmcModel::is_original_layout(dir);
}

std::unique_ptr<lm::LanguageModel> load_esm2(const io::ModelDir& dir) {
    return esm::Esm2Model::load(dir);
}

std::unique_ptr<lm::LanguageModel> load_esmc(const io::ModelDir& dir) {
    return esm::EsmcModel::load(dir);
}

// ---- structure models ----

bool is_esmfold(const io::ModelDir& dir) {
    return io::config_get_or<bool>(dir.config(), "is_folding_model", false, config_where(dir));
}

std::unique_ptr<fold::ModelSpec> esmfold_spec(const io::ModelDir& dir) {
    return std::make_unique<esmfold::EsmFoldSpec>(
        esmfold::EsmFoldConfig::from_json(dir.config(), dir.dir() + "/config.json"));
}

std::unique_ptr<fold::StructureModel> load_esmfold(const io::ModelDir& dir) {
    return esmfold::EsmFoldStructureModel::load(dir);
}

bool is_esmfold2(const io::ModelDir& dir) {
    return model_type(dir) == "esmfold2" || esmfold2::is_legacy_layout(dir);
}

std::unique_ptr<fold::ModelSpec> esmfold2_spec(const io::ModelDir& dir) {
    return std::make_unique<esmfold2::EsmFold2Spec>(esmfold2::Config::from_json(
        esmfold2::is_legacy_layout(dir) ? esmfold2::legacy_config(dir) : dir.config(),
        dir.dir() + "/config.json"));
}

std::unique_ptr<fold::StructureModel> load_esmfold2(const io::ModelDir& dir) {
    // the research layout (a trunk checkpoint and a separate ESM C) read as the transformers one
    if (esmfold2::is_legacy_layout(dir))
        return esmfold2::EsmFold2StructureModel::load(esmfold2::from_legacy(dir));
    return esmfold2::EsmFold2StructureModel::load(dir);
}

// a Lightning checkpoint whose state_dict holds the pairformer trunk
bool is_boltz2(const io::ModelDir& dir) {
    return dir.has("pairformer_module.layers.0.tri_mul_out.p_in.weight");
}

std::unique_ptr<fold::ModelSpec> boltz2_spec(const io::ModelDir& dir) {
    return std::make_unique<boltz2::Boltz2Spec>(boltz2::Config::load(dir), boltz2::mols_dir_of(dir));
}

std::unique_ptr<fold::StructureModel> load_boltz2(const io::ModelDir& dir) {
    return boltz2::Boltz2StructureModel::load(dir);
}

std::vector<StructureModelRow>& structure_rows() {
    static std::vector<StructureModelRow> rows = {
        {"esmfold", "ESMFold", "config.json with is_folding_model", is_esmfold, esmfold_spec,
         load_esmfold},
        {"esmfold2", "ESMFold2", "model_type esmfold2, or its research layout", is_esmfold2,
         esmfold2_spec, load_esmfold2},
        {"boltz2", "Boltz-2", "boltz2_conf.ckpt", is_boltz2, boltz2_spec, load_boltz2},
    };
    return rows;
}

}  // namespace

const std::vector<LanguageModelRow>& language_models() {
    static const std::vector<LanguageModelRow> rows = {
        {"esm2", "esm", is_esm2, esm::Vocab::Esm2, load_esm2},
        {"esmc", "esmc", is_esmc, esm::Vocab::Esmc, load_esmc},
    };
    return rows;
}

const std::vector<StructureModelRow>& structure_models() { return structure_rows(); }

void register_structure_model(StructureModelRow row) {
    for (const StructureModelRow& r : structure_rows())
        BI_CHECK(r.architecture != row.architecture, "model registry", "architecture '",
                 row.architecture, "' is registered already");
    structure_rows().push_back(std::move(row));
}

const LanguageModelRow& language_model_of(const io::ModelDir& dir) {
    for (const LanguageModelRow& r : language_models())
        if (r.detect(dir)) return r;
    if (!dir.has_config())
        fail(dir.torch_file(), "holds no config.json and is not a known state dict (ESM C's "
                               "transformer.blocks.*)");
    std::string types;
    for (const LanguageModelRow& r : language_models())
        types += (types.empty() ? "" : ", ") + r.model_type;
    fail(config_where(dir), cat("model_type '", model_type(dir),
                                "' is not a supported language model (", types, ")"));
}

const StructureModelRow& structure_model_of(const io::ModelDir& dir) {
    for (const StructureModelRow& r : structure_models())
        if (r.detect(dir)) return r;
    std::string known;
    const auto& rows = structure_models();
    for (size_t i = 0; i < rows.size(); ++i)
        known += cat(i == 0 ? "" : i + 1 == rows.size() ? " nor " : ", ", rows[i].title, " (",
                     rows[i].recognised_by, ")");
    fail(config_where(dir), "not a structure model this build runs: neither " + known);
}

bool is_structure_model(const io::ModelDir& dir) {
    for (const StructureModelRow& r : structure_models())
        if (r.detect(dir)) return true;
    return false;
}

const std::vector<HubModel>& hub_models() {
    static const std::vector<HubModel> m = [] {
        std::vector<HubModel> v;
        struct E { const char *name, *params, *size; };
        // fp32 checkpoints: 4 bytes per parameter
        for (E e : {E{"esm2_t6_8M_UR50D", "8M", "~31 MB"}, E{"esm2_t12_35M_UR50D", "35M", "~0.14 GB"},
                    E{"esm2_t30_150M_UR50D", "150M", "~0.6 GB"}, E{"esm2_t33_650M_UR50D", "650M", "~2.6 GB"},
                    E{"esm2_t36_3B_UR50D", "3B", "~11 GB"}, E{"esm2_t48_15B_UR50D", "15B", "~60 GB"}})
            v.push_back({e.name, {std::string("facebook/") + e.name}, "ESM-2", e.params, e.size, "MIT"});
        v.push_back({"esmc-300m", {"biohub/ESMC-300M", "EvolutionaryScale/esmc-300m-2024-12"}, "ESM C",
                     "300M", "~1.2 GB", "EvolutionaryScale Cambrian Open License"});
        v.push_back({"esmc-600m", {"biohub/ESMC-600M", "EvolutionaryScale/esmc-600m-2024-12"}, "ESM C",
                     "600M", "~2.3 GB", "EvolutionaryScale Cambrian Non-Commercial License"});
        v.push_back({"esmc-6b", {"biohub/ESMC-6B"}, "ESM C", "6B", "~24 GB",
                     "see the repository's model card"});
        // the 3B stem in fp16 (5.6 GB) and the folding trunk in fp32
        v.push_back({"esmfold", {"facebook/esmfold_v1"}, "ESMFold", "3.5B", "~8.4 GB", "MIT", {},
                     {"esmfold_v1"}});
        // transformers' EsmFold2Model: the trunk and heads with the ESM C 6B tower bundled
        // (esmc.*), six safetensors shards (about 4 bytes per parameter)
        v.push_back({"esmfold2", {"biohub/ESMFold2"}, "ESMFold2", "~6.2B", "~25 GB",
                     "see the repository's model card"});
        v.push_back({"esmfold2-fast", {"biohub/ESMFold2-Fast"}, "ESMFold2", "~6.2B", "~25 GB",
                     "see the repository's model card"});
        // boltz2_conf.ckpt (2.3 GB) and mols.tar (1.9 GB, unpacked to mols/ next to it)
        v.push_back({"boltz2", {boltz2::kHubRepo}, "Boltz-2", "~0.5B", "~4.2 GB", "MIT"});
        // the affinity model: the structure model's layout with two affinity modules
        v.push_back({boltz2::kAffinityModelName, {boltz2::kHubRepo}, "Boltz-2", "~0.5B", "~2.1 GB",
                     "MIT", {boltz2::kAffinityCheckpoint}});
        return v;
    }();
    return m;
}

const HubModel* find_hub_model(const std::string& name) {
    for (const HubModel& m : hub_models()) {
        if (m.name == name) return &m;
        for (const std::string& a : m.aliases)
            if (a == name) return &m;
    }
    return nullptr;
}

}  // namespace bioinfer::models
