// `bioinfer score` against the reference scores (tools/reference/make_score_fixtures.py:
// transformers, the esm variant-prediction script's and ProteinGym's way) on the tiny ESM-2 and
// ESM C fixtures: every strategy, single and multi-mutants, a protein longer than the
// checkpoint's context under ProteinGym's window rule and one under the centred rule, a DMS;
// the window's limits; bad mutation files failing on the row at fault (an unterminated quote
// on the line it opened); and --score-column values that are not numbers.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_util.h"
#include "io/atomic_file.h"
#include "io/npy.h"

namespace fs = std::filesystem;
using namespace bioinfer;

namespace {

const std::string kScoreFix = std::string(BIOINFER_FIXTURES) + "/score";

// Rows of a CSV file (quoted fields with commas and doubled quotes; no newline inside a field;
// LF or CRLF).
std::vector<std::vector<std::string>> read_csv(const std::string& path) {
    std::vector<std::vector<std::string>> rows;
    std::istringstream in(io::read_file(path));
    std::string line;
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();  // the fixtures end lines CRLF
        std::vector<std::string> f(1);
        bool q = false;
        for (size_t i = 0; i < line.size(); ++i) {
            const char c = line[i];
            if (q && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
                f.back() += '"';
                ++i;
            } else if (c == '"') {
                q = !q;
            } else if (c == ',' && !q) {
                f.emplace_back();
            } else {
                f.back() += c;
            }
        }
        rows.push_back(f);
    }
    return rows;
}

std::vector<double> column(const std::vector<std::vector<std::string>>& rows,
                           const std::string& name) {
    const auto& h = rows.at(0);
    const size_t c = size_t(std::find(h.begin(), h.end(), name) - h.begin());
    EXPECT_LT(c, h.size()) << "no column " << name;
    std::vector<double> v;
    for (size_t r = 1; r < rows.size() && c < h.size(); ++r) v.push_back(std::stod(rows[r].at(c)));
    return v;
}

double max_abs_diff(const std::vector<double>& a, const nlohmann::json& b) {
    EXPECT_EQ(a.size(), b.size());
    double m = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i)
        m = std::max(m, std::fabs(a[i] - b[i].get<double>()));
    return m;
}

struct Score : test::CliTest {
    nlohmann::json expected = nlohmann::json::parse(io::read_file(kScoreFix + "/expected.json"));
    std::string model_dir(const std::string& m) const {
        return std::string(BIOINFER_FIXTURES) + "/" + m;
    }
    // The model case `c` runs: the fixture, or a copy whose config.json takes the case's
    // checkpoint_config (a smaller max_position_embeddings, so a shorter context).
    std::string model_for(const std::string& m, const std::string& c) const {
        const auto& cs = expected["cases"][c];
        if (!cs.contains("checkpoint_config") || !cs["checkpoint_config"].contains(m))
            return model_dir(m);
        const fs::path dir = tmp / ("ctx_" + m);
        if (fs::exists(dir)) return dir.string();
        fs::create_directories(dir);
        for (const auto& e : fs::directory_iterator(model_dir(m)))
            if (e.path().filename() != "config.json")
                fs::create_symlink(e.path(), dir / e.path().filename());
        auto config = nlohmann::json::parse(io::read_file(model_dir(m) + "/config.json"));
        config.update(cs["checkpoint_config"][m]);
        io::write_file_atomic((dir / "config.json").string(), config.dump(2));
        return dir.string();
    }
    // The wild type and the case's rule and window: the default rule (ProteinGym's) and the
    // checkpoint's window are left to the command.
    std::string case_args(const std::string& c) const {
        const auto& cs = expected["cases"][c];
        std::string args = kScoreFix + "/" + c + ".fasta --offset " +
                           std::to_string(cs["offset"].get<int>());
        if (cs["rule"] != "proteingym") args += " --window-rule " + cs["rule"].get<std::string>();
        if (!cs["window"].is_null())
            args += " --scoring-window " + std::to_string(cs["window"].get<int>());
        return args;
    }
    int64_t wild_type_tokens(const std::string& c) const {
        return int64_t(expected["cases"][c]["wild_type"].get<std::string>().size()) + 2;
    }
};

}  // namespace

