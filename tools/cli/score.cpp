// bioinfer score: zero-shot variant-effect scores (masked marginals, wild-type marginals,
// pseudo-log-likelihood) of a protein's mutants from ESM-2 / ESM C likelihoods.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "args.h"
#include "bioinfer/error.h"
#include "core/threads.h"
#include "io/atomic_file.h"
#include "io/limits.h"
#include "io/model_dir.h"
#include "models/language_model.h"
#include "runtime/inputs.h"
#include "runtime/progress.h"
#include "runtime/variant_scoring.h"

namespace bioinfer::cli {

static const char* kScoreHelp =
    R"(usage: bioinfer score INPUT (--weights DIR | --model NAME) --out FILE (--mutations CSV | --dms)
                     [options]

Scores mutants of one protein by the model's likelihoods (ESM-1v's zero-shot strategies).
INPUT is a FASTA file holding the wild type (one record) or a bare protein sequence.

  --weights DIR        Hugging Face ESM-2 or ESM C directory
  --model NAME         e.g. esm2_t33_650M_UR50D (see `bioinfer weights`)
  --out FILE           the scores, CSV: the input's columns, then one column per strategy
  --mutations CSV      a CSV with a `mutant` column in ProteinGym's form: A23V, multi-mutants
                       joined by ':' (A23V:G40W), positions 1-based
  --dms                every single substitution at every position instead (19 x L rows)
  --strategy LIST      masked-marginals (default; one masked pass per position), wt-marginals
                       (one pass), pseudo-ppl (L masked passes per mutant); several joined by ','
  --offset N           the number of the wild type's first residue (default 1)
  --scoring-window N   tokens per forward pass at most, <cls> and <eos> included (default: the
                       checkpoint's context from its config.json, 1024 for ESM-2 and 2048 for
                       ESM C; at least 16); a longer protein is scored in windows
  --window-rule R      how a longer protein is windowed: proteingym (default; ProteinGym's
                       get_optimal_window, a slice of the token sequence around each masked
                       position, with wt-marginals in one unwindowed pass) or centred (each
                       position in the window of N - 2 residues centred on it, <cls> and <eos>
                       added to every pass)
  --score-column NAME  an experimental score in the CSV: prints Spearman's rho of each strategy
                       against it and writes them to the summary; rows whose value is not a
                       number are left out of rho and counted in a warning
  --skip-bad-rows      score the valid rows when some are malformed, and list the skipped ones
  --toks-per-batch N   tokens per packed forward (default 4096)
  --precision P        fp32 (default), bf16 or int8 (as for embed)
  --threads N          threads (default: all cores)
  --quiet              no progress display
  --allow-nonfinite    load weights holding NaN or Inf (refused by default)
  --max-input-size S   largest FASTA or mutations CSV read (default 2G)
  --max-records N      rows in the mutations CSV (default 1000000)

Marginal strategies score a multi-mutant as the sum of its singles; pseudo-ppl scores the
mutant's sequence: its pseudo-log-likelihood minus the wild type's. A summary goes next to the
scores (FILE.json): the model, precision, window rule and window, skipped rows, per strategy
the seconds and forward passes, and the Spearman rhos.
)";

