// Comparing a predicted structure with a reference (`bioinfer compare`): residues paired by chain
// and number or by sequence alignment, then Calpha RMSD after optimal superposition, TM-score
// and Calpha lDDT. The prediction is a file, or a structure model's output in memory.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "io/structure.h"
#include "models/structure_model.h"

namespace bioinfer::runtime {

enum class Match { Auto, Number, Sequence };

struct Comparison {
    std::string matched_by;     // "number" or "sequence"
    int64_t pred_residues = 0, truth_residues = 0, aligned = 0, identical = 0;
    double rmsd = 0;            // Calpha RMSD over the aligned pairs after optimal superposition
    double tm_score = 0;        // normalised by the truth's length
    double d0 = 0;              // TM-score distance scale (Angstrom)
    double lddt = 0;            // Calpha lDDT against the truth (15 A radius; 0.5/1/2/4 A)
};

// The residues of sample `sample` of a prediction with a representative atom (Calpha), in
// order, as read_ca_residues reads them from the structure file written from it (B-factor: pLDDT
// 0-100).
std::vector<io::CaResidue> ca_residues(const bio::Prediction& p, size_t sample);

// Index pairs (pred, truth) of matched residues.
std::vector<std::pair<size_t, size_t>> match_residues(const std::vector<io::CaResidue>& pred,
                                                      const std::vector<io::CaResidue>& truth,
                                                      Match how, std::string* used);

Comparison compare_structures(const std::vector<io::CaResidue>& pred,
                              const std::vector<io::CaResidue>& truth, Match how = Match::Auto);

// Calpha RMSD of a and b (same length) after the optimal rigid superposition.
double superposed_rmsd(const std::vector<std::array<double, 3>>& a,
                       const std::vector<std::array<double, 3>>& b);

}  // namespace bioinfer::runtime
