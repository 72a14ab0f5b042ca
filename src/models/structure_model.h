// What `bioinfer predict` needs from a structure model (ESMFold, ESMFold2, Boltz-2): a target
// (bio/target.h) read once, a memory estimate, the options it takes, and a prediction
// (bio/prediction.h) as named atoms with confidences.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bio/msa.h"
#include "bio/prediction.h"
#include "bio/target.h"
#include "bioinfer/tensor.h"
#include "io/boltz_inputs.h"
#include "io/fasta.h"
#include "io/model_dir.h"

namespace bioinfer::fold {

// One target as a model reads it: the target io read (its chains; for a whole input file also
// its constraints, templates and MSAs), carried whole from the reader to predict.
struct Input {
    std::string id;        // record id: names the output files
    std::string where;     // "file:line: record 'id'": errors about this input start with it
    std::string sequence;  // the input as written, normalised (upper case, ':' between chains)
    // The chains in target.chains (proteins of a FASTA record: ids A, B, ... by bio::chain_id);
    // target.source is the input file of a model that reads whole files.
    bio::Target target;
    // Chains added to the input file's (a screening job's ligand), after them; added to
    // target.chains by ModelSpec::prepare.
    std::vector<bio::Chain> extra;
    // Boltz-2: the ligand chain whose binding affinity is predicted after the structure (the
    // input's `properties: - affinity: binder`, or a screening job's ligand); empty: none.
    std::string affinity_binder;
    // What else makes two inputs different predictions, as the model states it (Boltz-2:
    // modified residues, cyclic chains, constraints); part of input_key.
    std::string variant;
    // Filled by ModelSpec::prepare: tokens the model runs (ESMFold: residues and linkers),
    // which set its cost and memory, the polymer residues it writes out and the ligand atoms
    // (Boltz-2: one token each), which progress counts.
    int64_t tokens = 0, residues = 0, ligand_atoms = 0;
};

// What makes two inputs the same prediction: every chain's type, id, sequence, (first) CCD code,
// SMILES and MSA file, in order (predict folds identical inputs once; the id is not part of it).
std::string input_key(const Input& in);

// A FASTA record of protein chains separated by ':' (letters in either case, upper-cased): the
// input with one protein chain per ':'-separated part, not yet prepared. Another character, or
// an empty chain, is an error naming `where`.
Input protein_chains_from_fasta(const io::FastaRecord& rec, const std::string& where);

// What predict's options say about reading inputs: set before they are read, since each input
// is read once (Boltz-2 reads its MSAs with its input file).
struct ReadOptions {
    int64_t max_msa_seqs = -1;  // MSA rows kept per file as it is read; -1: the model's default
    // Where proteins that name no MSA get one (Boltz-2: boltz's --use_msa_server); unset: such a
    // protein is an error naming it.
    io::MsaFetch msa_fetch;
};

struct Options {
    int num_recycles = -1;  // extra passes through the trunk; -1: the model's default
    int num_samples = 1;    // structures to draw (diffusion models); ESMFold makes one
    // Diffusion models: sampler steps, samples per denoiser batch, step scale (-1: the model's
    // defaults), the seed of every random draw, and MSA rows kept per chain (-1: default; the
    // rows ESMFold2 featurises; Boltz-2 keeps rows as its MSAs are read, by ReadOptions).
    int sampling_steps = -1;
    int max_parallel_samples = -1;
    double step_scale = -1;
    uint64_t seed = 0;
    int64_t max_msa_seqs = -1;
    // Boltz-2's affinity stage, for inputs with an affinity binder: its sampler steps and
    // samples (-1: boltz's 200 and 5), and the molecular-weight correction of the value.
    int affinity_sampling_steps = -1;
    int affinity_samples = -1;
    bool affinity_mw_correction = false;
    // Boltz-2's --use_potentials: the physical steering potentials guide the sampler, and
    // Feynman-Kac steering runs 3 particles per sample, resampled by the potentials' energies.
    bool use_potentials = false;
    // Boltz-2's --method: the experimental method the structure is conditioned on (boltz's
    // method_feature), a name of boltz's method table in any case; "": boltz's default,
    // "x-ray diffraction". ModelSpec::check_options refuses an unknown one.
    std::string method;
    // Boltz-2's --subsample_msa / --num_subsampled_msa: each pass of the MSA module keeps this
    // many rows drawn at random (seeded from `seed`); 0: every row.
    int64_t msa_subsample = 0;
    // Boltz-2's --write_embeddings: the prediction carries the trunk's final single and pair
    // representations (Prediction::embeddings); off, they are not kept (the pair one is large).
    bool write_embeddings = false;
    // Bytes a prediction may use (0: no limit): diffusion models denoise fewer samples at once
    // when max_parallel_samples of them would not fit.
    int64_t memory_budget = 0;
    int64_t chunk = 0;      // pair rows per chunk in the trunk; 0: automatic
    // Progress: (stage, step, steps); steps 0 when the stage has no count, e.g.
    // ("language model", 0, 0), ("trunk pass", 1, 4).
    std::function<void(const std::string& stage, int step, int steps)> progress;
    // Observer of named intermediates (tests); names are the model's own.
    std::function<void(const std::string&, const Tensor&)> tap;
    // When set, receives seconds per kind of trunk sub-block (the benchmark's breakdown).
    std::map<std::string, double>* trunk_profile = nullptr;
};

// What is known from a model's config alone, before any weight is read: what it accepts, how it
// reads a FASTA record, and how much memory an input needs.
class ModelSpec {
public:
    virtual ~ModelSpec() = default;
    virtual std::string architecture() const = 0;  // "esmfold"
    virtual std::vector<bio::MoleculeType> molecule_types() const = 0;
    virtual bool takes_msa() const = 0;
    virtual int default_num_recycles() const = 0;
    // A FASTA record as this model reads it (ESMFold: protein chains separated by ':'), prepared;
    // an error naming `where` when it cannot run.
    virtual Input from_fasta(const io::FastaRecord& rec, const std::string& where) const = 0;
    // Models whose target is a whole file (Boltz-2: boltz's YAML, or FASTA with one record per
    // chain) read it here, with every file it names (MSAs), once; the default refuses, naming
    // the file.
    virtual bool reads_whole_files() const { return false; }
    virtual Input from_file(const std::string& path, const ReadOptions& opts = {}) const;
    // An MSA file named for a chain from outside the input (predict's --msa-dir), read by this
    // model's rules; the default refuses, naming the file.
    virtual std::shared_ptr<const bio::Msa> read_msa(const std::string& path) const;
    // Checks an input's chains (types, MSAs, letters) against what the model takes, adds
    // in.extra to them, and fills in tokens and residues; errors name in.where. Once per input.
    virtual void prepare(Input& in) const = 0;
    // Bytes a prediction of `in` needs at most beyond the weights.
    virtual int64_t memory_bytes(const Input& in) const = 0;
    // The options of `predict` this model takes beyond those every model takes, spelled as on
    // the command line without "--" ("sampling-steps"): the CLI refuses the others, naming the
    // model, and results.json records the ones it takes.
    virtual std::vector<std::string> options() const { return {}; }
    bool takes_option(const std::string& name) const;
    // Checks the values of the model's own options in `opts` (Boltz-2: the --method name) before
    // weights load; an error naming the option. The default takes any.
    virtual void check_options(const Options& opts) const { (void)opts; }
    // How `predict` lays out the files: <id>.pdb|.cif and <id>.json per target (Plain), or the
    // tree `boltz predict` writes, boltz_results_<input>/predictions/<id>/ (Boltz).
    enum class Layout { Plain, Boltz };
    virtual Layout output_layout() const { return Layout::Plain; }
    // The structure format written when none is asked for: "pdb" or "cif".
    virtual std::string default_output_format() const { return "pdb"; }

protected:
    // The error for a chain whose type or MSA this model does not take.
    void check_chains(const Input& in) const;
};

class StructureModel {
public:
    virtual ~StructureModel() = default;
    virtual const ModelSpec& spec() const = 0;
    // in: prepared by spec(). Thread-safe: workers share one model.
    virtual bio::Prediction predict(const Input& in, const Options& opts = {}) const = 0;

    // What a run's targets need beside the weights, loaded once before the first target
    // (Boltz-2's affinity model when a target names a binder). `given`: the model's own options
    // the user gave (spec().options(); "affinity-checkpoint" -> a path); `fetch`: a registry
    // model's folder by name, downloaded when missing (empty for a run on --weights, which
    // fetches nothing); `stage`: reports what loads. The default needs nothing.
    struct RunNeeds {
        std::map<std::string, std::string> given;
        std::function<std::string(const std::string& name)> fetch;
        std::function<void(const std::string& what)> stage;
    };
    virtual void load_run_needs(const std::vector<const Input*>& targets, const RunNeeds& needs) {
        (void)targets, (void)needs;
    }
};

// The structure model a directory holds ("esmfold"), by the registry's rows (models/registry.h);
// an unsupported one is an error naming the file.
std::string detect_architecture(const io::ModelDir& dir);
// Its spec, from config.json alone.
std::unique_ptr<ModelSpec> load_spec(const io::ModelDir& dir);
// Loads whichever supported structure model the directory holds.
std::unique_ptr<StructureModel> load(const io::ModelDir& dir);

}  // namespace bioinfer::fold