TEST_F(Score, EveryStrategyMatchesTheReference) {
    for (const std::string m : {"esm2_tiny", "esmc_tiny"})
        for (const std::string c : {"short", "window", "long"}) {
            SCOPED_TRACE(m + " " + c);
            const std::string out = p(m + "_" + c + ".csv");
            test::Result r = run("score " + case_args(c) + " --weights " + model_for(m, c) +
                                 " --mutations " + kScoreFix + "/" + c + ".csv" +
                                 " --strategy masked-marginals,wt-marginals,pseudo-ppl" +
                                 " --score-column DMS_score --threads 2 --quiet --out " + out);
            ASSERT_EQ(r.rc, 0) << r.err;
            const auto rows = read_csv(out);
            const auto in = read_csv(kScoreFix + "/" + c + ".csv");
            ASSERT_EQ(rows.size(), in.size());
            for (size_t i = 0; i < in.size(); ++i)  // the input's columns, untouched
                EXPECT_EQ(std::vector<std::string>(rows[i].begin(), rows[i].begin() + 3), in[i]);
            EXPECT_EQ(rows[0],
                      (std::vector<std::string>{"mutant", "DMS_score", "note", "masked_marginals",
                                                "wt_marginals", "pseudo_ppl"}));
            const auto& want = expected["models"][m][c];
            const auto& cs = expected["cases"][c];
            const auto summary = nlohmann::json::parse(io::read_file(out + ".json"));
            // the rule and window the reference used, the window from the checkpoint by default
            EXPECT_EQ(summary["window_rule"], cs["rule"]);
            EXPECT_EQ(summary["scoring_window"], want["window"]);
            EXPECT_EQ(summary["scoring_window_from"],
                      cs["window"].is_null() ? "checkpoint" : "--scoring-window");
            EXPECT_EQ(summary["windowed"], wild_type_tokens(c) > want["window"].get<int64_t>());
            // ProteinGym's wild-type marginals run unwindowed past the context, and say so
            const bool past_context =
                cs["rule"] == "proteingym" && wild_type_tokens(c) > summary["model_context"];
            EXPECT_EQ(r.err.find("wt-marginals runs one unwindowed pass of " +
                                 std::to_string(wild_type_tokens(c)) + " tokens") !=
                          std::string::npos,
                      past_context)
                << r.err;
            for (const std::string s : {"masked_marginals", "wt_marginals", "pseudo_ppl"}) {
                const double d = max_abs_diff(column(rows, s), want[s]);
                std::printf("[score] %s %s (%s, window %d) %s: max-abs %.2e against the "
                            "reference\n",
                            m.c_str(), c.c_str(), cs["rule"].get<std::string>().c_str(),
                            want["window"].get<int>(), s.c_str(), d);
                EXPECT_LE(d, 1e-4) << s;
                EXPECT_NEAR(summary["spearman"][s].get<double>(),
                            want["spearman_vs_DMS_score"][s].get<double>(), 1e-9)
                    << s;
            }
            EXPECT_NE(r.err.find("Spearman"), std::string::npos) << r.err;
        }
}

TEST_F(Score, DeepMutationalScanMatchesTheReference) {
    for (const std::string m : {"esm2_tiny", "esmc_tiny"}) {
        SCOPED_TRACE(m);
        test::Result r =
            run("score " + case_args("short") + " --weights " + model_dir(m) +
                " --dms --strategy masked-marginals,wt-marginals --quiet --out " + p("dms.csv"));
        ASSERT_EQ(r.rc, 0) << r.err;
        const auto rows = read_csv(p("dms.csv"));
        const auto& want = expected["models"][m]["short"];
        ASSERT_EQ(rows.size(), want["dms_mutants"].size() + 1);
        for (size_t i = 1; i < rows.size(); ++i) ASSERT_EQ(rows[i][0], want["dms_mutants"][i - 1]);
        EXPECT_LE(max_abs_diff(column(rows, "masked_marginals"), want["dms_masked_marginals"]),
                  1e-4);
        EXPECT_LE(max_abs_diff(column(rows, "wt_marginals"), want["dms_wt_marginals"]), 1e-4);
    }
}

TEST_F(Score, ScoresDoNotDependOnTheBatchSize) {
    std::vector<double> first;
    for (const char* toks : {"44", "100000"}) {
        test::Result r =
            run("score " + case_args("long") + " --weights " + model_for("esm2_tiny", "long") +
                " --mutations " + kScoreFix + "/long.csv --quiet --toks-per-batch " + toks +
                " --out " + p("b.csv"));
        ASSERT_EQ(r.rc, 0) << r.err;
        const auto v = column(read_csv(p("b.csv")), "masked_marginals");
        if (first.empty()) {
            first = v;
            continue;
        }
        ASSERT_EQ(v.size(), first.size());
        for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], first[i], 1e-5) << i;
    }
}

