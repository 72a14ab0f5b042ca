// ESMFold2 (transformers' EsmFold2Model.fold): the bundled ESM C tower, the trunk, the diffusion
// sampler and the confidence head on one target; and the model behind the StructureModel
// interface (`bioinfer predict --model esmfold2`): protein chains (':' between chains in FASTA),
// every heavy atom, samples ranked by pTM with per-atom pLDDT, PAE, PDE, pTM and ipTM.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "models/esmc.h"
#include "models/esmfold2/confidence.h"
#include "models/esmfold2/config.h"
#include "models/esmfold2/diffusion.h"
#include "models/esmfold2/trunk.h"
#include "models/structure_model.h"

namespace bioinfer::esmfold2 {

struct FoldOptions {
    int64_t num_loops = -1;  // -1: the config's
    int64_t samples = 1;
    int64_t steps = -1;                 // the schedule's length; -1: inference_num_steps
    int64_t max_parallel_samples = -1;  // -1: all samples in one denoiser batch
    uint64_t seed = 0;                  // every random draw (trunk state, dropout, sampler)
    double step_scale = -1;             // > 0: overrides the config's
    std::function<void(const std::string& stage, int step, int steps)> progress;
    Tap tap;
};

struct FoldOutput {
    TrunkOutput trunk;
    Tensor coords;  // (S, A, 3)
    ConfidenceOutput confidence;
    std::vector<std::pair<std::string, double>> stage_seconds;
};

class EsmFold2Model {
  public:
    // A transformers checkpoint folder (config.json with model_type "esmfold2", the tower under
    // esmc.*); every tensor must be read.
    static std::unique_ptr<EsmFold2Model> load(const io::ModelDir& dir);
    const Config& config() const { return cfg_; }
    FoldOutput fold(const Inputs& in, const FoldOptions& opts) const;

  private:
    Config cfg_;
    std::unique_ptr<esm::EsmcModel> lm_;
    mutable std::mutex lm_mutex_;
    Trunk trunk_;
    DiffusionModule diffusion_;
    ConfidenceHead confidence_;
};

class EsmFold2Spec : public fold::ModelSpec {
  public:
    explicit EsmFold2Spec(Config c) : cfg_(std::move(c)) {}
    std::string architecture() const override { return "esmfold2"; }
    std::vector<bio::MoleculeType> molecule_types() const override {
        return {bio::MoleculeType::Protein};
    }
    bool takes_msa() const override { return false; }
    // ESMFold2's recycling is its loop count: the trunk runs num_loops + 1 times.
    int default_num_recycles() const override { return int(cfg_.num_loops); }
    // Letters A-Z in either case (those outside the 20 amino acids fold as UNK), ':' between
    // chains.
    fold::Input from_fasta(const io::FastaRecord& rec, const std::string& where) const override;
    // A chain's a3m file (--msa-dir) by the esm package's rules, every row kept.
    std::shared_ptr<const bio::Msa> read_msa(const std::string& path) const override;
    void prepare(fold::Input& in) const override;
    // The language model's hidden states, the loop's pair tensors and the pair stacks'
    // temporaries, the diffusion module's per-sample atoms and token biases.
    int64_t memory_bytes(const fold::Input& in) const override;
    // The sampler's settings and the MSAs (--msa-dir: a3m files per record or chain; the MSA
    // server's).
    std::vector<std::string> options() const override {
        return {"sampling-steps", "diffusion-samples", "max-parallel-samples", "step-scale",
                "seed",           "max-msa-seqs",      "msa-dir",           "use-msa-server"};
    }

  private:
    Config cfg_;
};

class EsmFold2StructureModel : public fold::StructureModel {
  public:
    static std::unique_ptr<EsmFold2StructureModel> load(const io::ModelDir& dir);
    explicit EsmFold2StructureModel(std::unique_ptr<EsmFold2Model> model);
    const fold::ModelSpec& spec() const override { return spec_; }
    // Stages "language model", "trunk", "diffusion step" (per step), "confidence".
    bio::Prediction predict(const fold::Input& in, const fold::Options& opts = {}) const override;

  private:
    std::unique_ptr<EsmFold2Model> model_;
    EsmFold2Spec spec_;
};

}  // namespace bioinfer::esmfold2
