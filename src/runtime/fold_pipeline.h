// The structure-prediction job behind `bioinfer predict`, for any fold::StructureModel: collect
// and validate targets, check each fits in memory before any work starts, fold them one at a time
// with the weights resident, and write per target and sample a structure (PDB or mmCIF), a
// confidence JSON and optionally the PAE (and PDE) matrices (npy) with a pLDDT/PAE plot (PNG).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/structure_model.h"
#include "runtime/jobs.h"
#include "runtime/progress.h"

namespace bioinfer::runtime {

struct FoldRecord {
    std::string id, source, sequence;  // sequence upper-cased, ':' between chains
    fold::Input input;     // as the model reads it
    int64_t residues = 0;  // written out (ESMFold: without linkers)
    std::string error;     // why it cannot run ("" when it can): reported as a failed target
};

// INPUT as for embed (FASTA file, folder, bare sequence), each record read as the model reads
// FASTA (ESMFold: letters A-Z in either case, those outside the 20 amino acids folding as X, as
// upstream; ':' between chains). A bad record carries its error. For a model that reads whole
// files (Boltz-2), INPUT is one input file or a folder of them (.yaml, .yml, .fasta, .fa, .fas,
// .faa; sorted by name), each a target named after its file; a bad file fails alone.
// Each input is read once, as `ro` says (Boltz-2's MSAs with its file).
std::vector<FoldRecord> collect_fold_records(const std::string& input, const fold::ModelSpec& spec,
                                             const fold::ReadOptions& ro = {});
// Names each chain's MSA from a folder (ESMFold2's --msa-dir): ID.a3m for a one-chain record,
// else ID_<chain>.a3m, read by the model's rules (ModelSpec::read_msa); a chain without a file
// keeps none (single sequence). Done as records are collected, so the MSAs are part of a
// target's identity and its memory estimate, and read once; a file that cannot be read fails
// its record.
void attach_msa_dir(std::vector<FoldRecord>& records, const std::string& dir,
                    const fold::ModelSpec& spec);

// One record for a predict run, filled by the CLI and by the Python module. The files are laid
// out as the model's spec says (ModelSpec::output_layout): <id>.<format>, <id>.json, ... in
// out_dir, or boltz predict's out_dir/predictions/<id>/<id>_model_<k>.<cif|pdb>, confidence_,
// pae_, pde_, plddt_ files.
struct PredictOptions : JobOptions {
    std::string format = "pdb";  // pdb | cif
    bool write_pae = false;
    // Every fold's settings (fold::Options: recycles, the diffusion models' sampler, MSA rows,
    // Boltz-2's affinity stage and potentials, chunking); progress is set per target, and
    // memory_budget is the run's, split among the workers.
    fold::Options fold;
    std::string msa_dir;  // --msa-dir (attach_msa_dir names each chain's file)
};

// How predict's progress reads: targets, residues, the log file.
ProgressOptions predict_progress_options(const PredictOptions& o);

// Memory the process may still use (MemAvailable), in bytes; 0 when unknown.
int64_t available_memory_bytes();
// The error for a target that needs more than `budget` bytes by the model's estimate
// (ModelSpec::memory_bytes; "" when it fits or budget is 0).
std::string fold_memory_error(const fold::ModelSpec& spec, const FoldRecord& r, int64_t budget);

struct PredictStats {
    int64_t targets = 0, residues = 0;  // folded now
    double seconds = 0;
    std::vector<TargetResult> results;  // every target, in input order
};

// Folds every target that can run and whose outputs are not there yet (unless
// override_existing); a target that fails is reported and the others go on. Targets too large
// for the memory budget fail before any work starts. Writes results.json.
PredictStats run_predict(const fold::StructureModel& model, const std::vector<FoldRecord>& recs,
                         const PredictOptions& opts);

}  // namespace bioinfer::runtime
