// The text formats follow boltz.data.write (pdb.py, mmcif.py through ihm/modelcif's CIF writer,
// writer.py's json.dumps): same records, columns, rounding and quirks, so files compare equal.
#include "io/boltz_outputs.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>
#include <span>
#include <string_view>

#include "bioinfer/error.h"
#include "io/atomic_file.h"
#include "io/npy.h"

namespace bioinfer::io {

namespace fs = std::filesystem;

namespace {

struct ElementRow {
    const char *key, *residue, *element;
};
constexpr ElementRow kElementTable[] = {
#include "io/boltz_element_table.inc"
};

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

// Python's str.rjust / ljust.
std::string rjust(const std::string& s, size_t w) {
    return s.size() >= w ? s : std::string(w - s.size(), ' ') + s;
}
std::string ljust(const std::string& s, size_t w) {
    return s.size() >= w ? s : s + std::string(w - s.size(), ' ');
}

// Per-atom B-factor source as boltz's writers walk the atoms: a polymer residue takes the pLDDT
// of token (polymer residues before it + ligand atoms before it); a ligand atom takes the next
// token after the previous polymer residue's plus the ligand atoms so far. Returns the token of
// each atom and, per residue, the first token and the token count (1 for polymer residues).
struct TokenMap {
    std::vector<size_t> atom_token;
    std::vector<size_t> residue_first, residue_count;
};

TokenMap token_map(const BoltzStructureInfo& s) {
    TokenMap m;
    m.atom_token.resize(s.num_atoms());
    m.residue_first.resize(s.residue_names.size());
    m.residue_count.resize(s.residue_names.size());
    long res_num = 0, prev_polymer = -1, lig_offset = 0;
    size_t a = 0;
    for (size_t r = 0; r < s.residue_names.size(); ++r) {
        const bool poly = bio::is_polymer(s.chain_types[size_t(s.residue_chains[r])]);
        m.residue_first[r] = size_t(poly ? res_num + lig_offset : prev_polymer + lig_offset + 1);
        size_t n = 0;
        for (; a < s.num_atoms() && size_t(s.atom_residues[a]) == r; ++a, ++n) {
            if (poly) {
                m.atom_token[a] = size_t(res_num + lig_offset);
                prev_polymer = res_num;
            } else {
                ++lig_offset;
                m.atom_token[a] = size_t(prev_polymer + lig_offset);
            }
        }
        m.residue_count[r] = poly ? 1 : n;
        if (poly) ++res_num;
    }
    return m;
}

std::string element_of(const BoltzStructureInfo& s, size_t a) {
    if (!s.atom_elements.empty() && !s.atom_elements[a].empty()) return s.atom_elements[a];
    return boltz_element(s.atom_names[a], s.residue_names[size_t(s.atom_residues[a])]);
}

void check_sample(const BoltzStructureInfo& s, const std::vector<float>& coords,
                  const std::vector<float>& plddt, const char* where) {
    BI_CHECK(coords.size() == 3 * s.num_atoms(), where, "coordinates: expected ", 3 * s.num_atoms(),
             " values (", s.num_atoms(), " atoms x 3), got ", coords.size());
    BI_CHECK(plddt.size() == s.num_plddt_tokens(), where, "pLDDT: expected ", s.num_plddt_tokens(),
             " tokens, got ", plddt.size());
}

// ---- mmCIF through the rules of ihm's CIF writer ----------------------------------------------

// ihm.format.CifWriter._repr of a string: bare when safe, else Python's repr (quoted).
std::string cif_str(const std::string& v) {
    const bool bare = !v.empty() && v.find_first_of("\"' ") == std::string::npos && v[0] != '_' &&
                      v.rfind("global_", 0) != 0 && v[0] != '[' && v.rfind("data_", 0) != 0 &&
                      v.rfind("save_", 0) != 0 && v.rfind("loop_", 0) != 0 &&
                      v.rfind("stop_", 0) != 0 && v[0] != '?' && v[0] != '.';
    if (bare) return v;
    // Python repr: single quotes unless the text holds ' and no "
    const bool dq = v.find('\'') != std::string::npos && v.find('"') == std::string::npos;
    const char q = dq ? '"' : '\'';
    std::string out(1, q);
    for (char c : v) {
        if (c == '\\' || c == q) out += '\\';
        out += c;
    }
    return out + q;
}
// ihm's float format: 3 decimals (3 significant digits below 1e-3).
std::string cif_float(double v) {
    return std::fabs(v) < 1e-3 && v != 0.0 ? fmt("%.3g", v) : fmt("%.3f", v);
}
const std::string kOmit = ".";

// One loop: ihm writes "#\nloop_\n" + keys, rows joined by spaces (line wrapping off in boltz),
// multi-line values as ';' text fields, and "#\n" after a loop with rows.
struct CifLoop {
    std::string& out;
    bool any = false;
    CifLoop(std::string& o, const std::string& cat, const std::vector<std::string>& keys,
            bool has_rows)
        : out(o), any(has_rows) {
        if (!any) return;
        out += "#\nloop_\n";
        for (const auto& k : keys) out += cat + "." + k + "\n";
    }
    // values already in their CIF form (cif_str / cif_float / kOmit / numbers)
    void row(const std::vector<std::string>& vals) {
        size_t col = 0;
        for (const auto& v : vals) {
            if (v.find('\n') != std::string::npos) {
                out += "\n;" + v + (v.back() == '\n' ? "" : "\n") + ";\n";
                col = 0;
                continue;
            }
            if (col > 0) {
                out += ' ';
                ++col;
            }
            out += v;
            col += v.size();
        }
        out += '\n';
    }
    ~CifLoop() {
        if (any) out += "#\n";
    }
};

// ihm's chemical components as boltz's mmcif.py makes them.
struct ChemComp {
    std::string id, type, name = kOmit, formula = kOmit;
    double weight = 0;  // 0: unknown
    std::string code, canonical;
    double first_leaving = 0, bond_leaving = 0;
    bool nonpolymer = false;  // an ihm.NonPolymerChemComp (nstd_monomer)
};

// ihm's RNA and DNA alphabets (ihm.RNAAlphabet / ihm.DNAAlphabet, ihm 2.x): the only standard
// components boltz's residue names hit (its protein names are three-letter, the peptide
// alphabet is keyed by one letter).
struct AlphabetEntry {
    const char *id, *name, *formula;
    double weight;
    const char* canonical;
};
constexpr AlphabetEntry kRna[] = {
    {"A", "ADENOSINE-5'-MONOPHOSPHATE", "C10 H14 N5 O7 P", 347.221, "A"},
    {"C", "CYTIDINE-5'-MONOPHOSPHATE", "C9 H14 N3 O8 P", 323.197, "C"},
    {"G", "GUANOSINE-5'-MONOPHOSPHATE", "C10 H14 N5 O8 P", 363.221, "G"},
    {"U", "URIDINE-5'-MONOPHOSPHATE", "C9 H13 N2 O9 P", 324.181, "U"}};
constexpr AlphabetEntry kDna[] = {
    {"DA", "2'-DEOXYADENOSINE-5'-MONOPHOSPHATE", "C10 H14 N5 O6 P", 331.222, "A"},
    {"DC", "2'-DEOXYCYTIDINE-5'-MONOPHOSPHATE", "C9 H14 N3 O7 P", 307.197, "C"},
    {"DG", "2'-DEOXYGUANOSINE-5'-MONOPHOSPHATE", "C10 H14 N5 O7 P", 347.221, "G"},
    {"DT", "THYMIDINE-5'-MONOPHOSPHATE", "C10 H15 N2 O8 P", 322.208, "T"}};

ChemComp chem_comp(const std::string& res, bio::MoleculeType type, size_t entity_len) {
    ChemComp c;
    c.id = c.code = res;
    switch (type) {
        case bio::MoleculeType::Protein:
            c.type = "L-peptide linking";
            c.canonical = "X";
            c.bond_leaving = 18.015;
            break;
        case bio::MoleculeType::Rna:
        case bio::MoleculeType::Dna: {
            const bool rna = type == bio::MoleculeType::Rna;
            c.type = rna ? "RNA linking" : "DNA linking";
            c.canonical = "N";
            c.first_leaving = 62.972;
            c.bond_leaving = 18.015;
            for (const AlphabetEntry& e :
                 rna ? std::span<const AlphabetEntry>(kRna) : std::span<const AlphabetEntry>(kDna))
                if (res == e.id) {
                    c.name = cif_str(e.name);
                    c.formula = cif_str(e.formula);
                    c.weight = e.weight;
                    c.canonical = e.canonical;
                }
            break;
        }
        case bio::MoleculeType::Ligand:
            c.type = entity_len > 1 ? "saccharide" : "non-polymer";
            c.nonpolymer = entity_len <= 1;
            c.canonical = "?";
            break;
    }
    return c;
}

// Python's textwrap-free _prettyprint_seq: pieces joined into lines of at most 70 characters.
std::string pretty_seq(const std::vector<std::string>& pieces) {
    std::string out, line;
    for (const auto& p : pieces) {
        if (!line.empty() && line.size() + p.size() > 70) {
            out += (out.empty() ? "" : "\n") + line;
            line.clear();
        }
        line += p;
    }
    if (!line.empty()) out += (out.empty() ? "" : "\n") + line;
    return out;
}

}  // namespace

size_t BoltzStructureInfo::num_plddt_tokens() const {
    // polymer residues, plus the atoms of non-polymer residues
    size_t n = 0;
    for (size_t r = 0; r < residue_names.size(); ++r)
        n += bio::is_polymer(chain_types[size_t(residue_chains[r])]) ? 1 : 0;
    for (int32_t r : atom_residues)
        n += bio::is_polymer(chain_types[size_t(residue_chains[size_t(r)])]) ? 0 : 1;
    return n;
}

void BoltzStructureInfo::validate(const std::string& where) const {
    const size_t C = chain_names.size(), R = residue_names.size(), A = atom_names.size();
    BI_CHECK(C > 0 && R > 0 && A > 0, where, "empty structure: ", C, " chains, ", R, " residues, ",
             A, " atoms");
    BI_CHECK(chain_types.size() == C && chain_entities.size() == C, where,
             "chain fields: expected ", C, " entries, got types ", chain_types.size(),
             ", entities ", chain_entities.size());
    BI_CHECK(residue_chains.size() == R && residue_numbers.size() == R, where,
             "residue fields: expected ", R, " entries, got chains ", residue_chains.size(),
             ", numbers ", residue_numbers.size());
    BI_CHECK(atom_residues.size() == A && (atom_elements.empty() || atom_elements.size() == A),
             where, "atom fields: expected ", A, " entries, got residues ", atom_residues.size(),
             ", elements ", atom_elements.size());
    for (size_t r = 0; r < R; ++r)
        BI_CHECK(residue_chains[r] >= 0 && size_t(residue_chains[r]) < C &&
                     (r == 0 || residue_chains[r] >= residue_chains[r - 1]),
                 where, "residue ", r, ": chain index ", residue_chains[r],
                 " out of range or out of order (chains must be contiguous)");
    for (size_t a = 0; a < A; ++a)
        BI_CHECK(atom_residues[a] >= 0 && size_t(atom_residues[a]) < R &&
                     (a == 0 || atom_residues[a] >= atom_residues[a - 1]),
                 where, "atom ", a, ": residue index ", atom_residues[a],
                 " out of range or out of order (residues must be contiguous)");
    for (const auto& [i, j] : bonds)
        BI_CHECK(i >= 0 && j >= 0 && size_t(i) < A && size_t(j) < A, where, "bond (", i, ", ", j,
                 ") names an atom outside 0..", A - 1);
}

std::string boltz_element(const std::string& atom_name, const std::string& residue_name) {
    std::string key;
    for (char c : atom_name)
        if (!(c >= '0' && c <= '9')) key += c;
    const ElementRow* star = nullptr;
    for (const ElementRow& row : kElementTable) {
        if (key != row.key) continue;
        if (residue_name == row.residue) return row.element;
        if (std::string_view(row.residue) == "*") star = &row;
    }
    if (star) return star->element;
    BI_CHECK(!key.empty(), "boltz_element", "atom name '", atom_name, "' has no letter");
    std::string e(1, key[0]);
    for (auto& c : e) c = char(std::toupper((unsigned char)c));
    return e;
}

std::string python_float_repr(double v) {
    if (std::isnan(v)) return "NaN";  // json.dumps' spelling
    if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
    if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
    char buf[64];
    // shortest round-trip digits, as d.ddde+XX
    const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    std::string s(buf, r.ptr);
    const bool neg = s[0] == '-';
    if (neg) s.erase(0, 1);
    const size_t epos = s.find('e');
    const int exp = std::stoi(s.substr(epos + 1));
    std::string digits = s.substr(0, epos);
    digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
    std::string out;
    if (exp >= -4 && exp < 16) {  // repr's fixed range: 1e-4 <= |v| < 1e16
        if (exp < 0) {
            out = "0." + std::string(size_t(-exp - 1), '0') + digits;
        } else if (size_t(exp) + 1 >= digits.size()) {
            out = digits + std::string(size_t(exp) + 1 - digits.size(), '0') + ".0";
        } else {
            out = digits.substr(0, size_t(exp) + 1) + "." + digits.substr(size_t(exp) + 1);
        }
    } else {
        out = digits.substr(0, 1);
        if (digits.size() > 1) out += "." + digits.substr(1);
        const int ae = std::abs(exp);
        out += std::string("e") + (exp < 0 ? "-" : "+") + (ae < 10 ? "0" : "") + std::to_string(ae);
    }
    return neg ? "-" + out : out;
}

std::string boltz_confidence_json(const BoltzConfidence& c) {
    auto f = [](float x) { return python_float_repr(double(x)); };
    const size_t C = c.pair_chains_iptm.size();
    for (const auto& row : c.pair_chains_iptm)
        BI_CHECK(row.size() == C, "boltz_confidence_json", "pair_chains_iptm: expected a ", C, "x",
                 C, " matrix, got a row of ", row.size());
    std::string o = "{\n";
    const std::pair<const char*, float> scalars[] = {{"confidence_score", c.confidence_score},
                                                     {"ptm", c.ptm},
                                                     {"iptm", c.iptm},
                                                     {"ligand_iptm", c.ligand_iptm},
                                                     {"protein_iptm", c.protein_iptm},
                                                     {"complex_plddt", c.complex_plddt},
                                                     {"complex_iplddt", c.complex_iplddt},
                                                     {"complex_pde", c.complex_pde},
                                                     {"complex_ipde", c.complex_ipde}};
    for (const auto& [k, v] : scalars) o += std::string("    \"") + k + "\": " + f(v) + ",\n";
    // json.dumps(indent=4): an empty dict is "{}"
    o += "    \"chains_ptm\": ";
    if (C == 0) {
        o += "{},\n";
    } else {
        o += "{\n";
        for (size_t i = 0; i < C; ++i)
            o += "        \"" + std::to_string(i) + "\": " + f(c.pair_chains_iptm[i][i]) +
                 (i + 1 < C ? ",\n" : "\n");
        o += "    },\n";
    }
    o += "    \"pair_chains_iptm\": ";
    if (C == 0) {
        o += "{}\n";
    } else {
        o += "{\n";
        for (size_t i = 0; i < C; ++i) {
            o += "        \"" + std::to_string(i) + "\": {\n";
            for (size_t j = 0; j < C; ++j)
                o += "            \"" + std::to_string(j) + "\": " + f(c.pair_chains_iptm[i][j]) +
                     (j + 1 < C ? ",\n" : "\n");
            o += std::string("        }") + (i + 1 < C ? ",\n" : "\n");
        }
        o += "    }\n";
    }
    return o + "}";
}

std::string boltz_pdb(const BoltzStructureInfo& s, const std::vector<float>& coords,
                      const std::vector<float>& plddt) {
    s.validate("boltz_pdb");
    check_sample(s, coords, plddt, "boltz_pdb");
    const TokenMap tm = token_map(s);
    std::vector<std::string> lines;
    std::vector<long> serial(s.num_atoms());
    long atom_index = 1;
    size_t a = 0;
    size_t r = 0;
    for (size_t c = 0; c < s.chain_names.size(); ++c) {
        const bool het = !bio::is_polymer(s.chain_types[c]);
        const std::string record = het ? "HETATM" : "ATOM";
        std::string res_name_3;
        int32_t residue_index = 0;
        for (; r < s.residue_names.size() && size_t(s.residue_chains[r]) == c; ++r) {
            for (; a < s.num_atoms() && size_t(s.atom_residues[a]) == r; ++a) {
                const std::string& nm = s.atom_names[a];
                const std::string name = nm.size() == 4 ? nm : " " + nm;
                res_name_3 = het ? "LIG" : s.residue_names[r].substr(0, 3);
                residue_index = s.residue_numbers[r];
                const float* x = &coords[3 * a];
                const double b = double(plddt[tm.atom_token[a]]) * 100;
                lines.push_back(
                    ljust(record, 6) + rjust(std::to_string(atom_index), 5) + " " + ljust(name, 4) +
                    " " + rjust(res_name_3, 3) + " " + rjust(s.chain_names[c], 1) +
                    rjust(std::to_string(residue_index), 4) + " " + "   " + fmt("%8.3f", x[0]) +
                    fmt("%8.3f", x[1]) + fmt("%8.3f", x[2]) + fmt("%6.2f", 1.0) + fmt("%6.2f", b) +
                    "          " + rjust(element_of(s, a), 2) + "  ");
                serial[a] = atom_index++;
            }
        }
        if (c + 1 < s.chain_names.size()) {  // TER after every chain but the last
            lines.push_back(ljust("TER", 6) + rjust(std::to_string(atom_index), 5) + "      " +
                            rjust(res_name_3, 3) + " " + rjust(s.chain_names[c], 1) +
                            rjust(std::to_string(residue_index), 4));
            ++atom_index;
        }
    }
    for (const auto& [i, j] : s.bonds)
        lines.push_back("CONECT" + rjust(std::to_string(serial[size_t(i)]), 5) +
                        rjust(std::to_string(serial[size_t(j)]), 5));
    lines.push_back("END");
    lines.push_back("");
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) out += (i ? "\n" : "") + ljust(lines[i], 80);
    return out;
}