TEST_F(Score, BadMutationFilesFailOnTheRow) {
    // mutants built from the fixture: its wild type and the first two rows of short.csv, which
    // the reference scored
    const std::string wt = kScoreFix + "/short.fasta";
    const std::string seq = expected["cases"]["short"]["wild_type"].get<std::string>();
    const auto fixture_rows = read_csv(kScoreFix + "/short.csv");
    ASSERT_GE(fixture_rows.size(), 3u);
    ASSERT_GE(seq.size(), 3u);
    const std::string m1 = fixture_rows[1][0], m2 = fixture_rows[2][0];  // e.g. Y1L, K2G
    const std::string w1(1, seq[0]), w2(1, seq[1]), w3(1, seq[2]);
    const char wrong = seq[1] == 'A' ? 'C' : 'A';  // not the wild type at position 2
    const std::string len = std::to_string(seq.size() + 1);
    const std::string bad_row2 = w2 + "2";  // no substitute
    const std::string wrong_wt = std::string(1, wrong) + "2G";
    const std::string outside = w1 + len + "L";
    const std::string not_aa = w1 + "1J";
    const std::string g2 = w2 + "2G", g3 = w3 + "3G";
    const struct {
        std::string csv, needle;
    } cases[] = {
        {"variant,x\n" + m1 + ",1\n", "no 'mutant' column"},
        {"mutant\n" + m1 + "\n" + bad_row2 + "\n", "row 2 (line 3)] malformed mutant '" + bad_row2 + "'"},
        {"mutant\n" + m1 + "\n" + wrong_wt + "\n",
         "row 2 (line 3)] mutant '" + wrong_wt + "': the wild type has '" + w2 + "' at position 2"},
        {"mutant\n" + m1 + "\n" + outside + "\n",
         "row 2 (line 3)] mutant '" + outside + "': position " + len + " is outside the sequence"},
        {"mutant\n" + not_aa + "\n",
         "row 1 (line 2)] mutant '" + not_aa + "': 'J' is not one of the 20 amino acids"},
        {"mutant,x\n" + m1 + "\n", "row 1 (line 2)] 1 fields, the header has 2"},
        // a quote left open swallows the rest of the file: named where it opened
        {"mutant,x\n" + m1 + ",1\n" + g2 + ",\"a\n" + g3 + ",2\n",
         "row 2 (line 3)] unterminated quote: the quoted field opened on line 3 runs to the end "
         "of the file"},
        {"mutant,x\n" + m1 + ",\"a\nb\"\n" + g2 + ",1,\"c\n",
         "row 2 (line 4)] unterminated quote: the quoted field opened on line 4"},
        {"mutant,\"x\n" + m1 + "\n", "header (line 1)] unterminated quote: the quoted field opened on "
                                    "line 1"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.csv);
        write("m.csv", c.csv);
        test::Result r = run("score " + wt + " --weights " + model_dir("esm2_tiny") +
                             " --mutations " + p("m.csv") + " --quiet --out " + p("o.csv"));
        EXPECT_EQ(r.rc, 1);
        EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_FALSE(fs::exists(p("o.csv")));
    }
    // an unterminated quote is the file's fault, not a row's: --skip-bad-rows stops on it too
    write("m.csv", "mutant,x\n" + m1 + ",1\n" + g2 + ",\"a\n");
    test::Result r = run("score " + wt + " --weights " + model_dir("esm2_tiny") + " --mutations " +
                         p("m.csv") + " --skip-bad-rows --quiet --out " + p("o.csv"));
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.err.find("unterminated quote"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(p("o.csv")));
    // --skip-bad-rows scores the others and lists what it skipped
    write("m.csv", "mutant\n" + m1 + "\n" + wrong_wt + "\n" + m2 + "\n");
    r = run("score " + wt + " --weights " + model_dir("esm2_tiny") + " --mutations " +
                         p("m.csv") + " --skip-bad-rows --quiet --out " + p("o.csv"));
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("skipped: [" + p("m.csv") + " row 2 (line 3)] mutant '" + wrong_wt + "'"),
              std::string::npos)
        << r.err;
    const auto rows = read_csv(p("o.csv"));
    ASSERT_EQ(rows.size(), 3u);
    EXPECT_EQ(rows[1][0], m1);
    EXPECT_EQ(rows[2][0], m2);
    const auto& want = expected["models"]["esm2_tiny"]["short"];
    EXPECT_NEAR(std::stod(rows[1][1]), want["masked_marginals"][0].get<double>(), 1e-4);
    EXPECT_NEAR(std::stod(rows[2][1]), want["masked_marginals"][1].get<double>(), 1e-4);
    // a FASTA with two records is not one wild type
    write("two.fa", ">a\nMKV\n>b\nMKT\n");
    r = run("score " + p("two.fa") + " --weights " + model_dir("esm2_tiny") + " --dms --out " +
            p("o2.csv"));
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.err.find("expected one wild-type sequence, got 2 records"), std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(p("o2.csv")));
}

