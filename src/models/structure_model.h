// What `bioinfer predict` needs from a structure model (ESMFold, ESMFold2, Boltz-2): inputs as
// entities, a memory estimate, the options it takes, and a prediction as named atoms with
// confidences.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bioinfer/tensor.h"
#include "io/fasta.h"
#include "io/model_dir.h"

namespace bioinfer::fold {

enum class EntityKind { Protein, Dna, Rna, Ligand };
// "protein", "dna", "rna", "ligand"
const char* entity_kind_name(EntityKind k);

// One chain of the input. Chains with the same kind and sequence are copies of one entity in
// the AlphaFold 3 sense; models that need entity ids derive them from that.
struct Entity {
    EntityKind kind = EntityKind::Protein;
    std::string chain_id;     // "A", "B", ... (chain_id(k) for the k-th chain by default)
    std::string sequence;     // polymers: one-letter codes, upper case
    std::string ccd, smiles;  // ligands: a CCD code or a SMILES string (no model takes them yet)
    std::string msa;          // path of an MSA (a3m) for this chain; empty: single sequence
};

// One target as a model reads it.
struct Input {
    std::string id;        // record id: names the output files
    std::string where;     // "file:line: record 'id'": errors about this input start with it
    std::string sequence;  // the input as written, normalised (upper case, ':' between chains)
    std::string path;      // the input file, for models that read a whole file as one target
    std::vector<Entity> entities;
    // Chains added to the input file's (a screening job's ligand), after them; also in entities
    // once prepared.
    std::vector<Entity> extra;
    // Boltz-2: the ligand chain whose binding affinity is predicted after the structure (the
    // input's `properties: - affinity: binder`, or a screening job's ligand); empty: none.
    std::string affinity_binder;
    // What else makes two inputs different predictions, as the model states it (Boltz-2:
    // modified residues, cyclic chains, constraints); part of input_key.
    std::string variant;
    // Filled by ModelSpec::prepare: tokens the model runs (ESMFold: residues and linkers),
    // which set its cost and memory, and the polymer residues it writes out (progress counts).
    int64_t tokens = 0, residues = 0;
};

// What makes two inputs the same prediction: every entity's kind, chain id, sequence, CCD code,
// SMILES and MSA, in order (predict folds identical inputs once; the id is not part of it).
std::string input_key(const Input& in);

// Chain ids in input order: A..Z, then a..z, then 0..9, then two characters.
std::string chain_id(int32_t k);

// A FASTA record of protein chains separated by ':' (letters in either case, upper-cased): the
// input with one protein entity per chain, not yet prepared. Another character, or an empty
// chain, is an error naming `where`.
Input protein_chains_from_fasta(const io::FastaRecord& rec, const std::string& where);

struct Options {
    int num_recycles = -1;  // extra passes through the trunk; -1: the model's default
    int num_samples = 1;    // structures to draw (diffusion models); ESMFold makes one
    // Diffusion models: sampler steps, samples per denoiser batch, step scale (-1: the model's
    // defaults), the seed of every random draw, and MSA rows kept per chain (-1: default).
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

// The predicted model's topology, shared by all samples. Tokens are the units of per-token
// confidences and of PAE: a residue of a polymer, an atom of a ligand.
struct Chain {
    std::string id;
    EntityKind kind = EntityKind::Protein;
    int64_t first_token = 0, tokens = 0;
    int32_t entity = 0;  // chains with the same entity are copies of one molecule
};
struct Token {
    int32_t chain = 0;                  // index into Prediction::chains
    int32_t residue = 0;                // residue number written out (1-based within the chain)
    std::string name;                   // residue name: "ALA", "DA", "U", a CCD code
    char letter = 'X';                  // one-letter code (X when none)
    int64_t first_atom = 0, atoms = 0;  // its atoms are [first_atom, first_atom + atoms)
    int64_t rep_atom = -1;              // Calpha of an amino acid (C1' of a nucleotide); -1: none
};
struct Atom {
    int64_t token = 0;
    std::string name;     // "CA"
    std::string element;  // "C"
};

// One predicted structure with its confidences.
struct Sample {
    Tensor coords;       // (atoms, 3) Angstrom
    Tensor plddt;        // (atoms) in [0, 1]
    Tensor token_plddt;  // (tokens) in [0, 1]
    Tensor pae, pde;     // (tokens, tokens) Angstrom; undefined when the model has no such head
    // Named scalars: "ptm", and for complexes "iptm", "confidence_score", ... Written into the
    // confidence JSON under these names, which must not be one of its own keys.
    std::map<std::string, double> scores;
    // Named (chains, chains) scores, e.g. "pair_chains_iptm".
    std::map<std::string, Tensor> chain_pair_scores;
};

struct Prediction {
    std::vector<Chain> chains;
    std::vector<Token> tokens;
    std::vector<Atom> atoms;
    // Bonds between atoms (indices into atoms) a structure file records: ligands' own bonds,
    // written as PDB CONECT records as boltz writes them.
    std::vector<std::pair<int64_t, int64_t>> bonds;
    std::vector<Sample> samples;  // best first, by the model's own ranking
    int num_recycles = 0;         // what the run used
    // Per-target predictions beside the structure, in the model's order (Boltz-2's affinity:
    // affinity_pred_value, affinity_probability_binary, then per ensemble member).
    std::vector<std::pair<std::string, double>> properties;
    std::vector<std::pair<std::string, double>> stage_seconds;  // in run order
};

// What is known from a model's config alone, before any weight is read: what it accepts, how it
// reads a FASTA record, and how much memory an input needs.
class ModelSpec {
public:
    virtual ~ModelSpec() = default;
    virtual std::string architecture() const = 0;  // "esmfold"
    virtual std::vector<EntityKind> entity_kinds() const = 0;
    virtual bool takes_msa() const = 0;
    virtual int default_num_recycles() const = 0;
    // A FASTA record as this model reads it (ESMFold: protein chains separated by ':'), prepared;
    // an error naming `where` when it cannot run.
    virtual Input from_fasta(const io::FastaRecord& rec, const std::string& where) const = 0;
    // Models whose target is a whole file (Boltz-2: boltz's YAML, or FASTA with one record per
    // chain) read it here; the default refuses, naming the file.
    virtual bool reads_whole_files() const { return false; }
    virtual Input from_file(const std::string& path) const;
    // Checks an input given as entities (kinds, MSAs, letters) against what the model takes and
    // fills in tokens and residues; errors name in.where.
    virtual void prepare(Input& in) const = 0;
    // Bytes a prediction of `in` needs at most beyond the weights.
    virtual int64_t memory_bytes(const Input& in) const = 0;
    // The options of `predict` this model takes beyond those every model takes, spelled as on
    // the command line without "--" ("sampling-steps"): the CLI refuses the others, naming the
    // model, and results.json records the ones it takes.
    virtual std::vector<std::string> options() const { return {}; }
    bool takes_option(const std::string& name) const;
    // How `predict` lays out the files: <id>.pdb|.cif and <id>.json per target (Plain), or the
    // tree `boltz predict` writes, boltz_results_<input>/predictions/<id>/ (Boltz).
    enum class Layout { Plain, Boltz };
    virtual Layout output_layout() const { return Layout::Plain; }
    // The structure format written when none is asked for: "pdb" or "cif".
    virtual std::string default_output_format() const { return "pdb"; }

protected:
    // The error for an entity whose kind or MSA this model does not take.
    void check_entities(const Input& in) const;
};

class StructureModel {
public:
    virtual ~StructureModel() = default;
    virtual const ModelSpec& spec() const = 0;
    // in: prepared by spec(). Thread-safe: workers share one model.
    virtual Prediction predict(const Input& in, const Options& opts = {}) const = 0;

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
