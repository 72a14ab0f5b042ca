// The structure models behind `bioinfer predict`, found through the registry, and the checks
// every model's input preparation shares.
#include "models/structure_model.h"

#include <algorithm>
#include <cctype>

#include "bioinfer/error.h"
#include "models/registry.h"
#include "ops/ops.h"

namespace bioinfer::fold {

std::string input_key(const Input& in) {
    std::string key;
    for (const Entity& e : in.entities)  // '\n' separates fields: no field holds one
        key += cat(entity_kind_name(e.kind), '\n', e.chain_id, '\n', e.sequence, '\n', e.ccd, '\n',
                   e.smiles, '\n', e.msa, "\n\n");
    if (!in.affinity_binder.empty()) key += cat("affinity\n", in.affinity_binder, '\n');
    if (!in.variant.empty()) key += cat("variant\n", in.variant, '\n');
    return key;
}

const char* entity_kind_name(EntityKind k) {
    switch (k) {
        case EntityKind::Protein:
            return "protein";
        case EntityKind::Dna:
            return "dna";
        case EntityKind::Rna:
            return "rna";
        case EntityKind::Ligand:
            return "ligand";
    }
    return "?";
}

std::string chain_id(int32_t c) {
    static const std::string k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    if (c < int32_t(k.size())) return std::string(1, k[size_t(c)]);
    return std::string(1, k[size_t(c / int32_t(k.size()) - 1)]) + k[size_t(c % int32_t(k.size()))];
}

void ModelSpec::check_entities(const Input& in) const {
    BI_CHECK(!in.entities.empty(), in.where, "holds no chain");
    const std::vector<EntityKind> kinds = entity_kinds();
    for (const Entity& e : in.entities) {
        if (std::find(kinds.begin(), kinds.end(), e.kind) == kinds.end()) {
            std::string takes;
            for (EntityKind k : kinds)
                takes += (takes.empty() ? "" : ", ") + std::string(entity_kind_name(k));
            fail(in.where, cat("chain ", e.chain_id, " is a ", entity_kind_name(e.kind), ", but ",
                               architecture(), " takes only ", takes));
        }
        BI_CHECK(e.msa.empty() || takes_msa(), in.where, "chain ", e.chain_id, " has an MSA, but ",
                 architecture(), " takes none");
    }
}

Input protein_chains_from_fasta(const io::FastaRecord& rec, const std::string& where) {
    Input in;
    in.id = rec.id;
    in.where = where;
    for (size_t i = 0; i < rec.sequence.size(); ++i) {
        const char c = rec.sequence[i];
        BI_CHECK(std::isalpha((unsigned char)c) || c == ':', where, "character '", c,
                 "' at position ", i + 1, " is not an amino-acid letter or ':' (chain break)");
        in.sequence += char(std::toupper((unsigned char)c));
    }
    size_t start = 0;
    for (size_t i = 0; i <= in.sequence.size(); ++i)
        if (i == in.sequence.size() || in.sequence[i] == ':') {
            Entity e;
            e.chain_id = chain_id(int32_t(in.entities.size()));
            e.sequence = in.sequence.substr(start, i - start);
            in.entities.push_back(std::move(e));
            start = i + 1;
        }
    return in;
}

bool ModelSpec::takes_option(const std::string& name) const {
    const std::vector<std::string> o = options();
    return std::find(o.begin(), o.end(), name) != o.end();
}

Input ModelSpec::from_file(const std::string& path) const {
    fail(path, cat(architecture(), " reads FASTA records, not whole input files"));
}

std::string detect_architecture(const io::ModelDir& dir) {
    return models::structure_model_of(dir).architecture;
}

std::unique_ptr<ModelSpec> load_spec(const io::ModelDir& dir) {
    return models::structure_model_of(dir).spec(dir);
}

std::unique_ptr<StructureModel> load(const io::ModelDir& dir) {
    const ops::LinearRowsScope rows(ops::kFoldLinearRows);  // folds run at one protein's length
    return models::structure_model_of(dir).load(dir);
}

}  // namespace bioinfer::fold
