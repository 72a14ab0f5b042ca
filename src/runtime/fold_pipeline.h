// The structure-prediction job behind `bioinfer predict`: collect and validate targets, check
// each fits in memory before any work starts, fold them one at a time with the weights resident,
// and write per target a structure (PDB or mmCIF), a confidence JSON and optionally the PAE
// matrix (npy) with a pLDDT/PAE plot (PNG).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/esmfold/esmfold.h"

namespace bioinfer::runtime {

struct FoldRecord {
    std::string id, source, sequence;  // sequence upper-cased, ':' between chains
    esmfold::EncodedTarget encoded;
    int64_t residues = 0;  // without linkers
};

// INPUT as for embed (FASTA file, folder, bare sequence); letters A-Z in either case (those
// outside the 20 amino acids fold as X, as upstream), ':' between chains.
std::vector<FoldRecord> collect_fold_records(const std::string& input);

struct PredictOptions {
    std::string out_dir;
    std::string format = "pdb";  // pdb | cif
    bool write_pae = false;
    int num_recycles = -1;       // -1: the model's default
    int64_t chunk = 0;           // 0: automatic
    std::string model_label;
    bool quiet = false;
};

// Bytes the fold of an L-residue target needs at most beyond the weights (pair state, triangle
// products, structure-module copies, chunk temporaries).
int64_t fold_memory_bytes(const esmfold::EsmFoldConfig& c, int64_t L);
// Memory the process may still use (MemAvailable), in bytes; 0 when unknown.
int64_t available_memory_bytes();
// Errors, naming the record, when a target needs more than `budget` bytes (0: no check).
void check_fold_memory(const esmfold::EsmFoldConfig& c, const std::vector<FoldRecord>& recs,
                       int64_t budget);

struct PredictStats {
    int64_t targets = 0, residues = 0;
    double seconds = 0;
};

PredictStats run_predict(const esmfold::EsmFoldModel& model, const std::vector<FoldRecord>& recs,
                         const PredictOptions& opts);

}  // namespace bioinfer::runtime