namespace {

// ---- mmCIF as boltz's mmcif.py writes it through ihm/modelcif, step by step ----------------

// An entity of the mmCIF: its components (the first chain's residues), its kind as ihm reads it
// (a polymer: several polymer residues; branched: several ligand residues; else non-polymer),
// and its chains.
struct MmcifEntity {
    std::vector<ChemComp> seq;
    bio::MoleculeType type;
    bool polymeric = false, branched = false;
    std::vector<size_t> chains;
    size_t id = 0;  // 1-based, in order of first use by a chain
};
struct MmcifEntities {
    std::vector<MmcifEntity> entities;
    std::vector<size_t> chain_entity;  // each chain's index into entities
};

// The entities of a structure: chains grouped by boltz's entity_id.
MmcifEntities mmcif_entities(const BoltzStructureInfo& s) {
    const size_t C = s.chain_names.size();
    // chains' residue ranges
    std::vector<size_t> res_begin(C, 0), res_end(C, 0);
    for (size_t r = s.residue_names.size(); r-- > 0;) res_begin[size_t(s.residue_chains[r])] = r;
    for (size_t r = 0; r < s.residue_names.size(); ++r)
        res_end[size_t(s.residue_chains[r])] = r + 1;

    // Entities in boltz's order (first appearance of entity_id), sequence from the first chain.
    // Ligands named LIG share one entity (mmcif.py's lig_entity).
    std::vector<MmcifEntity> entities;
    std::map<int32_t, size_t> by_boltz_entity;
    std::vector<size_t> chain_entity(C);
    long lig_entity = -1;
    for (size_t c = 0; c < C; ++c) {
        auto it = by_boltz_entity.find(s.chain_entities[c]);
        if (it == by_boltz_entity.end()) {
            MmcifEntity e;
            e.type = s.chain_types[c];
            const size_t n = res_end[c] - res_begin[c];
            for (size_t r = res_begin[c]; r < res_end[c]; ++r)
                e.seq.push_back(chem_comp(s.residue_names[r], e.type, n));
            const bool poly_comp = bio::is_polymer(e.type);
            e.polymeric = e.seq.size() > 1 && poly_comp;
            e.branched = e.seq.size() > 1 && !poly_comp;
            if (n == 1 && s.residue_names[res_begin[c]] == "LIG" && lig_entity >= 0) {
                it = by_boltz_entity.emplace(s.chain_entities[c], size_t(lig_entity)).first;
            } else {
                entities.push_back(std::move(e));
                if (n == 1 && s.residue_names[res_begin[c]] == "LIG")
                    lig_entity = long(entities.size() - 1);
                it = by_boltz_entity.emplace(s.chain_entities[c], entities.size() - 1).first;
            }
        }
        chain_entity[c] = it->second;
        entities[it->second].chains.push_back(c);
    }
    for (size_t i = 0; i < entities.size(); ++i) entities[i].id = i + 1;
    return {std::move(entities), std::move(chain_entity)};
}

// The chemical components (_chem_comp) and the entities (_entity).
void write_mmcif_components(std::string& o, const MmcifEntities& m) {
    const std::vector<MmcifEntity>& entities = m.entities;
    {
        std::map<std::string, const ChemComp*> comps;  // sorted by id
        for (const auto& e : entities)
            for (const auto& c : e.seq) comps.emplace(c.id, &c);
        CifLoop lp(o, "_chem_comp",
                   {"id", "type", "name", "formula", "formula_weight", "ma_provenance"},
                   !comps.empty());
        for (const auto& [id, c] : comps)
            lp.row({cif_str(id), cif_str(c->type), c->name, c->formula,
                    c->weight > 0 ? cif_float(c->weight) : kOmit, "'CCD Core'"});
    }
    auto entity_type = [](const MmcifEntity& e) {
        return e.polymeric ? "polymer" : e.branched ? "branched" : "non-polymer";
    };
    {
        CifLoop lp(o, "_entity",
                   {"id", "type", "src_method", "pdbx_description", "formula_weight",
                    "pdbx_number_of_molecules", "details"},
                   true);
        for (const auto& e : entities) {
            // ihm.Entity.formula_weight: the components' weights less the water each bond loses
            double w = 0;
            bool known = true, first = true;
            for (const auto& c : e.seq) {
                if (c.weight <= 0) {
                    known = false;
                    break;
                }
                w += c.weight;
                w -= first ? c.first_leaving : c.bond_leaving;
                first = false;
            }
            lp.row({std::to_string(e.id), entity_type(e), "man", kOmit,
                    known ? cif_float(w) : kOmit, std::to_string(e.chains.size()), kOmit});
        }
    }
}

// The polymer entities' sequences (_entity_poly, _entity_poly_seq) and the non-polymer entities
// (_pdbx_entity_nonpoly).
void write_mmcif_sequences(std::string& o, const BoltzStructureInfo& s, const MmcifEntities& m) {
    const std::vector<MmcifEntity>& entities = m.entities;
    auto strand_ids = [&](const MmcifEntity& e) {
        std::string ids;
        for (size_t c : e.chains) ids += (ids.empty() ? "" : ",") + s.chain_names[c];
        return ids;
    };
    {
        const bool any = std::any_of(entities.begin(), entities.end(),
                                     [](const MmcifEntity& e) { return e.polymeric; });
        CifLoop lp(o, "_entity_poly",
                   {"entity_id", "type", "nstd_linkage", "nstd_monomer", "pdbx_strand_id",
                    "pdbx_seq_one_letter_code", "pdbx_seq_one_letter_code_can"},
                   any);
        for (const auto& e : entities) {
            if (!e.polymeric) continue;
            std::set<std::string> types;
            bool nstd = false;
            std::vector<std::string> code, can;
            for (const auto& c : e.seq) {
                types.insert(c.type);
                nstd = nstd || c.nonpolymer;
                code.push_back(c.code.size() == 1 ? c.code : "(" + c.code + ")");
                can.push_back(c.canonical);
            }
            std::string t = "other";
            if (types.count("L-peptide linking"))
                t = "polypeptide(L)";
            else if (types == std::set<std::string>{"RNA linking"})
                t = "polyribonucleotide";
            else if (types == std::set<std::string>{"DNA linking"})
                t = "polydeoxyribonucleotide";
            else if (types == std::set<std::string>{"DNA linking", "RNA linking"})
                t = "polydeoxyribonucleotide/polyribonucleotide hybrid";
            const std::string seq = pretty_seq(code), seq_can = pretty_seq(can);
            lp.row({std::to_string(e.id), cif_str(t), "no", nstd ? "yes" : "no",
                    cif_str(strand_ids(e)),
                    seq.find('\n') != std::string::npos ? seq : cif_str(seq),
                    seq_can.find('\n') != std::string::npos ? seq_can : cif_str(seq_can)});
        }
    }
    {
        const bool any =
            std::any_of(entities.begin(), entities.end(),
                        [](const MmcifEntity& e) { return !e.polymeric && !e.branched; });
        CifLoop lp(o, "_pdbx_entity_nonpoly", {"entity_id", "name", "comp_id", "ma_model_mode"},
                   any);
        for (const auto& e : entities)
            if (!e.polymeric && !e.branched)
                lp.row({std::to_string(e.id), kOmit, cif_str(e.seq[0].id), kOmit});
    }
    {
        const bool any = std::any_of(entities.begin(), entities.end(),
                                     [](const MmcifEntity& e) { return e.polymeric; });
        CifLoop lp(o, "_entity_poly_seq", {"entity_id", "num", "mon_id", "hetero"}, any);
        for (const auto& e : entities)
            if (e.polymeric)
                for (size_t i = 0; i < e.seq.size(); ++i)
                    lp.row(
                        {std::to_string(e.id), std::to_string(i + 1), cif_str(e.seq[i].id), kOmit});
    }
}

// The chains (_struct_asym) and their residue schemes (_pdbx_poly_seq_scheme,
// _pdbx_nonpoly_scheme).
void write_mmcif_chains(std::string& o, const BoltzStructureInfo& s, const MmcifEntities& m) {
    const std::vector<MmcifEntity>& entities = m.entities;
    const std::vector<size_t>& chain_entity = m.chain_entity;
    const size_t C = s.chain_names.size();
    {
        CifLoop lp(o, "_struct_asym", {"id", "entity_id", "details"}, true);
        for (size_t c = 0; c < C; ++c)
            lp.row({cif_str(s.chain_names[c]), std::to_string(entities[chain_entity[c]].id),
                    cif_str("Model subunit " + s.chain_names[c])});
    }
    {
        bool any = false;
        for (size_t c = 0; c < C; ++c) any = any || entities[chain_entity[c]].polymeric;
        CifLoop lp(o, "_pdbx_poly_seq_scheme",
                   {"asym_id", "entity_id", "seq_id", "mon_id", "pdb_seq_num", "auth_seq_num",
                    "pdb_mon_id", "auth_mon_id", "pdb_strand_id", "pdb_ins_code"},
                   any);
        for (size_t c = 0; c < C; ++c) {
            const MmcifEntity& e = entities[chain_entity[c]];
            if (!e.polymeric) continue;
            for (size_t i = 0; i < e.seq.size(); ++i) {
                const std::string n = std::to_string(i + 1), id = cif_str(e.seq[i].id);
                lp.row({cif_str(s.chain_names[c]), std::to_string(e.id), n, id, n, n, id, id,
                        cif_str(s.chain_names[c]), kOmit});
            }
        }
    }
    {
        bool any = false;
        for (size_t c = 0; c < C; ++c)
            any = any ||
                  (!entities[chain_entity[c]].polymeric && !entities[chain_entity[c]].branched);
        CifLoop lp(o, "_pdbx_nonpoly_scheme",
                   {"asym_id", "entity_id", "mon_id", "ndb_seq_num", "pdb_seq_num", "auth_seq_num",
                    "auth_mon_id", "pdb_strand_id", "pdb_ins_code"},
                   any);
        for (size_t c = 0; c < C; ++c) {
            const MmcifEntity& e = entities[chain_entity[c]];
            if (e.polymeric || e.branched) continue;
            for (size_t i = 0; i < e.seq.size(); ++i) {
                const std::string n = std::to_string(i + 1), id = cif_str(e.seq[i].id);
                lp.row({cif_str(s.chain_names[c]), std::to_string(e.id), id, n, n, n, id,
                        cif_str(s.chain_names[c]), kOmit});
            }
        }
    }
}

// ModelCIF's data, target and model records (_ma_data .. _ma_model_group_link).
void write_mmcif_model(std::string& o, const BoltzStructureInfo& s, const MmcifEntities& m) {
    const std::vector<MmcifEntity>& entities = m.entities;
    const std::vector<size_t>& chain_entity = m.chain_entity;
    const size_t C = s.chain_names.size();
    const size_t model_data = entities.size() + 1;
    {
        CifLoop lp(o, "_ma_data", {"id", "name", "content_type", "content_type_other_details"},
                   true);
        for (const auto& e : entities) lp.row({std::to_string(e.id), kOmit, "target", kOmit});
        lp.row({std::to_string(model_data), "Model", "'model coordinates'", kOmit});
    }
    {
        CifLoop lp(o, "_ma_target_entity", {"entity_id", "data_id", "origin"}, true);
        for (const auto& e : entities)
            lp.row({std::to_string(e.id), std::to_string(e.id), "designed"});
    }
    {
        CifLoop lp(o, "_ma_target_entity_instance", {"asym_id", "entity_id", "details"}, true);
        for (size_t c = 0; c < C; ++c)
            lp.row({cif_str(s.chain_names[c]), std::to_string(entities[chain_entity[c]].id),
                    cif_str("Model subunit " + s.chain_names[c])});
    }
    {
        CifLoop lp(
            o, "_ma_model_list",
            {"ordinal_id", "model_name", "data_id", "model_type", "model_type_other_details"},
            true);
        lp.row({"1", "Model", std::to_string(model_data), "'Ab initio model'", kOmit});
    }
    {
        CifLoop lp(o, "_ma_model_group", {"id", "name", "details"}, true);
        lp.row({"1", "'All models'", kOmit});
    }
    {
        CifLoop lp(o, "_ma_model_group_link", {"group_id", "model_id"}, true);
        lp.row({"1", "1"});
    }
}

// The atoms (_atom_site, pLDDT x 100 as B_iso) and their elements (_atom_type).
void write_mmcif_atoms(std::string& o, const BoltzStructureInfo& s, const MmcifEntities& m,
                       const TokenMap& tm, const std::vector<float>& coords,
                       const std::vector<float>& plddt) {
    const std::vector<MmcifEntity>& entities = m.entities;
    const std::vector<size_t>& chain_entity = m.chain_entity;
    std::set<std::string> types;
    {
        CifLoop lp(
            o, "_atom_site",
            {"group_PDB", "id", "type_symbol", "label_atom_id", "label_alt_id", "label_comp_id",
             "label_seq_id", "auth_seq_id", "pdbx_PDB_ins_code", "label_asym_id", "Cartn_x",
             "Cartn_y", "Cartn_z", "occupancy", "label_entity_id", "auth_asym_id", "auth_comp_id",
             "B_iso_or_equiv", "pdbx_PDB_model_num"},
            true);
        for (size_t a = 0; a < s.num_atoms(); ++a) {
            const size_t r = size_t(s.atom_residues[a]), c = size_t(s.residue_chains[r]);
            const MmcifEntity& e = entities[chain_entity[c]];
            const bool het = !bio::is_polymer(s.chain_types[c]);
            const int32_t seq_id = s.residue_numbers[r];
            // the component comes from the entity's sequence at seq_id (its first chain's)
            const size_t k = size_t(std::clamp<int32_t>(seq_id, 1, int32_t(e.seq.size())) - 1);
            const std::string comp = cif_str(e.seq[k].id);
            const std::string el = element_of(s, a);
            types.insert(el);
            const float* x = &coords[3 * a];
            const double b = std::stod(fmt("%.3f", double(plddt[tm.atom_token[a]]) * 100));
            lp.row({het ? "HETATM" : "ATOM", std::to_string(a + 1), cif_str(el),
                    cif_str(s.atom_names[a]), kOmit, comp,
                    e.polymeric ? std::to_string(seq_id) : kOmit, std::to_string(seq_id), "?",
                    cif_str(s.chain_names[c]), cif_str(fmt("%.5f", x[0])),
                    cif_str(fmt("%.5f", x[1])), cif_str(fmt("%.5f", x[2])), "1",
                    std::to_string(e.id), cif_str(s.chain_names[c]), comp, cif_float(b), "1"});
        }
    }
    {
        CifLoop lp(o, "_atom_type", {"symbol"}, true);
        for (const auto& t : types) lp.row({cif_str(t)});
    }
}

// The per-residue pLDDT (_ma_qa_metric, _ma_qa_metric_local).
void write_mmcif_plddt(std::string& o, const BoltzStructureInfo& s, const MmcifEntities& m,
                       const TokenMap& tm, const std::vector<float>& plddt) {
    const std::vector<MmcifEntity>& entities = m.entities;
    const std::vector<size_t>& chain_entity = m.chain_entity;
    {
        CifLoop lp(o, "_ma_qa_metric",
                   {"id", "name", "description", "type", "mode", "type_other_details",
                    "software_group_id"},
                   true);
        lp.row({"1", "pLDDT", "'Predicted lddt'", "pLDDT", "local", kOmit, kOmit});
    }
    {
        CifLoop lp(o, "_ma_qa_metric_local",
                   {"ordinal_id", "model_id", "label_asym_id", "label_seq_id", "label_comp_id",
                    "metric_id", "metric_value"},
                   true);
        for (size_t r = 0; r < s.residue_names.size(); ++r) {
            const size_t c = size_t(s.residue_chains[r]);
            const MmcifEntity& e = entities[chain_entity[c]];
            const int32_t seq_id = s.residue_numbers[r];
            const size_t k = size_t(std::clamp<int32_t>(seq_id, 1, int32_t(e.seq.size())) - 1);
            double v;
            if (bio::is_polymer(s.chain_types[c])) {
                v = std::stod(fmt("%.3f", double(plddt[tm.residue_first[r]]) * 100));
            } else {
                // torch's float32 mean over the residue's atom tokens, rounded to 2 decimals
                float sum = 0;
                for (size_t t = 0; t < tm.residue_count[r]; ++t)
                    sum += plddt[tm.residue_first[r] + t];
                const float mean = tm.residue_count[r] ? sum / float(tm.residue_count[r]) : 0.0f;
                v = std::stod(fmt("%.2f", double(mean) * 100));
            }
            lp.row({std::to_string(r + 1), "1", cif_str(s.chain_names[c]), std::to_string(seq_id),
                    cif_str(e.seq[k].id), "1", cif_float(v)});
        }
    }
}

}  // namespace

