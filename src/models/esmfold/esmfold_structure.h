// ESMFold behind the StructureModel interface: protein chains only (':' between chains in FASTA,
// joined by fair-esm's glycine linker, which the outputs drop), atoms the atom37 slots each
// residue has, one sample with pLDDT, PAE and pTM.
#pragma once
#include <memory>

#include "models/esmfold/esmfold.h"
#include "models/structure_model.h"

namespace bioinfer::esmfold {

class EsmFoldSpec : public fold::ModelSpec {
public:
    explicit EsmFoldSpec(EsmFoldConfig c) : cfg_(std::move(c)) {}
    const EsmFoldConfig& config() const { return cfg_; }
    std::string architecture() const override { return "esmfold"; }
    std::vector<bio::MoleculeType> molecule_types() const override {
        return {bio::MoleculeType::Protein};
    }
    bool takes_msa() const override { return false; }
    int default_num_recycles() const override { return int(cfg_.trunk.max_recycles) - 1; }
    // Letters A-Z in either case (those outside the 20 amino acids fold as X, as upstream), ':'
    // between chains.
    fold::Input from_fasta(const io::FastaRecord& rec, const std::string& where) const override;
    void prepare(fold::Input& in) const override;
    // Pair state, triangle products, structure-module copies and chunk temporaries at
    // in.tokens residues (linkers included).
    int64_t memory_bytes(const fold::Input& in) const override;

private:
    EsmFoldConfig cfg_;
};

// The encoding fair-esm makes of an input's chains (':'-joined, then encode_sequence).
EncodedTarget encode_input(const fold::Input& in);

class EsmFoldStructureModel : public fold::StructureModel {
public:
    static std::unique_ptr<EsmFoldStructureModel> load(const io::ModelDir& dir);
    explicit EsmFoldStructureModel(std::unique_ptr<EsmFoldModel> model);
    const fold::ModelSpec& spec() const override { return spec_; }
    // Stages "language model", "trunk pass" (per pass), "structure module and heads"; taps and
    // the trunk profile as EsmFoldModel::fold.
    bio::Prediction predict(const fold::Input& in, const fold::Options& opts = {}) const override;
    const EsmFoldModel& model() const { return *model_; }

private:
    std::unique_ptr<EsmFoldModel> model_;
    EsmFoldSpec spec_;
};

}  // namespace bioinfer::esmfold