// embed --include pll: each record's pseudo-log-likelihood, the reference's (windowed or not).
TEST_F(Score, EmbedIncludePllMatchesTheReference) {
    for (const std::string m : {"esm2_tiny", "esmc_tiny"}) {
        SCOPED_TRACE(m);
        test::Result r = run("embed " + kScoreFix + "/short.fasta --weights " + model_dir(m) +
                             " --include mean,pll --quiet --out-dir " + p("emb_" + m));
        ASSERT_EQ(r.rc, 0) << r.err;
        const auto npz = io::read_npz(p("emb_" + m + "/short.npz"));
        ASSERT_EQ(npz.at("pll").shape, (Shape{1}));
        EXPECT_NEAR(npz.at("pll").data[0],
                    expected["models"][m]["short"]["pll_wild_type"].get<double>(), 1e-3);
        EXPECT_EQ(npz.size(), 2u);  // the mean and pll
    }
    // pll alone runs no embedding pass
    test::Result r = run("embed " + kScoreFix + "/short.fasta --weights " + model_dir("esm2_tiny") +
                         " --include pll --quiet --out-dir " + p("emb_pll"));
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(io::read_npz(p("emb_pll/short.npz")).size(), 1u);
}

// The window's floor: 0, 1 and anything under 16 tokens are refused before the model loads, with
// one line; 16 runs.
TEST_F(Score, ScoringWindowBelowTheMinimumIsRefused) {
    for (const char* w : {"0", "1", "15", "-3"}) {
        SCOPED_TRACE(w);
        test::Result r = run("score " + kScoreFix + "/short.fasta --weights " +
                             model_dir("esm2_tiny") + " --mutations " + kScoreFix +
                             "/short.csv --scoring-window " + w + " --quiet --out " + p("o.csv"));
        EXPECT_EQ(r.rc, 1);
        EXPECT_NE(r.err.find(std::string("[--scoring-window] must be at least 16 tokens (<cls> "
                                         "and <eos> included), got ") +
                             w),
                  std::string::npos)
            << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_FALSE(fs::exists(p("o.csv")));
        EXPECT_FALSE(fs::exists(p("o.csv.json")));
    }
    test::Result r = run("score " + kScoreFix + "/short.fasta --weights " + model_dir("esm2_tiny") +
                         " --mutations " + kScoreFix + "/short.csv --scoring-window 16 --quiet" +
                         " --out " + p("o.csv"));
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto summary = nlohmann::json::parse(io::read_file(p("o.csv.json")));
    EXPECT_EQ(summary["scoring_window"], 16);
    EXPECT_EQ(summary["windowed"], true);
    // an unknown rule is refused by name
    r = run("score " + kScoreFix + "/short.fasta --weights " + model_dir("esm2_tiny") +
            " --mutations " + kScoreFix + "/short.csv --window-rule middle --quiet --out " +
            p("o2.csv"));
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.err.find("[--window-rule] expected proteingym or centred, got 'middle'"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(p("o2.csv")));
}

