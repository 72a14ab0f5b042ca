// Variant-effect scores from a language model's likelihoods (variant_scoring.h).
#include "runtime/variant_scoring.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>

#include "bioinfer/error.h"
#include "models/esm_alphabet.h"

namespace bioinfer::runtime {

namespace {

constexpr const char* kAminoAcids = "ACDEFGHIKLMNPQRSTVWY";

bool is_amino_acid(char c) {
    return c != 0 && std::strchr(kAminoAcids, c) != nullptr;
}

// One masked or unmasked copy of (a window of) a sequence, and the rows of it whose
// log-probabilities are wanted: (token row in `tokens`, output row).
struct Query {
    std::vector<int32_t> tokens;
    std::vector<std::pair<int64_t, int64_t>> rows;
};

// Runs the queries through the model in packed batches of at most toks_per_batch tokens (one
// query at least) and writes the log-softmax of each wanted row into out (rows, V).
void run_queries(lm::LanguageModel& model, const std::vector<Query>& queries, Tensor& out,
                 const ScoreOptions& o, int64_t& done, int64_t total) {
    const int64_t V = model.logits_width();
    lm::Request req;
    req.logits = true;
    size_t q = 0;
    while (q < queries.size()) {
        std::vector<std::vector<int32_t>> batch;
        std::vector<size_t> ids;
        int64_t toks = 0;
        while (q < queries.size() &&
               (batch.empty() || toks + int64_t(queries[q].tokens.size()) <= o.toks_per_batch)) {
            toks += int64_t(queries[q].tokens.size());
            batch.push_back(queries[q].tokens);
            ids.push_back(q++);
        }
        lm::Output r = model.forward(batch, req);
        BI_CHECK(r.logits.numel() > 0, "score", "the model returned no logits");
        for (size_t b = 0; b < ids.size(); ++b)
            for (const auto& [row, dst] : queries[ids[b]].rows) {
                const float* l = r.logits.f32() + (r.offsets[b] + row) * V;
                double mx = -std::numeric_limits<double>::infinity();
                for (int64_t t = 0; t < V; ++t) mx = std::max(mx, double(l[t]));
                double sum = 0.0;
                for (int64_t t = 0; t < V; ++t) sum += std::exp(double(l[t]) - mx);
                const double lse = mx + std::log(sum);
                float* d = out.f32() + dst * V;
                for (int64_t t = 0; t < V; ++t) d[t] = float(double(l[t]) - lse);
            }
        done += int64_t(ids.size());
        if (o.progress) o.progress(done, total);
    }
}

int32_t token_of(const lm::LanguageModel& model, char aa) {
    return model.tokenize(std::string(1, aa), "mutant").at(0);
}

// ProteinGym's get_optimal_window over token indices: the slice [a, b) of T tokens that scores
// token t with a window of W tokens.
std::pair<int64_t, int64_t> proteingym_window(int64_t t, int64_t T, int64_t W) {
    const int64_t half = W / 2;
    if (T <= W) return {0, T};
    if (t < half) return {0, W};
    if (t >= T - half) return {T - W, T};
    return {t - half, t + half};  // 2 * half tokens: W - 1 when W is odd, as ProteinGym's
}

// The centred rule: the residues [s, e) of L that score residue i with a window of R residues.
std::pair<int64_t, int64_t> centred_window(int64_t i, int64_t L, int64_t R) {
    if (L <= R) return {0, L};
    const int64_t half = R / 2;
    if (i < half) return {0, R};
    if (i >= L - half) return {L - R, L};
    return {i - half, i + half};
}

// One query per residue when masked; unmasked, one per distinct pass, holding every residue
// it scores.
std::vector<Query> queries_for(const std::vector<int32_t>& residues, bool masked,
                               WindowRule rule, int64_t window) {
    const std::vector<int32_t> tokens = esm::with_specials(residues);
    const int64_t T = int64_t(tokens.size()), L = T - 2;
    std::vector<Query> qs;
    std::map<std::pair<int64_t, int64_t>, size_t> by_window;  // unmasked: one pass per window
    for (int64_t i = 0; i < L; ++i) {
        const int64_t t = i + 1;  // residue i's token
        std::pair<int64_t, int64_t> span;  // tokens [a, b), or residues [s, e) when centred
        int64_t row = 0;                   // residue i's row in the pass
        if (rule == WindowRule::ProteinGym) {
            // ProteinGym windows masked passes only; its wild-type marginals see every token
            span = masked ? proteingym_window(t, T, window) : std::pair<int64_t, int64_t>{0, T};
            row = t - span.first;
        } else {
            span = centred_window(i, L, window - 2);
            row = i - span.first + 1;
        }
        if (!masked) {
            auto it = by_window.find(span);
            if (it != by_window.end()) {
                qs[it->second].rows.push_back({row, i});
                continue;
            }
            by_window[span] = qs.size();
        }
        Query q;
        if (rule == WindowRule::ProteinGym)
            q.tokens.assign(tokens.begin() + span.first, tokens.begin() + span.second);
        else
            q.tokens = esm::with_specials(std::vector<int32_t>(residues.begin() + span.first,
                                                               residues.begin() + span.second));
        if (masked) q.tokens[size_t(row)] = esm::kMask;
        q.rows.push_back({row, i});
        qs.push_back(std::move(q));
    }
    return qs;
}

}  // namespace

Mutant parse_mutant(const std::string& text, const std::string& wild_type, int64_t offset,
                    const std::string& where) {
    Mutant m;
    m.text = text;
    const int64_t L = int64_t(wild_type.size());
    size_t start = 0;
    while (true) {
        const size_t colon = text.find(':', start);
        const std::string part =
            text.substr(start, colon == std::string::npos ? colon : colon - start);
        BI_CHECK(part.size() >= 3, where, "malformed mutant '", text,
                 "' (expected e.g. A23V, multi-mutants joined by ':')");
        Substitution s;
        s.wt = char(std::toupper(static_cast<unsigned char>(part.front())));
        s.mt = char(std::toupper(static_cast<unsigned char>(part.back())));
        const std::string digits = part.substr(1, part.size() - 2);
        BI_CHECK(
            !digits.empty() &&
                std::all_of(digits.begin(), digits.end(),
                            [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) &&
                digits.size() <= 12,
            where, "malformed mutant '", text,
            "' (expected e.g. A23V, multi-mutants joined by ':')");
        BI_CHECK(is_amino_acid(s.mt), where, "mutant '", text, "': '", part.back(),
                 "' is not one of the 20 amino acids");
        const int64_t pos = std::stoll(digits);
        s.index = pos - offset;
        BI_CHECK(s.index >= 0 && s.index < L, where, "mutant '", text, "': position ", pos,
                 " is outside the sequence (", L, " residues numbered from ", offset, ")");
        const char have =
            char(std::toupper(static_cast<unsigned char>(wild_type[size_t(s.index)])));
        BI_CHECK(have == s.wt, where, "mutant '", text, "': the wild type has '", have,
                 "' at position ", pos, ", not '", s.wt, "'");
        for (const Substitution& o : m.subs)
            BI_CHECK(o.index != s.index, where, "mutant '", text, "' changes position ", pos,
                     " twice");
        m.subs.push_back(s);
        if (colon == std::string::npos) break;
        start = colon + 1;
    }
    return m;
}

std::vector<Mutant> deep_mutational_scan(const std::string& wild_type, int64_t offset) {
    std::vector<Mutant> out;
    for (size_t i = 0; i < wild_type.size(); ++i) {
        const char wt = char(std::toupper(static_cast<unsigned char>(wild_type[i])));
        for (const char* a = kAminoAcids; *a; ++a) {
            if (*a == wt) continue;
            Mutant m;
            m.text = std::string(1, wt) + std::to_string(int64_t(i) + offset) + *a;
            m.subs.push_back({int64_t(i), wt, *a});
            out.push_back(std::move(m));
        }
    }
    return out;
}

Strategy parse_strategy(const std::string& name) {
    if (name == "masked-marginals" || name == "masked_marginals") return Strategy::MaskedMarginals;
    if (name == "wt-marginals" || name == "wt_marginals") return Strategy::WtMarginals;
    if (name == "pseudo-ppl" || name == "pseudo_ppl") return Strategy::PseudoPpl;
    BI_CHECK(false, "--strategy", "expected masked-marginals, wt-marginals or pseudo-ppl, got '",
             name, "'");
    return Strategy::MaskedMarginals;
}

std::string strategy_name(Strategy s) {
    switch (s) {
        case Strategy::MaskedMarginals:
            return "masked-marginals";
        case Strategy::WtMarginals:
            return "wt-marginals";
        case Strategy::PseudoPpl:
            return "pseudo-ppl";
    }
    return "";
}

std::string strategy_column(Strategy s) {
    std::string n = strategy_name(s);
    std::replace(n.begin(), n.end(), '-', '_');
    return n;
}

WindowRule parse_window_rule(const std::string& name) {
    if (name == "proteingym") return WindowRule::ProteinGym;
    if (name == "centred" || name == "centered") return WindowRule::Centred;
    BI_CHECK(false, "--window-rule", "expected proteingym or centred, got '", name, "'");
    return WindowRule::ProteinGym;
}

std::string window_rule_name(WindowRule r) {
    return r == WindowRule::ProteinGym ? "proteingym" : "centred";
}

int64_t scoring_window(const lm::LanguageModel& model, const ScoreOptions& o,
                       const std::string& where) {
    const int64_t w = o.window != 0 ? o.window : model.context();
    BI_CHECK(w >= kMinScoringWindow, where, "the scoring window must be at least ",
             kMinScoringWindow, " tokens (<cls> and <eos> included), got ", w,
             o.window != 0 ? "" : " (the checkpoint's context)");
    return w;
}

namespace {

Tensor log_probs_of(lm::LanguageModel& model, const std::vector<int32_t>& residues, bool masked,
                    const ScoreOptions& o) {
    const auto qs =
        queries_for(residues, masked, o.rule, scoring_window(model, o, "scoring window"));
    Tensor out = Tensor::empty({int64_t(residues.size()), model.logits_width()});
    int64_t done = 0;
    run_queries(model, qs, out, o, done, int64_t(qs.size()));
    return out;
}

}  // namespace

Tensor position_log_probs(lm::LanguageModel& model, const std::string& sequence, bool masked,
                          const ScoreOptions& o) {
    return log_probs_of(model, model.tokenize(sequence, "wild type"), masked, o);
}

std::vector<double> marginal_scores(const lm::LanguageModel& model, const Tensor& log_probs,
                                    const std::vector<Mutant>& mutants) {
    const int64_t V = log_probs.shape()[1];
    std::map<char, int32_t> tok;
    auto token = [&](char c) {
        auto it = tok.find(c);
        if (it == tok.end()) it = tok.emplace(c, token_of(model, c)).first;
        return it->second;
    };
    std::vector<double> out;
    out.reserve(mutants.size());
    for (const Mutant& m : mutants) {
        double s = 0.0;
        for (const Substitution& sub : m.subs) {
            const float* row = log_probs.f32() + sub.index * V;
            s += double(row[token(sub.mt)]) - double(row[token(sub.wt)]);
        }
        out.push_back(s);
    }
    return out;
}

double pseudo_log_likelihood(lm::LanguageModel& model, const std::vector<int32_t>& residues,
                             const ScoreOptions& o) {
    const Tensor lp = log_probs_of(model, residues, /*masked=*/true, o);
    const int64_t V = lp.shape()[1];
    double s = 0.0;
    for (size_t i = 0; i < residues.size(); ++i) s += lp.f32()[int64_t(i) * V + residues[i]];
    return s;
}

double pseudo_log_likelihood(lm::LanguageModel& model, const std::string& sequence,
                             const ScoreOptions& o) {
    return pseudo_log_likelihood(model, model.tokenize(sequence, "sequence"), o);
}

std::vector<double> score_mutants(lm::LanguageModel& model, const std::string& wild_type,
                                  const std::vector<Mutant>& mutants, Strategy s,
                                  const ScoreOptions& o) {
    if (s != Strategy::PseudoPpl)
        return marginal_scores(
            model, position_log_probs(model, wild_type, s == Strategy::MaskedMarginals, o),
            mutants);
    // pseudo-ppl: PLL(mutant) - PLL(wild type), each PLL from L masked passes
    ScoreOptions inner = o;
    inner.progress = nullptr;
    const double wt = pseudo_log_likelihood(model, wild_type, inner);
    std::vector<double> out;
    out.reserve(mutants.size());
    for (size_t k = 0; k < mutants.size(); ++k) {
        std::string seq = wild_type;
        for (const Substitution& sub : mutants[k].subs) seq[size_t(sub.index)] = sub.mt;
        out.push_back(pseudo_log_likelihood(model, seq, inner) - wt);
        if (o.progress) o.progress(int64_t(k) + 1, int64_t(mutants.size()));
    }
    return out;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
    BI_CHECK(a.size() == b.size(), "spearman", "length mismatch");
    std::vector<size_t> keep;
    for (size_t i = 0; i < a.size(); ++i)
        if (std::isfinite(a[i]) && std::isfinite(b[i])) keep.push_back(i);
    const size_t n = keep.size();
    if (n < 2) return std::numeric_limits<double>::quiet_NaN();
    auto ranks = [&](const std::vector<double>& v) {
        std::vector<size_t> ord(n);
        std::iota(ord.begin(), ord.end(), 0);
        std::sort(ord.begin(), ord.end(),
                  [&](size_t x, size_t y) { return v[keep[x]] < v[keep[y]]; });
        std::vector<double> r(n);
        for (size_t i = 0; i < n;) {
            size_t j = i;
            while (j + 1 < n && v[keep[ord[j + 1]]] == v[keep[ord[i]]]) ++j;
            const double mean = 0.5 * double(i + j) + 1.0;
            for (size_t k = i; k <= j; ++k) r[ord[k]] = mean;
            i = j + 1;
        }
        return r;
    };
    const auto ra = ranks(a), rb = ranks(b);
    const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / double(n);
    const double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / double(n);
    double sab = 0, saa = 0, sbb = 0;
    for (size_t i = 0; i < n; ++i) {
        sab += (ra[i] - ma) * (rb[i] - mb);
        saa += (ra[i] - ma) * (ra[i] - ma);
        sbb += (rb[i] - mb) * (rb[i] - mb);
    }
    return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb)
                              : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace bioinfer::runtime