std::string boltz_mmcif(const BoltzStructureInfo& s, const std::vector<float>& coords,
                        const std::vector<float>& plddt) {
    s.validate("boltz_mmcif");
    check_sample(s, coords, plddt, "boltz_mmcif");
    const TokenMap tm = token_map(s);
    const MmcifEntities m = mmcif_entities(s);
    std::string o =
        "data_model\n_entry.id model\n_struct.entry_id model\n"
        "_struct.pdbx_model_details .\n"
        "_struct.pdbx_structure_determination_methodology computational\n"
        "_struct.title .\n"
        "_audit_conform.dict_location "
        "https://raw.githubusercontent.com/ihmwg/ModelCIF/fece26d/dist/mmcif_ma.dic\n"
        "_audit_conform.dict_name mmcif_ma.dic\n_audit_conform.dict_version 1.4.9\n";
    write_mmcif_components(o, m);
    write_mmcif_sequences(o, s, m);
    write_mmcif_chains(o, s, m);
    write_mmcif_model(o, s, m);
    write_mmcif_atoms(o, s, m, tm, coords, plddt);
    write_mmcif_plddt(o, s, m, tm, plddt);
    return o;
}

std::vector<int32_t> boltz_ranks(const std::vector<BoltzSample>& samples) {
    std::vector<size_t> order(samples.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return samples[a].confidence.confidence_score > samples[b].confidence.confidence_score;
    });
    std::vector<int32_t> rank(samples.size());
    for (size_t k = 0; k < order.size(); ++k) rank[order[k]] = int32_t(k);
    return rank;
}

