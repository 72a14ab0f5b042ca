// MSA readers (.a3m, boltz .csv) with boltz's dedup and row-limit rules.
#include "io/msa.h"

#include <cctype>
#include <cmath>
#include <regex>
#include <unordered_set>

#include "bioinfer/error.h"
#include "io/atomic_file.h"
#include "io/limits.h"

namespace bioinfer::io {
namespace {

std::string_view strip(std::string_view s) {
    while (!s.empty() && std::isspace((unsigned char)s.front())) s.remove_prefix(1);
    while (!s.empty() && std::isspace((unsigned char)s.back())) s.remove_suffix(1);
    return s;
}

// Splits text into lines (1-based numbers), tolerating CRLF.
template <typename F>
void for_each_line(std::string_view text, F&& f) {
    size_t pos = 0;
    int lineno = 0;
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        if (nl == std::string_view::npos) nl = text.size();
        f(text.substr(pos, nl - pos), ++lineno);
        pos = nl + 1;
    }
}

// Collects rows. Boltz's rules: a row whose gap-stripped upper-cased text was seen is skipped,
// insertions are lower-case letters. The esm package's (ESMFold2): every row kept, '.' is an
// insertion too. Both stop after max_seqs kept rows; add returns false when the limit is reached.
class RowCollector {
  public:
    RowCollector(bio::Msa& msa, int64_t max_seqs, bool esm = false)
        : msa_(msa), max_seqs_(max_seqs), esm_(esm) {}

    bool add(std::string_view seq, int64_t taxonomy, int lineno) {
        const std::string where = cat(msa_.source, ":", lineno);
        if (!esm_) {
            std::string key;
            key.reserve(seq.size());
            for (char c : seq)
                if (c != '-') key.push_back(char(std::toupper((unsigned char)c)));
            if (!seen_.insert(key).second) return true;
        }

        bio::MsaRow row;
        row.taxonomy = taxonomy;
        row.line = lineno;
        int32_t count = 0;
        for (size_t i = 0; i < seq.size(); ++i) {
            const char c = seq[i];
            if ((c >= 'a' && c <= 'z') || (esm_ && c == '.')) {
                ++count;  // an insertion relative to the query: counted, not a column
                continue;
            }
            BI_CHECK((c >= 'A' && c <= 'Z') || c == '-', where, "character '", c, "' at position ",
                     i + 1, " is not an MSA letter: expected A-Z, a-z", esm_ ? " or '.'" : "",
                     " (insertions) or '-'");
            if (count > 0) {
                row.deletions.emplace_back(int32_t(row.residues.size()), count);
                count = 0;
            }
            row.residues.push_back(c);
        }
        if (!msa_.rows.empty()) {
            const size_t want = msa_.rows[0].residues.size();
            BI_CHECK(row.residues.size() == want, where, "MSA row has ", row.residues.size(),
                     " aligned columns (upper case and '-'); expected ", want, " as the first row",
                     esm_ ? "" : " (lines are sequences: is the file wrapped?)");
        }
        msa_.rows.push_back(std::move(row));
        return !(max_seqs_ > 0 && int64_t(msa_.rows.size()) >= max_seqs_);
    }

  private:
    bio::Msa& msa_;
    int64_t max_seqs_;
    bool esm_;
    std::unordered_set<std::string> seen_;
};

// Minimal CSV field split: commas, optional double quotes around a field.
std::vector<std::string> split_csv(std::string_view line) {
    std::vector<std::string> out;
    std::string cur;
    bool quoted = false;
    for (size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (quoted) {
            if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
                cur.push_back('"');
                ++i;
            } else if (c == '"') {
                quoted = false;
            } else {
                cur.push_back(c);
            }
        } else if (c == '"') {
            quoted = true;
        } else if (c == ',') {
            out.push_back(cur);
            cur.clear();
        } else {
            cur.push_back(c);
        }
    }
    out.push_back(cur);
    return out;
}

}  // namespace

bio::Msa parse_a3m(std::string_view text, const std::string& source, int64_t max_seqs) {
    bio::Msa msa;
    msa.source = source;
    RowCollector rows(msa, max_seqs);
    bool more = true;
    for_each_line(text, [&](std::string_view raw, int lineno) {
        if (!more) return;
        std::string_view line = strip(raw);
        if (line.empty() || line[0] == '#' || line[0] == '>') return;
        more = rows.add(line, -1, lineno);  // a3m files carry no pairing key for boltz
    });
    BI_CHECK(!msa.rows.empty(), source, "the MSA has no sequences");
    return msa;
}

