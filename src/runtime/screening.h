// Ligand screening with Boltz-2: one input file (the receptor, and whatever else the complex holds)
// and a file of SMILES; every ligand is one target (the input with the ligand added as a chain),
// run as one job (weights resident, sharding and resume as for any folder of inputs), and a
// summary table of every ligand's scores.
#pragma once
#include <exception>
#include <string>
#include <vector>

#include "runtime/fold_pipeline.h"

namespace bioinfer::runtime {

struct ScreeningLigand {
    std::string name, smiles;
    std::string where;  // "file:line"
};

// The ligands of a SMILES file: one per line, the SMILES then an optional name (whitespace
// between them, as .smi files have it); blank lines and lines starting with '#' are skipped. A
// ligand without a name is named after its line ("lig<line>"). Errors name the file and line: a
// name used twice, a name that is not a safe file name.
std::vector<ScreeningLigand> read_screening_ligands(const std::string& path);

// The input file every ligand's target copies, read once (ModelSpec::from_file, with the MSAs it
// names), or why it could not be read.
struct ScreeningInput {
    fold::Input input;
    std::exception_ptr error;  // null when read
};
ScreeningInput read_screening_input(const std::string& path, const fold::ModelSpec& spec,
                                    const fold::ReadOptions& ro = {});

// The first chain id of L..Z, then A..K, that the input file does not use; the reading error
// when it could not be read.
std::string free_ligand_chain(const ScreeningInput& in);

// One target per ligand: the input file with the ligand added as chain `chain`, named after the
// ligand, and with `affinity` the affinity binder. A ligand the model cannot take (a SMILES RDKit
// refuses, one too large for the affinity module) carries its error and fails alone; an input
// file that could not be read is every ligand's error.
std::vector<FoldRecord> collect_screening_records(const ScreeningInput& in,
                                                  const std::vector<ScreeningLigand>& ligands,
                                                  const std::string& chain,
                                                  const fold::ModelSpec& spec,
                                                  bool affinity = false);

// screening.csv in out_dir: per ligand in file order its name, SMILES, status, the best
// sample's confidence scores from its confidence JSON (boltz's layout), its affinity values from
// affinity_<name>.json (empty without one), and the error of a ligand that failed. Written to a
// temporary name and renamed.
std::string write_screening_summary(const std::vector<ScreeningLigand>& ligands,
                                    const std::vector<TargetResult>& results,
                                    const std::string& out_dir);

}  // namespace bioinfer::runtime