std::vector<float> boltz_confidence_scores(const std::vector<float>& complex_plddt,
                                           const std::vector<float>& iptm,
                                           const std::vector<float>& ptm) {
    BI_CHECK(complex_plddt.size() == iptm.size() && iptm.size() == ptm.size(),
             "boltz_confidence_scores",
             "per-sample vectors differ in length: ", complex_plddt.size(), ", ", iptm.size(), ", ",
             ptm.size());
    // torch.allclose(iptm, 0): |iptm| <= atol 1e-8 (+ rtol * 0) for every sample
    const bool iptm_zero =
        std::all_of(iptm.begin(), iptm.end(), [](float v) { return std::fabs(v) <= 1e-8f; });
    std::vector<float> out(iptm.size());
    for (size_t i = 0; i < out.size(); ++i)
        out[i] = (4 * complex_plddt[i] + (iptm_zero ? ptm[i] : iptm[i])) / 5;
    return out;
}

std::string boltz_affinity_json(const std::vector<std::pair<std::string, double>>& values) {
    std::string o = "{";
    for (size_t i = 0; i < values.size(); ++i)
        o += cat(i ? "," : "", "\n    \"", values[i].first,
                 "\": ", python_float_repr(values[i].second));
    return o + (values.empty() ? "}" : "\n}");
}