bio::Msa parse_a3m_esm(std::string_view text, const std::string& source, int64_t max_seqs) {
    bio::Msa msa;
    msa.source = source;
    RowCollector rows(msa, max_seqs, /*esm=*/true);
    static const std::regex key(R"(key=(-?\d+))");
    std::string seq;
    int64_t taxonomy = -1;
    int record_line = 0;
    bool more = true;
    const auto flush = [&] {
        if (record_line > 0 && more) more = rows.add(seq, taxonomy, record_line);
        seq.clear();
    };
    for_each_line(text, [&](std::string_view raw, int lineno) {
        std::string_view line = raw;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty() || line[0] == '#') return;
        if (line[0] == '>') {
            flush();
            const std::string header(line.substr(1));
            std::smatch m;
            taxonomy = -1;
            if (std::regex_search(header, m, key)) try {
                    taxonomy = std::stoll(m[1].str());
                } catch (const std::exception&) {
                    fail(cat(source, ":", lineno),
                         cat("pairing key '", m[1].str(), "' is out of range"));
                }
            record_line = lineno;
            return;
        }
        BI_CHECK(record_line > 0, cat(source, ":", lineno), "sequence before the first '>' header");
        seq.append(line);  // a record's lines joined
    });
    flush();
    BI_CHECK(!msa.rows.empty(), source, "the MSA has no sequences");
    return msa;
}

bio::Msa parse_msa_csv(std::string_view text, const std::string& source, int64_t max_seqs) {
    bio::Msa msa;
    msa.source = source;
    RowCollector rows(msa, max_seqs);
    int key_col = -1, seq_col = -1;
    bool header = true, more = true;
    for_each_line(text, [&](std::string_view raw, int lineno) {
        if (!more) return;
        std::string_view line = raw;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (header) {
            if (strip(line).empty()) return;
            auto cols = split_csv(line);
            for (size_t i = 0; i < cols.size(); ++i) {
                const std::string name(strip(cols[i]));
                if (name == "key" && key_col < 0)
                    key_col = int(i);
                else if (name == "sequence" && seq_col < 0)
                    seq_col = int(i);
                else
                    key_col = seq_col = -2;  // any other or repeated column
            }
            BI_CHECK(cols.size() == 2 && key_col >= 0 && seq_col >= 0, cat(source, ":", lineno),
                     "invalid MSA CSV header '", line, "': expected the columns key and sequence");
            header = false;
            return;
        }
        if (strip(line).empty()) return;
        auto cols = split_csv(line);
        BI_CHECK(cols.size() == 2, cat(source, ":", lineno),
                 "expected 2 fields (key, sequence), got ", cols.size());
        std::string_view seq = strip(cols[size_t(seq_col)]);
        if (seq.empty()) return;
        const std::string key(strip(cols[size_t(key_col)]));
        int64_t taxonomy = -1;
        if (!key.empty() && key != "nan" && key != "NaN") {
            // pandas reads an integer column, or floats when some keys are empty.
            char* end = nullptr;
            const double v = std::strtod(key.c_str(), &end);
            BI_CHECK(end && *end == '\0' && std::isfinite(v) && v == std::floor(v) &&
                         std::fabs(v) < 2147483648.0,
                     cat(source, ":", lineno), "MSA key '", key,
                     "' is not an integer (boltz stores pairing keys as 32-bit integers)");
            taxonomy = int64_t(v);
        }
        more = rows.add(seq, taxonomy, lineno);
    });
    BI_CHECK(!header, source, "empty MSA CSV: expected a header `key,sequence`");
    BI_CHECK(!msa.rows.empty(), source, "the MSA has no sequences");
    return msa;
}

bio::Msa read_msa(const std::string& path, int64_t max_seqs) {
    auto ends_with = [&](const char* suf) {
        const std::string s(suf);
        return path.size() >= s.size() && path.compare(path.size() - s.size(), s.size(), s) == 0;
    };
    if (ends_with(".a3m")) return parse_a3m(read_input_file(path), path, max_seqs);
    if (ends_with(".csv")) return parse_msa_csv(read_input_file(path), path, max_seqs);
    fail(path, "MSA file format not supported: expected an .a3m or .csv file");
}

}  // namespace bioinfer::io
