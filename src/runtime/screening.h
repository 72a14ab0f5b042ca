// Ligand screening with Boltz-2: one input file (the receptor, and whatever else the complex holds)
// and a file of SMILES; every ligand is one target (the input with the ligand added as a chain),
// run as one job (weights resident, sharding and resume as for any folder of inputs), and a
// summary table of every ligand's scores.
#pragma once
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

// The first chain id of L..Z, then A..K, that the input file does not use.
std::string free_ligand_chain(const std::string& input_path, const fold::ModelSpec& spec);

// One target per ligand: the input file with the ligand added as chain `chain`, named after the
// ligand, and with `affinity` the affinity binder. A ligand the model cannot take (a SMILES RDKit
// refuses, one too large for the affinity module) carries its error and fails alone.
std::vector<FoldRecord> collect_screening_records(const std::string& input_path,
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