namespace {

// One CSV record's fields (RFC 4180: quoted fields may hold commas, quotes doubled, newlines).
// `line` counts lines as they are read; a quote still open at the end of the file is an error
// naming `where` and the line it opened on (read on, it would only show as a short record).
bool read_csv_record(std::istream& in, std::vector<std::string>& fields, int64_t& line,
                     const std::string& where) {
    fields.clear();
    std::string field;
    bool quoted = false, any = false;
    int64_t quote_line = 0;
    int c;
    while ((c = in.get()) != EOF) {
        any = true;
        if (quoted) {
            if (c == '"') {
                if (in.peek() == '"') {
                    field += '"';
                    in.get();
                } else {
                    quoted = false;
                }
            } else {
                if (c == '\n') ++line;
                field += char(c);
            }
        } else if (c == '"') {
            quoted = true;
            quote_line = line;
        } else if (c == ',') {
            fields.push_back(field);
            field.clear();
        } else if (c == '\n') {
            ++line;
            break;
        } else if (c != '\r') {
            field += char(c);
        }
    }
    if (!any) return false;
    BI_CHECK(!quoted, where, "unterminated quote: the quoted field opened on line ", quote_line,
             " runs to the end of the file");
    fields.push_back(field);
    return true;
}

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

std::string format_score(double v) {
    if (!std::isfinite(v)) return "";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return buf;
}

// A finite number, spaces around it allowed (as pandas reads one); "", "NA", "nan" or "inf"
// are not.
bool parse_number(const std::string& s, double& v) {
    const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
    if (b == std::string::npos) return false;
    const std::string t = s.substr(b, e - b + 1);
    char* end = nullptr;
    v = std::strtod(t.c_str(), &end);
    return end && *end == '\0' && std::isfinite(v);
}

// Why Spearman's rho came out undefined, for the line that reports it.
std::string why_no_rho(const std::vector<double>& a, const std::vector<double>& b) {
    size_t pairs = 0;
    for (size_t i = 0; i < a.size(); ++i) pairs += std::isfinite(a[i]) && std::isfinite(b[i]);
    if (pairs < 2) return cat("fewer than 2 rows have both a score and a number (", pairs, ")");
    return "the scores or the measured values are all equal";
}

// The --strategy list, in its order.
std::vector<runtime::Strategy> parse_strategies(const Args& a) {
    std::vector<runtime::Strategy> strategies;
    std::stringstream ss(a.get("strategy", "masked-marginals"));
    std::string s;
    while (std::getline(ss, s, ','))
        if (!s.empty()) strategies.push_back(runtime::parse_strategy(s));
    BI_CHECK(!strategies.empty(), "--strategy", "no strategy given");
    return strategies;
}

// The window rule, the scoring window (0: the checkpoint's context) and the batch size.
runtime::ScoreOptions score_options(const Args& a) {
    runtime::ScoreOptions so;
    so.rule = runtime::parse_window_rule(a.get("window-rule", "proteingym"));
    if (a.has("scoring-window")) {  // else 0: the checkpoint's context, known once it loads
        so.window = a.get_int_in("scoring-window", 0, std::numeric_limits<long long>::min(),
                                 kMaxTokensOption);
        BI_CHECK(so.window >= runtime::kMinScoringWindow, "--scoring-window", "must be at least ",
                 runtime::kMinScoringWindow, " tokens (<cls> and <eos> included), got ", so.window,
                 " (leave it out for the checkpoint's context; a window of the "
                 "protein's length + 2 or more scores it in one pass)");
    }
    so.toks_per_batch = a.get_int_in("toks-per-batch", 4096, 1, kMaxTokensOption);
    return so;
}

// The wild type: INPUT's one record.
std::string read_wild_type(const std::string& input) {
    const auto records = runtime::collect_fasta(input);
    BI_CHECK(records.size() == 1, input, "expected one wild-type sequence, got ", records.size(),
             " records");
    BI_CHECK(records[0].error.empty(), input, records[0].error);
    return records[0].sequence;
}

// The mutants to score and the rows of the output they come with: the input's columns (or
// `mutant` alone for --dms), the skipped rows, and the --score-column values (NaN: none).
struct MutantTable {
    std::vector<std::string> header;
    std::vector<std::vector<std::string>> rows;
    std::vector<runtime::Mutant> mutants;
    std::vector<std::string> skipped;
    std::vector<double> measured;
    int64_t not_numbers = 0;  // --score-column values that are not numbers
};

// --dms: every single substitution at every position.
MutantTable dms_mutants(const std::string& wt, int64_t offset, const std::string& score_col) {
    BI_CHECK(score_col.empty(), "--score-column", "needs --mutations (a CSV holding the scores)");
    MutantTable t;
    t.mutants = runtime::deep_mutational_scan(wt, offset);
    t.header = {"mutant"};
    for (const auto& m : t.mutants) t.rows.push_back({m.text});
    return t;
}

// --mutations CSV: every row checked (a bad one skipped with --skip-bad-rows, else refused) and
// its --score-column value read, before the model loads.
MutantTable read_mutants(const Args& a, const std::string& wt, int64_t offset,
                         const std::string& score_col) {
    MutantTable t;
    std::vector<std::string>& header = t.header;
    const std::string path = a.get("mutations");
    std::istringstream in(io::read_input_file(path));  // bounded; a device is refused
    int64_t line = 1;
    BI_CHECK(read_csv_record(in, header, line, path + " header (line 1)"), path,
             "empty file (expected a header with a 'mutant' column)");
    const auto col = std::find(header.begin(), header.end(), "mutant");
    BI_CHECK(col != header.end(), path, "no 'mutant' column in the header");
    const size_t mcol = size_t(col - header.begin());
    size_t scol = 0;
    if (!score_col.empty()) {
        const auto sc = std::find(header.begin(), header.end(), score_col);
        BI_CHECK(sc != header.end(), path, "no '", score_col, "' column (--score-column)");
        scol = size_t(sc - header.begin());
    }
    std::vector<std::string> f;
    int64_t row_no = 0;
    std::string first_not_number;  // "row N (line L), 'value'"
    while (true) {
        const int64_t at = line;  // the line this record starts on
        const std::string where = cat(path, " row ", row_no + 1, " (line ", at, ")");
        if (!read_csv_record(in, f, line, where)) break;
        if (f.size() == 1 && f[0].empty()) continue;  // a blank line
        ++row_no;
        BI_CHECK(row_no <= io::input_limits().records, where, "more than ",
                 io::input_limits().records, " rows (--max-records raises it)");
        try {
            BI_CHECK(f.size() == header.size(), where, "", f.size(), " fields, the header has ",
                     header.size());
            t.mutants.push_back(runtime::parse_mutant(f[mcol], wt, offset, where));
        } catch (const std::exception& e) {
            if (!a.has("skip-bad-rows"))
                throw std::runtime_error(std::string(e.what()) +
                                         " (--skip-bad-rows scores the others)");
            t.skipped.push_back(e.what());
            continue;
        }
        double v = std::nan("");
        if (!score_col.empty() && !parse_number(f[scol], v)) {
            v = std::nan("");
            if (t.not_numbers++ == 0)
                first_not_number = where.substr(path.size() + 1) + ", '" + f[scol].substr(0, 40) +
                                   (f[scol].size() > 40 ? "...'" : "'");
        }
        t.measured.push_back(v);
        t.rows.push_back(f);
    }
    BI_CHECK(!t.mutants.empty(), path, "no mutant to score");
    // A column without a single number is the wrong column: say so before the model loads.
    // A few rows without one (an assay's missing values) are left out of rho, as pandas'
    // Spearman leaves out NaN, and named so that a typo does not pass unseen.
    BI_CHECK(t.not_numbers < int64_t(t.measured.size()), path, "column '", score_col,
             "' (--score-column) holds no number in any of its ", t.measured.size(),
             " rows (the first: ", first_not_number, ")");
    if (t.not_numbers > 0)
        std::fprintf(stderr,
                     "score: warning: --score-column %s: %lld of %zu rows hold no number "
                     "and are left out of Spearman's rho (the first: %s)\n",
                     shown_bytes(score_col).c_str(), (long long)t.not_numbers, t.measured.size(),
                     shown_bytes(first_not_number).c_str());
    for (const std::string& s : t.skipped) std::fprintf(stderr, "skipped: %s\n", s.c_str());
    return t;
}

// Every strategy's scores of the mutants, in order; the summary takes each one's seconds and
// forward passes (and Spearman's rho against --score-column, also printed).
struct StrategyScores {
    std::vector<std::vector<double>> scores;
    double seconds = 0;  // all strategies
    int64_t passes = 0;
};

StrategyScores score_strategies(lm::LanguageModel& model, const std::string& wt,
                                const MutantTable& t,
                                const std::vector<runtime::Strategy>& strategies,
                                runtime::ScoreOptions so, const std::string& score_col, bool quiet,
                                nlohmann::json& summary) {
    StrategyScores out;
    for (runtime::Strategy s : strategies) {
        const std::string name = runtime::strategy_name(s);
        std::unique_ptr<runtime::Progress> progress;
        int64_t passes = 0, shown = 0;
        so.progress = [&](int64_t done, int64_t total) {
            passes = total;
            if (!progress)
                progress = std::make_unique<runtime::Progress>(
                    runtime::ProgressOptions{
                        .label = "score " + name,
                        .items = s == runtime::Strategy::PseudoPpl ? "mutants" : "passes",
                        .tokens = "",
                        .quiet = quiet,
                        .log_path = ""},
                    total);
            for (; shown < done; ++shown) progress->done(name, 0, 0.0);
            if (done == total) progress->finish();
        };
        const auto t0 = std::chrono::steady_clock::now();
        out.scores.push_back(runtime::score_mutants(model, wt, t.mutants, s, so));
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (s == runtime::Strategy::PseudoPpl)
            passes = int64_t(t.mutants.size() + 1) * int64_t(wt.size());
        summary["strategies"][runtime::strategy_column(s)] = {{"seconds", seconds},
                                                              {"passes", passes}};
        out.seconds += seconds;
        out.passes += passes;
        if (!score_col.empty()) {
            const double rho = runtime::spearman(out.scores.back(), t.measured);
            if (std::isfinite(rho))
                std::fprintf(stderr, "%s: Spearman's rho against %s = %.4f\n", name.c_str(),
                             shown_bytes(score_col).c_str(), rho);
            else
                std::fprintf(stderr, "%s: Spearman's rho against %s is undefined: %s\n",
                             name.c_str(), shown_bytes(score_col).c_str(),
                             why_no_rho(out.scores.back(), t.measured).c_str());
            summary["spearman"][runtime::strategy_column(s)] =
                std::isfinite(rho) ? nlohmann::json(rho) : nlohmann::json();
        }
    }
    return out;
}

// The scores CSV: the input's columns, then one column per strategy.
std::string scores_csv(const MutantTable& t, const std::vector<runtime::Strategy>& strategies,
                       const std::vector<std::vector<double>>& scores) {
    std::string out;
    for (size_t c = 0; c < t.header.size(); ++c) out += (c ? "," : "") + csv_field(t.header[c]);
    for (runtime::Strategy s : strategies) out += "," + runtime::strategy_column(s);
    out += "\n";
    for (size_t r = 0; r < t.rows.size(); ++r) {
        for (size_t c = 0; c < t.rows[r].size(); ++c)
            out += (c ? "," : "") + csv_field(t.rows[r][c]);
        for (const auto& sc : scores) out += "," + format_score(sc[r]);
        out += "\n";
    }
    return out;
}

}  // namespace

