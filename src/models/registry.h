// The models bioinfer runs, one row each (as llama.cpp's llama-arch names its architectures): how
// a checkpoint is recognised, what is known of it before any weight is read, how it loads, and
// the Hugging Face repositories that hold it. The CLI, the pipelines, the Python module and
// `bioinfer weights` read these rows; adding a model is its folder plus one row here
// (docs/add-a-model.md).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "io/model_dir.h"
#include "models/esm_alphabet.h"
#include "models/language_model.h"
#include "models/structure_model.h"

namespace bioinfer::models {

// A protein language model (`embed`, `score`).
struct LanguageModelRow {
    std::string architecture;   // "esm2": what results.json and errors call it
    std::string model_type;     // config.json's model_type ("esm"), for the error on none
    bool (*detect)(const io::ModelDir&);
    esm::Vocab vocab;           // its tokenizer's alphabet, known before any weight is read
    std::unique_ptr<lm::LanguageModel> (*load)(const io::ModelDir&);
};

// A structure model (`predict`, `bench fold`, StructureModel in Python).
struct StructureModelRow {
    std::string architecture;   // "esmfold"
    std::string title;          // "ESMFold"
    std::string recognised_by;  // "config.json with is_folding_model"
    bool (*detect)(const io::ModelDir&);
    std::unique_ptr<fold::ModelSpec> (*spec)(const io::ModelDir&);  // from its config alone
    std::unique_ptr<fold::StructureModel> (*load)(const io::ModelDir&);
};

// A model `--model NAME` downloads (`bioinfer weights` lists them).
struct HubModel {
    std::string name;                // what --model accepts
    std::vector<std::string> repos;  // Hugging Face repositories holding it, preferred first
    std::string family;              // "ESM-2", "ESM C", "ESMFold"
    std::string params;              // "650M"
    std::string approx_size;         // download size before the hub tells the exact one
    std::string license;
    // The files taken from the repository when it holds more than this model (Boltz-2's
    // affinity checkpoint is its own entry); empty: chosen from the repository's listing.
    std::vector<std::string> files = {};
    std::vector<std::string> aliases = {};  // other names --model accepts ("esmfold_v1")
};

// The rows, in the order a checkpoint is tried against them (the first that detects it wins).
const std::vector<LanguageModelRow>& language_models();
const std::vector<StructureModelRow>& structure_models();
const std::vector<HubModel>& hub_models();

// Adds a structure model after the built-in ones (so it never shadows them): a model built
// outside this library, or a test's toy model. Call before any lookup runs on other threads.
void register_structure_model(StructureModelRow row);

// The row whose detect() takes the directory; an error naming its config (and what each
// architecture is recognised by) when none does.
const LanguageModelRow& language_model_of(const io::ModelDir& dir);
const StructureModelRow& structure_model_of(const io::ModelDir& dir);
// Whether any structure row takes the directory (a directory no row takes is a language model
// or an error).
bool is_structure_model(const io::ModelDir& dir);
// The hub row for a name or alias; nullptr if unknown.
const HubModel* find_hub_model(const std::string& name);

}  // namespace bioinfer::models