BoltzStructureInfo boltz_structure_info(const bio::Prediction& p) {
    BoltzStructureInfo info;
    for (const bio::PredictedChain& c : p.chains) {
        info.chain_names.push_back(c.id);
        info.chain_types.push_back(c.type);
        info.chain_entities.push_back(c.entity);
    }
    // Residues: a polymer's tokens one each; a ligand residue's atom tokens (consecutive, one
    // chain and residue number) together.
    std::vector<int32_t> token_residue(p.tokens.size());
    for (size_t i = 0; i < p.tokens.size(); ++i) {
        const bio::Token& t = p.tokens[i];
        const bool same = i > 0 && p.tokens[i - 1].chain == t.chain &&
                          p.tokens[i - 1].residue == t.residue &&
                          p.chains[size_t(t.chain)].type == bio::MoleculeType::Ligand;
        if (!same) {
            info.residue_chains.push_back(t.chain);
            info.residue_names.push_back(t.name);
            info.residue_numbers.push_back(t.residue);
        }
        token_residue[i] = int32_t(info.residue_names.size()) - 1;
    }
    for (const bio::Atom& a : p.atoms) {
        info.atom_residues.push_back(token_residue[size_t(a.token)]);
        info.atom_names.push_back(a.name);
    }
    for (const auto& [i, j] : p.bonds) info.bonds.emplace_back(int32_t(i), int32_t(j));
    return info;
}

