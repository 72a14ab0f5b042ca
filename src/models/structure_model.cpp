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
    for (const bio::Chain& c : in.target.chains)  // '\n' separates fields: no field holds one
        key += cat(bio::molecule_type_name(c.type), '\n', c.id, '\n', c.sequence, '\n',
                   c.ccd.empty() ? std::string() : c.ccd.front(), '\n', c.smiles, '\n', c.msa_path,
                   "\n\n");
    if (!in.affinity_binder.empty()) key += cat("affinity\n", in.affinity_binder, '\n');
    if (!in.variant.empty()) key += cat("variant\n", in.variant, '\n');
    return key;
}

void ModelSpec::check_chains(const Input& in) const {
    BI_CHECK(!in.target.chains.empty(), in.where, "holds no chain");
    const std::vector<bio::MoleculeType> types = molecule_types();
    for (const bio::Chain& c : in.target.chains) {
        if (std::find(types.begin(), types.end(), c.type) == types.end()) {
            std::string takes;
            for (bio::MoleculeType t : types)
                takes += (takes.empty() ? "" : ", ") + std::string(bio::molecule_type_name(t));
            fail(in.where, cat("chain ", c.id, " is a ", bio::molecule_type_name(c.type), ", but ",
                               architecture(), " takes only ", takes));
        }
        BI_CHECK(c.msa_path.empty() || takes_msa(), in.where, "chain ", c.id, " has an MSA, but ",
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
    std::vector<bio::Chain>& chains = in.target.chains;
    for (size_t i = 0; i <= in.sequence.size(); ++i)
        if (i == in.sequence.size() || in.sequence[i] == ':') {
            bio::Chain c;
            c.id = bio::chain_id(int32_t(chains.size()));
            c.sequence = in.sequence.substr(start, i - start);
            chains.push_back(std::move(c));
            start = i + 1;
        }
    return in;
}

bool ModelSpec::takes_option(const std::string& name) const {
    const std::vector<std::string> o = options();
    return std::find(o.begin(), o.end(), name) != o.end();
}

Input ModelSpec::from_file(const std::string& path, const ReadOptions&) const {
    fail(path, cat(architecture(), " reads FASTA records, not whole input files"));
}

std::shared_ptr<const bio::Msa> ModelSpec::read_msa(const std::string& path) const {
    fail(path, cat(architecture(), " reads no MSA files"));
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
