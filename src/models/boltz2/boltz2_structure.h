// Boltz-2 behind the StructureModel interface: a target is one input file as boltz reads it (its
// YAML schema, or FASTA with one `>ID|TYPE|MSA` record per chain) holding protein, DNA, RNA and
// ligand chains; the prediction is every diffusion sample's atoms with boltz's confidences, best first by
// boltz's confidence score.
#pragma once
#include <memory>
#include <mutex>
#include <string>

#include "bio/target.h"
#include "models/boltz2/boltz2.h"
#include "models/boltz2/conformers.h"
#include "models/structure_model.h"

namespace bioinfer::boltz2 {

class Boltz2Spec : public fold::ModelSpec {
public:
    // mols_dir: boltz's molecule folder of the model (mols_dir_of), where CCD ligands are read.
    explicit Boltz2Spec(Config c, std::string mols_dir = {})
        : cfg_(std::move(c)), mols_dir_(std::move(mols_dir)) {}
    const std::string& mols_dir() const { return mols_dir_; }
    const Config& config() const { return cfg_; }
    std::string architecture() const override { return "boltz2"; }
    std::vector<bio::MoleculeType> molecule_types() const override;
    bool takes_msa() const override { return true; }
    int default_num_recycles() const override { return 3; }
    // FASTA records are chains of one target here: inputs are whole files.
    fold::Input from_fasta(const io::FastaRecord& rec, const std::string& where) const override;
    bool reads_whole_files() const override { return true; }
    // The file parsed (schema, alphabets, MSA paths) and every MSA read and checked (first row is
    // the query) with opts.max_msa_seqs rows (boltz's default 8192), tokens counted: the target
    // predict runs. Every error names the file, line and chain.
    fold::Input from_file(const std::string& path,
                          const fold::ReadOptions& opts = {}) const override;
    // Adds in.extra (screening ligands) to the target from_file read, and the job's affinity
    // binder; checks and counts tokens as from_file.
    void prepare(fold::Input& in) const override;
    // Pair states of the trunk and confidence stacks, the token transformer's per-layer biases,
    // the atom windows' biases and the dense atom <-> token maps, at in.tokens tokens.
    int64_t memory_bytes(const fold::Input& in) const override;
    // The sampler's, the MSAs' (the MSA server's too), the method conditioning, the embeddings, the affinity stage's
    // and screening's options; boltz predict's layout, mmCIF by default.
    std::vector<std::string> options() const override {
        return {"sampling-steps",     "diffusion-samples",       "max-parallel-samples",
                "step-scale",         "seed",                    "max-msa-seqs",
                "use-potentials",     "sampling-steps-affinity", "diffusion-samples-affinity",
                "affinity-mw-correction", "affinity-checkpoint", "affinity",
                "ligands",            "ligand-chain",            "method",
                "subsample-msa",      "num-subsampled-msa",      "write-embeddings",
                "use-msa-server"};
    }
    // --method must name a method of boltz's table (any case), as boltz predict requires.
    void check_options(const fold::Options& opts) const override;
    Layout output_layout() const override { return Layout::Boltz; }
    std::string default_output_format() const override { return "cif"; }
    // The extra bytes each sample denoised at once needs (token and atom transformer activations
    // and attention scores): what decides how many samples fit in one batch.
    int64_t bytes_per_parallel_sample(int64_t tokens) const;

private:
    // The input of a read target, its tokens counted (a ligand's heavy atoms: RDKit's parse of a
    // SMILES, a CCD code's molecule), its templates and constraints checked.
    fold::Input input_of(bio::Target t) const;

    Config cfg_;
    std::string mols_dir_;
};

// boltz's cache layout keeps the molecules beside the checkpoint: <folder>/mols/<RES>.pkl. The
// folder of a model's checkpoint's mols/ when it exists, else "".
std::string mols_dir_of(const io::ModelDir& dir);

class Boltz2StructureModel : public fold::StructureModel {
public:
    static std::unique_ptr<Boltz2StructureModel> load(const io::ModelDir& dir);
    const fold::ModelSpec& spec() const override { return *spec_; }
    // Stages "featurize", "input embedder", "trunk pass" (per pass), "diffusion conditioning",
    // "diffusion step" (per step), "confidence"; with an affinity binder then "affinity
    // featurize" and the affinity model's own stages prefixed "affinity " (boltz's second
    // stage: the best sample cropped around the binder and featurised again), whose results are
    // the prediction's properties.
    bio::Prediction predict(const fold::Input& in, const fold::Options& opts = {}) const override;
    const Boltz2Model& model() const { return *model_; }
    // Where the canonical residue conformers come from: the model folder's mols/ (boltz's cache
    // layout) or the built-in table.
    const std::string& conformer_source() const { return conformers_.source; }

    // The affinity model (boltz's boltz2_aff.ckpt) for inputs with an affinity binder: by default
    // the file of that name beside the structure checkpoint (boltz's cache layout); loaded on
    // first use and kept. "" when there is none.
    void set_affinity_checkpoint(const std::string& path) { affinity_path_ = path; }
    const std::string& affinity_checkpoint() const { return affinity_path_; }
    const Boltz2Model& affinity_model() const;
    // The affinity model, when a target names a binder: --affinity-checkpoint's file, else the
    // one beside the structure checkpoint, else the registry's boltz2-affinity (fetched).
    void load_run_needs(const std::vector<const fold::Input*>& targets,
                        const RunNeeds& needs) override;

private:
    std::string affinity_path_;
    mutable std::once_flag affinity_once_;
    mutable std::unique_ptr<Boltz2Model> affinity_model_;
    std::unique_ptr<Boltz2Model> model_;
    CacheConformers conformers_;
    std::unique_ptr<Boltz2Spec> spec_;
};

}  // namespace bioinfer::boltz2
