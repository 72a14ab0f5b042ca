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
// score as the sum of their singles under the marginal strategies.
//
// A protein whose tokens (<cls> residues <eos>, T = L + 2) outnumber the scoring window W runs
// in windows, by one of two rules (WindowRule):
//  - proteingym (the default), as ProteinGym's ESM scoring script with its default
//    --scoring-window optimal does: the masked pass for the residue at token t is the slice
//    [a, b) of the *whole* token sequence, masked at t, that get_optimal_window picks
//    (h = W / 2: [0, W) when t < h, [T - W, T) when t >= T - h, else [t - h, t + h), so W - 1
//    tokens for an odd W); a window in the middle holds neither <cls> nor <eos>. Wild-type
//    marginals run one unwindowed pass over all T tokens, as ProteinGym's do. Pseudo-ppl sums
//    the masked passes' log-probabilities in the same windows as masked marginals (ProteinGym's
//    compute_pppl does not window at all; this is its masked-marginal rule applied to each
//    masked residue, so a pseudo-log-likelihood never needs more than W tokens per pass).
//  - centred: the residue is scored in the window of W - 2 residues centred on it (clamped to
//    the sequence's ends), with <cls> and <eos> added to every pass; wild-type marginals run one
//    unmasked pass per distinct window.
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

// How a protein longer than the scoring window splits into passes (see the top of this file).
enum class WindowRule { ProteinGym, Centred };
WindowRule parse_window_rule(const std::string& name);  // "proteingym", "centred"
std::string window_rule_name(WindowRule r);              // as parse_window_rule reads it

// The smallest scoring window: 14 residues of context with <cls> and <eos>. Below it a window
// holds too little of the protein to mean anything, and under 3 tokens the rules break down
// (a window of 1 under ProteinGym's rule is empty).
constexpr int64_t kMinScoringWindow = 16;

struct ScoreOptions {
    int64_t toks_per_batch = 4096;  // tokens per packed forward
    WindowRule rule = WindowRule::ProteinGym;
    // Tokens per pass at most, <cls> and <eos> included (ProteinGym's model_window); 0: the
    // model's context (LanguageModel::context(): 1024 for ESM-2, 2048 for ESM C).
    int64_t window = 0;
    // Called after each forward with (passes done, passes in all).
    std::function<void(int64_t, int64_t)> progress;
};

// The window a run uses: o.window, or the model's context when that is 0; at least
// kMinScoringWindow (an error naming `where` otherwise).
int64_t scoring_window(const lm::LanguageModel& model, const ScoreOptions& o,
                       const std::string& where);

// (L, V) log-probabilities at every residue position of `sequence`: with that position masked
// (masked = true; L passes, packed into batches), or from unmasked passes (one, or one per
// distinct window under the centred rule). Row i, column t: log p(token t at position i).
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