int score_main(int argc, char** argv) {
    Args a =
        parse_args(argc, argv,
                   {"weights", "model", "out", "mutations", "strategy", "offset", "scoring-window",
                    "window-rule", "score-column", "toks-per-batch", "precision", "threads",
                    "cache-dir", "max-input-size", "max-records"},
                   {"dms", "skip-bad-rows", "quiet", "offline", "fast", "help", "allow-nonfinite"});
    if (a.has("help")) {
        std::fputs(kScoreHelp, stdout);
        return 0;
    }
    BI_CHECK(a.positional.size() == 1, "arguments", "expected one INPUT, got ", a.positional.size(),
             " (see --help)");
    BI_CHECK(a.has("out"), "--out", "required: the CSV to write");
    BI_CHECK(a.has("mutations") != a.has("dms"), "arguments",
             "give exactly one of --mutations CSV or --dms");
    set_num_threads(threads_from(a));
    const std::vector<runtime::Strategy> strategies = parse_strategies(a);
    io::set_allow_nonfinite(a.has("allow-nonfinite"));
    apply_input_limits(a);
    const int64_t offset = a.get_int_in("offset", 1, -(1LL << 30), 1LL << 30);
    const runtime::ScoreOptions so = score_options(a);
    const std::string precision = apply_precision(a, /*allow_int8=*/true);
    const std::string wt = read_wild_type(a.positional[0]);
    const std::string score_col = a.get("score-column", "");
    const MutantTable t =
        a.has("dms") ? dms_mutants(wt, offset, score_col) : read_mutants(a, wt, offset, score_col);

    const std::string dir = weights_dir_from(a);
    const io::ModelDir model_dir = io::ModelDir::open(dir);
    if (!a.has("quiet")) std::fprintf(stderr, "score: loading %s\n", dir.c_str());
    auto model = lm::load(model_dir);
    BI_CHECK(model->has_logits(), dir, "the model has no language-model head to score with");
    const int64_t context = model->context();
    const int64_t window = runtime::scoring_window(*model, so, "--scoring-window");
    const int64_t wt_tokens = int64_t(wt.size()) + 2;
    // Past its context a model sees positions it was not trained on: allowed (the positions are
    // rotary), but said.
    if (window > context)
        std::fprintf(stderr,
                     "score: warning: --scoring-window %lld is more than the checkpoint's "
                     "context of %lld tokens\n",
                     (long long)window, (long long)context);
    const bool wt_marginals = std::find(strategies.begin(), strategies.end(),
                                        runtime::Strategy::WtMarginals) != strategies.end();
    if (wt_marginals && so.rule == runtime::WindowRule::ProteinGym && wt_tokens > context)
        std::fprintf(stderr,
                     "score: warning: wt-marginals runs one unwindowed pass of %lld tokens, more "
                     "than the checkpoint's context of %lld, as ProteinGym's does "
                     "(--window-rule centred windows it)\n",
                     (long long)wt_tokens, (long long)context);

    nlohmann::json summary = {
        {"input", a.positional[0]},
        {"model", a.has("model") ? a.get("model") : dir},
        {"precision", precision},
        {"rows", t.mutants.size()},
        {"skipped_rows", t.skipped},
        {"window_rule", runtime::window_rule_name(so.rule)},
        {"scoring_window", window},
        {"scoring_window_from", so.window != 0 ? "--scoring-window" : "checkpoint"},
        {"model_context", context},
        {"wild_type_tokens", wt_tokens},
        {"windowed", wt_tokens > window}};
    if (!score_col.empty()) summary["score_column_not_numbers"] = t.not_numbers;
    const StrategyScores scored =
        score_strategies(*model, wt, t, strategies, so, score_col, a.has("quiet"), summary);

    const std::string out_path = a.get("out");
    io::write_file_atomic(out_path, scores_csv(t, strategies, scored.scores));
    summary["seconds_scoring"] = scored.seconds;
    summary["passes"] = scored.passes;
    summary["threads"] = num_threads();
    io::write_file_atomic(out_path + ".json", summary.dump(2) + "\n");
    if (!a.has("quiet"))
        std::fprintf(stderr, "score: %zu mutants scored%s -> %s\n", t.mutants.size(),
                     t.skipped.empty()
                         ? ""
                         : (", " + std::to_string(t.skipped.size()) + " rows skipped").c_str(),
                     out_path.c_str());
    return 0;
}

}  // namespace bioinfer::cli