std::vector<BoltzSample> boltz_samples(const bio::Prediction& p) {
    const auto values = [](const Tensor& t) {
        return t.defined() ? std::vector<float>(t.f32(), t.f32() + t.numel())
                           : std::vector<float>{};
    };
    std::vector<BoltzSample> samples;
    for (const bio::Sample& s : p.samples) {
        BoltzSample b;
        b.coords = values(s.coords);
        b.plddt = values(s.token_plddt);
        b.pae = values(s.pae);
        b.pde = values(s.pde);
        const auto score = [&](const char* k) {
            auto it = s.scores.find(k);
            return it == s.scores.end() ? 0.0f : float(it->second);
        };
        BoltzConfidence& c = b.confidence;
        c.confidence_score = score("confidence_score");
        c.ptm = score("ptm");
        c.iptm = score("iptm");
        c.ligand_iptm = score("ligand_iptm");
        c.protein_iptm = score("protein_iptm");
        c.complex_plddt = score("complex_plddt");
        c.complex_iplddt = score("complex_iplddt");
        c.complex_pde = score("complex_pde");
        c.complex_ipde = score("complex_ipde");
        if (auto it = s.chain_pair_scores.find("pair_chains_iptm");
            it != s.chain_pair_scores.end()) {
            const Tensor& m = it->second;
            for (int64_t i = 0; i < m.size(0); ++i)
                c.pair_chains_iptm.emplace_back(m.f32() + i * m.size(1),
                                                m.f32() + (i + 1) * m.size(1));
        }
        samples.push_back(std::move(b));
    }
    return samples;
}

