// Ligand screening: see screening.h.
#include "runtime/screening.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bioinfer/error.h"
#include "io/atomic_file.h"
#include "io/limits.h"
#include "runtime/inputs.h"

namespace bioinfer::runtime {
namespace fs = std::filesystem;

std::vector<ScreeningLigand> read_screening_ligands(const std::string& path) {
    std::istringstream f(io::read_input_file(path));
    std::vector<ScreeningLigand> out;
    std::set<std::string> names;
    std::string line;
    for (int n = 1; std::getline(f, line); ++n) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        std::istringstream in(line);
        std::string smiles, name;
        if (!(in >> smiles) || smiles[0] == '#') continue;
        std::getline(in >> std::ws, name);
        while (!name.empty() && std::isspace((unsigned char)name.back())) name.pop_back();
        const std::string where = cat(path, ":", n);
        if (name.empty()) name = cat("lig", n);
        BI_CHECK(safe_file_stem(name) == name && name.find_first_of(" \t,\"") == std::string::npos,
                 where, "ligand name '", name,
                 "' cannot name output files (no spaces, commas, quotes, '/' or leading dots)");
        BI_CHECK(names.insert(name).second, where, "ligand name '", name, "' is used twice");
        BI_CHECK(int64_t(out.size()) < io::input_limits().records, where, "more than ",
                 io::input_limits().records, " ligands in one list (--max-records raises it)");
        out.push_back({name, smiles, where});
    }
    BI_CHECK(!out.empty(), path, "holds no ligands (one SMILES per line, then an optional name)");
    return out;
}

ScreeningInput read_screening_input(const std::string& path, const fold::ModelSpec& spec,
                                    const fold::ReadOptions& ro) {
    ScreeningInput s;
    try {
        s.input = spec.from_file(path, ro);
    } catch (...) {
        s.error = std::current_exception();
    }
    return s;
}

std::string free_ligand_chain(const ScreeningInput& s) {
    if (s.error) std::rethrow_exception(s.error);
    std::set<std::string> used;
    for (const bio::Chain& c : s.input.target.chains) used.insert(c.id);
    for (const char* order : {"LMNOPQRSTUVWXYZ", "ABCDEFGHIJK"})
        for (const char* c = order; *c; ++c)
            if (!used.count(std::string(1, *c))) return std::string(1, *c);
    fail(s.input.target.source,
         "uses every one-letter chain id: give the ligand's with --ligand-chain");
}

std::vector<FoldRecord> collect_screening_records(const ScreeningInput& s,
                                                  const std::vector<ScreeningLigand>& ligands,
                                                  const std::string& chain,
                                                  const fold::ModelSpec& spec, bool affinity) {
    std::vector<FoldRecord> out;
    for (const ScreeningLigand& l : ligands) {
        FoldRecord r;
        r.id = l.name;
        r.source = l.where;
        try {
            if (s.error) std::rethrow_exception(s.error);
            fold::Input in = s.input;  // the file as read, its MSAs shared
            in.id = l.name;
            in.where = cat(l.where, ": ligand ", l.name);
            bio::Chain e;
            e.type = bio::MoleculeType::Ligand;
            e.id = chain;
            e.smiles = l.smiles;
            in.extra.push_back(e);
            if (affinity) in.affinity_binder = chain;
            spec.prepare(in);
            r.input = std::move(in);
            r.sequence = r.input.sequence;
            r.residues = r.input.residues;
        } catch (const std::exception& e) {
            r.error = e.what();
        }
        out.push_back(std::move(r));
    }
    return out;
}

namespace {

// A CSV field: quoted when it holds a comma, a quote or a line break.
std::string csv(const std::string& s) {
    if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

}  // namespace

std::string write_screening_summary(const std::vector<ScreeningLigand>& ligands,
                                    const std::vector<TargetResult>& results,
                                    const std::string& out_dir) {
    static const char* kScores[] = {"confidence_score", "ptm",           "iptm",
                                    "ligand_iptm",      "protein_iptm",  "complex_plddt",
                                    "complex_iplddt",   "complex_pde",   "complex_ipde"};
    static const char* kAffinity[] = {"affinity_pred_value", "affinity_probability_binary"};
    std::ostringstream o;
    o << "name,smiles,status";
    for (const char* k : kScores) o << "," << k;
    for (const char* k : kAffinity) o << "," << k;
    o << ",error\n";
    for (size_t i = 0; i < ligands.size(); ++i) {
        const ScreeningLigand& l = ligands[i];
        const TargetResult* r = nullptr;
        for (const TargetResult& t : results)
            if (t.id == l.name) r = &t;
        const std::string status = r ? r->status : "missing";
        o << csv(l.name) << "," << csv(l.smiles) << "," << status;
        nlohmann::json conf, aff;
        if (r && (status == "ok" || status == "skipped")) {
            // a ligand identical to an earlier one shares that one's prediction
            const std::string id = r->duplicate_of.empty() ? r->id : r->duplicate_of;
            const fs::path dir = fs::path(out_dir) / "predictions" / safe_file_stem(id);
            const auto read = [&](const fs::path& p) {
                std::error_code ec;
                return fs::is_regular_file(p, ec) ? nlohmann::json::parse(io::read_file(p.string()))
                                                  : nlohmann::json();
            };
            conf = read(dir / ("confidence_" + safe_file_stem(id) + "_model_0.json"));
            aff = read(dir / ("affinity_" + safe_file_stem(id) + ".json"));
        }
        const auto put = [&](const nlohmann::json& j, const char* k) {
            o << ",";
            if (j.contains(k) && j[k].is_number()) {
                char buf[32];
                std::snprintf(buf, sizeof buf, "%.6g", j[k].get<double>());
                o << buf;
            }
        };
        for (const char* k : kScores) put(conf, k);
        for (const char* k : kAffinity) put(aff, k);
        o << "," << csv(r ? r->error : "") << "\n";
    }
    const std::string path = (fs::path(out_dir) / "screening.csv").string();
    io::write_file_atomic(path, o.str());
    return path;
}

}  // namespace bioinfer::runtime
