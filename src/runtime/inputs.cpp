// Input collection shared by embed and predict.
#include "runtime/inputs.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>

#include "bioinfer/error.h"

namespace bioinfer::runtime {

namespace fs = std::filesystem;

namespace {

bool looks_like_sequence(const std::string& s) {
    if (s.empty()) return false;
    for (char c : s)
        if (!(std::isalpha((unsigned char)c) || c == '<' || c == '>' || c == '_' || c == '-' ||
              c == '.' || c == '|' || c == ':'))
            return false;
    return true;
}

}  // namespace

std::vector<InputRecord> collect_fasta(const std::string& input) {
    std::vector<InputRecord> fasta;
    auto add = [&](const std::vector<io::FastaRecord>& recs) {
        for (const auto& r : recs) fasta.push_back({r, ""});
    };
    std::error_code ec;
    if (fs::is_directory(input, ec)) {
        std::vector<fs::path> files;
        for (auto& e : fs::directory_iterator(input)) {
            const std::string ext = e.path().extension().string();
            if (e.is_regular_file() && (ext == ".fa" || ext == ".fasta" || ext == ".faa" || ext == ".fas"))
                files.push_back(e.path());
        }
        std::sort(files.begin(), files.end());
        BI_CHECK(!files.empty(), input, "folder holds no FASTA files (*.fa, *.fasta, *.faa, *.fas)");
        for (auto& f : files) {
            try {
                add(io::read_fasta(f.string()));
            } catch (const Error& e) {  // this file's targets fail, the others run
                InputRecord r;
                r.id = f.stem().string();
                r.source = f.string();
                r.error = e.what();
                fasta.push_back(r);
            }
        }
    } else if (fs::exists(input, ec)) {
        add(io::read_fasta(input));
    } else if (looks_like_sequence(input)) {
        InputRecord r;
        r.id = "seq";
        r.description = "seq";
        r.sequence = input;
        r.source = "<argument>";
        fasta.push_back(r);
    } else {
        fail(input, "no such file or folder, and not a protein sequence");
    }
    std::map<std::string, std::string> seen_id, seen_stem;
    for (auto& f : fasta) {
        if (!f.error.empty()) continue;
        const std::string where = "[" + cat(f.source, ":", f.line) + "] ";
        auto it = seen_id.find(f.id);
        auto st = seen_stem.find(safe_file_stem(f.id));
        if (it != seen_id.end())
            f.error = where + cat("duplicate record id '", f.id, "' (first at ", it->second, ")");
        else if (st != seen_stem.end())
            f.error = where + cat("record id '", f.id, "' maps to the same file name as '", st->second, "'");
        else if (f.sequence.empty())
            f.error = where + cat("record '", f.id, "' has an empty sequence");
        if (!f.error.empty()) continue;
        seen_id[f.id] = cat(f.source, ":", f.line);
        seen_stem[safe_file_stem(f.id)] = f.id;
    }
    return fasta;
}

std::string safe_file_stem(const std::string& id) {
    std::string s = id;
    for (char& c : s)
        if (c == '/' || c == '\\' || c == '\0') c = '_';
    if (!s.empty() && s[0] == '.') s[0] = '_';
    return s;
}

}  // namespace bioinfer::runtime
