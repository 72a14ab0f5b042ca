// Zero-shot variant-effect scores from a protein language model's likelihoods, as the ESM-1v
// paper defines them and the esm repository's variant-prediction script and ProteinGym compute
// them:
//  - masked marginals: for each mutated position i, log p(mt_i) - log p(wt_i) with position i
//    masked in the wild type (one masked pass per position of the protein, then every
//    substitution is a lookup);
//  - wild-type marginals: the same log-ratio from one unmasked pass over the wild type;
//  - pseudo-log-likelihood (pseudo-ppl): sum over every position i of log p(x_i) with i masked,
//    of the mutant's sequence (L masked passes per mutant).
// Log-probabilities are the log-softmax over the model's whole output vocabulary. Multi-mutants
// score as the sum of their singles under the marginal strategies. A protein longer than the
// scoring window runs, for each position, in the window ProteinGym picks: centred on it, clamped
// to the sequence's ends.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bioinfer/tensor.h"
#include "models/language_model.h"

namespace bioinfer::runtime {

struct Substitution {
    int64_t index = 0;  // 0-based position in the wild type
    char wt = 0, mt = 0;
};

struct Mutant {
    std::string text;  // as given ("A23V:G40W"), or generated ("A23V")
    std::vector<Substitution> subs;
};

// "A23V" or "A23V:G40W" (ProteinGym's form; 1-based positions numbered from `offset`, the
// number of the wild type's first residue). The wild type's letter must match the sequence, the
// position lie inside it, and the letters be amino acids; errors name `where` (e.g. "row 12").
Mutant parse_mutant(const std::string& text, const std::string& wild_type, int64_t offset,
                    const std::string& where);

// Every single substitution of the wild type: per position, the 20 amino acids
// (ACDEFGHIKLMNPQRSTVWY) other than the wild type's letter, numbered from `offset`. A position
// holding a non-standard letter gets all 20.
std::vector<Mutant> deep_mutational_scan(const std::string& wild_type, int64_t offset);

enum class Strategy { MaskedMarginals, WtMarginals, PseudoPpl };
Strategy parse_strategy(
    const std::string& name);             // "masked-marginals", "wt-marginals", "pseudo-ppl"
std::string strategy_name(Strategy s);    // as parse_strategy reads it
std::string strategy_column(Strategy s);  // the output column: "masked_marginals", ...

struct ScoreOptions {
    int64_t toks_per_batch = 4096;  // tokens per packed forward
    // Residues per pass at most (ProteinGym's 1022 for 1024-token models); 0: the whole protein.
    int64_t window = 1022;
    // Called after each forward with (passes done, passes in all).
    std::function<void(int64_t, int64_t)> progress;
};

// The window of residues [begin, end) scored for position i of a protein of `length` residues.
std::pair<int64_t, int64_t> scoring_window(int64_t i, int64_t length, int64_t window);

// (L, V) log-probabilities at every residue position of `sequence`: with that position masked
// (masked = true; L passes, packed into batches), or from unmasked passes (one per distinct
// window). Row i, column t: log p(token t at position i).
Tensor position_log_probs(lm::LanguageModel& model, const std::string& sequence, bool masked,
                          const ScoreOptions& o);

// The marginal score of each mutant from a table position_log_probs made for the wild type.
std::vector<double> marginal_scores(const lm::LanguageModel& model, const Tensor& log_probs,
                                    const std::vector<Mutant>& mutants);

// Sum over positions of log p(x_i | x with i masked): the pseudo-log-likelihood of `sequence`
// (or of residue tokens, as the model's tokenizer gives them).
double pseudo_log_likelihood(lm::LanguageModel& model, const std::string& sequence,
                             const ScoreOptions& o);
double pseudo_log_likelihood(lm::LanguageModel& model, const std::vector<int32_t>& residues,
                             const ScoreOptions& o);

// The mutants' scores under one strategy (pseudo-ppl: each mutant's sequence's
// pseudo-log-likelihood, L masked passes per mutant).
std::vector<double> score_mutants(lm::LanguageModel& model, const std::string& wild_type,
                                  const std::vector<Mutant>& mutants, Strategy s,
                                  const ScoreOptions& o);

// Spearman's rank correlation (ties take their mean rank) over the pairs where both are finite.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace bioinfer::runtime