std::string boltz_results_dir(const std::string& out_dir, const std::string& input_path) {
    return (fs::path(out_dir) / ("boltz_results_" + fs::path(input_path).stem().string())).string();
}

std::string write_boltz_prediction(const std::string& predictions_dir, const std::string& name,
                                   const BoltzStructureInfo& s,
                                   const std::vector<BoltzSample>& samples,
                                   const BoltzWriteOptions& opt) {
    const std::string where = "boltz outputs " + name;
    BI_CHECK(opt.output_format == "mmcif" || opt.output_format == "pdb", where, "output format '",
             opt.output_format, "' is not mmcif or pdb");
    BI_CHECK(!name.empty() && name.find('/') == std::string::npos && name != "." && name != "..",
             where, "unusable record name '", name, "'");
    BI_CHECK(!samples.empty(), where, "no samples to write");
    s.validate(where);
    const size_t T = s.num_plddt_tokens();
    for (size_t k = 0; k < samples.size(); ++k) {
        const BoltzSample& smp = samples[k];
        check_sample(s, smp.coords, smp.plddt, where.c_str());
        BI_CHECK(!opt.write_pae || smp.pae.empty() || smp.pae.size() == T * T, where, "sample ", k,
                 " PAE: expected ", T, "x", T, " values, got ", smp.pae.size());
        BI_CHECK(!opt.write_pde || smp.pde.empty() || smp.pde.size() == T * T, where, "sample ", k,
                 " PDE: expected ", T, "x", T, " values, got ", smp.pde.size());
        BI_CHECK(smp.confidence.pair_chains_iptm.size() == s.chain_names.size(), where, "sample ",
                 k, " pair_chains_iptm: expected ", s.chain_names.size(), " chains, got ",
                 smp.confidence.pair_chains_iptm.size());
    }

    const fs::path final_dir = fs::path(predictions_dir) / name;
    std::error_code ec;
    fs::create_directories(predictions_dir, ec);
    BI_CHECK(!ec, predictions_dir, "cannot create the predictions folder: ", ec.message());
    const std::string tag = std::to_string(getpid());
    const fs::path stage = fs::path(predictions_dir) / ("." + name + ".tmp." + tag);
    fs::remove_all(stage, ec);
    fs::create_directory(stage, ec);
    BI_CHECK(!ec, stage.string(), "cannot create the staging folder: ", ec.message());
    try {
        const std::vector<int32_t> rank = boltz_ranks(samples);
        const int64_t t = int64_t(T);
        for (size_t k = 0; k < samples.size(); ++k) {
            const BoltzSample& smp = samples[k];
            const std::string out = name + "_model_" + std::to_string(rank[k]);
            if (opt.output_format == "pdb")
                write_file_atomic((stage / (out + ".pdb")).string(),
                                  boltz_pdb(s, smp.coords, smp.plddt));
            else
                write_file_atomic((stage / (out + ".cif")).string(),
                                  boltz_mmcif(s, smp.coords, smp.plddt));
            write_file_atomic((stage / ("confidence_" + out + ".json")).string(),
                              boltz_confidence_json(smp.confidence));
            write_npz((stage / ("plddt_" + out + ".npz")).string(),
                      {{"plddt", {t}, smp.plddt.data()}});
            if (opt.write_pae && !smp.pae.empty())
                write_npz((stage / ("pae_" + out + ".npz")).string(),
                          {{"pae", {t, t}, smp.pae.data()}});
            if (opt.write_pde && !smp.pde.empty())
                write_npz((stage / ("pde_" + out + ".npz")).string(),
                          {{"pde", {t, t}, smp.pde.data()}});
        }
        if (!opt.affinity.empty())
            write_file_atomic((stage / ("affinity_" + name + ".json")).string(),
                              boltz_affinity_json(opt.affinity));
        // Swap the staged folder in: an earlier output moves aside first and is removed only once
        // the new one is in place.
        const fs::path old = fs::path(predictions_dir) / ("." + name + ".old." + tag);
        const bool had = fs::exists(final_dir);
        if (had) {
            fs::remove_all(old, ec);
            fs::rename(final_dir, old, ec);
            BI_CHECK(!ec, final_dir.string(),
                     "cannot move the earlier output aside: ", ec.message());
        }
        fs::rename(stage, final_dir, ec);
        if (ec) {
            if (had) fs::rename(old, final_dir);
            fail(final_dir.string(), cat("cannot move the output into place: ", ec.message()));
        }
        if (had) fs::remove_all(old, ec);
    } catch (...) {
        fs::remove_all(stage, ec);
        throw;
    }
    return final_dir.string();
}

}  // namespace bioinfer::io