// --scoring-window overrides the checkpoint's context: at the context (the default's value) the
// scores are the reference's, on the unpatched checkpoint too; past it a warning says so.
TEST_F(Score, ScoringWindowOverridesTheCheckpointAndWarnsPastItsContext) {
    const auto& want = expected["models"]["esm2_tiny"]["long"];
    const int64_t context = want["window"].get<int64_t>();
    const std::string args = " --offset 1 --mutations " + kScoreFix + "/long.csv --quiet";
    for (const std::string& dir : {model_for("esm2_tiny", "long"), model_dir("esm2_tiny")}) {
        SCOPED_TRACE(dir);
        test::Result r = run("score " + kScoreFix + "/long.fasta --weights " + dir + args +
                             " --scoring-window " + std::to_string(context) + " --out " +
                             p("w.csv"));
        ASSERT_EQ(r.rc, 0) << r.err;
        EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
        EXPECT_LE(max_abs_diff(column(read_csv(p("w.csv")), "masked_marginals"),
                               want["masked_marginals"]),
                  1e-4);
        EXPECT_EQ(nlohmann::json::parse(io::read_file(p("w.csv.json")))["scoring_window_from"],
                  "--scoring-window");
    }
    test::Result r = run("score " + kScoreFix + "/long.fasta --weights " +
                         model_for("esm2_tiny", "long") + args + " --scoring-window " +
                         std::to_string(context + 1) + " --out " + p("w.csv"));
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.err, "score: warning: --scoring-window " + std::to_string(context + 1) +
                         " is more than the checkpoint's context of " + std::to_string(context) +
                         " tokens\n");
    const auto summary = nlohmann::json::parse(io::read_file(p("w.csv.json")));
    EXPECT_EQ(summary["scoring_window"], context + 1);
    EXPECT_EQ(summary["model_context"], context);
}

// --score-column: a column without a single number is refused before the model loads (the
// weights given do not exist); a few rows without one are named in a warning and left out of
// rho, which then equals rho over the other rows alone.
TEST_F(Score, ScoreColumnValuesThatAreNotNumbers) {
    const std::string wt = kScoreFix + "/short.fasta";
    write("none.csv", "mutant,DMS_score\nY1L,abc\nK2G,\n");
    test::Result r = run("score " + wt + " --weights " + p("no_such_model") + " --mutations " +
                         p("none.csv") + " --score-column DMS_score --quiet --out " + p("o.csv"));
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.err.find("] column 'DMS_score' (--score-column) holds no number in any of its 2 "
                         "rows (the first: row 1 (line 2), 'abc')"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(p("o.csv")));

    // short.csv with rows 2 and 5 unmeasured, and the same file without them
    const auto in = read_csv(kScoreFix + "/short.csv");
    std::string some = "mutant,DMS_score\n", fewer = some;
    for (size_t i = 1; i < in.size(); ++i) {
        const std::string v = i == 2 ? "n/a" : i == 5 ? "" : in[i][1];
        some += in[i][0] + "," + v + "\n";
        if (i != 2 && i != 5) fewer += in[i][0] + "," + v + "\n";
    }
    write("some.csv", some);
    write("fewer.csv", fewer);
    std::vector<double> rho;
    for (const char* f : {"some", "fewer"}) {
        r = run("score " + wt + " --weights " + model_dir("esm2_tiny") + " --mutations " +
                p(std::string(f) + ".csv") + " --score-column DMS_score --quiet --out " +
                p(std::string(f) + "_o.csv"));
        ASSERT_EQ(r.rc, 0) << r.err;
        const auto summary =
            nlohmann::json::parse(io::read_file(p(std::string(f) + "_o.csv.json")));
        rho.push_back(summary["spearman"]["masked_marginals"].get<double>());
        if (std::string(f) == "some") {
            EXPECT_NE(r.err.find("score: warning: --score-column DMS_score: 2 of 15 rows hold no "
                                 "number and are left out of Spearman's rho (the first: row 2 "
                                 "(line 3), 'n/a')\n"),
                      std::string::npos)
                << r.err;
            EXPECT_EQ(summary["score_column_not_numbers"], 2);
            EXPECT_EQ(read_csv(p("some_o.csv")).size(), 16u);  // every row is still scored
        } else {
            EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
        }
    }
    EXPECT_NEAR(rho[0], rho[1], 1e-12);
    // a constant column leaves rho undefined, and the line says why
    write("flat.csv", "mutant,DMS_score\nY1L,1\nK2G,1\nQ21D,1\n");
    r = run("score " + wt + " --weights " + model_dir("esm2_tiny") + " --mutations " +
            p("flat.csv") + " --score-column DMS_score --quiet --out " + p("flat_o.csv"));
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("masked-marginals: Spearman's rho against DMS_score is undefined: the "
                         "scores or the measured values are all equal"),
              std::string::npos)
        << r.err;
}

// --allow-nonfinite, which --help lists for score, is an option score takes.
TEST_F(Score, TakesAllowNonfinite) {
    test::Result r = run("score " + kScoreFix + "/short.fasta --weights " + model_dir("esm2_tiny") +
                         " --mutations " + kScoreFix + "/short.csv --allow-nonfinite --quiet" +
                         " --out " + p("o.csv"));
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(fs::exists(p("o.csv")));
}
