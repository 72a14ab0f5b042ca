// Boltz input files (YAML, FASTA) -> bio::Target, following boltz/data/parse/schema.py's grouping
// of chains into entities, and the MSA loading of boltz/main.py's process_input.
#include "io/boltz_inputs.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <deque>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "bio/residues.h"
#include "bioinfer/error.h"
#include "io/atomic_file.h"
#include "io/fasta.h"
#include "io/limits.h"

namespace bioinfer::io {
namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
    for (char& c : s) c = char(std::tolower((unsigned char)c));
    return s;
}

// One entry of `sequences` (or one FASTA record), before entities are formed.
struct Entry {
    bio::MoleculeType type = bio::MoleculeType::Protein;
    std::vector<std::string> ids;
    std::vector<std::string> id_where;  // per id, for duplicate messages
    std::string sequence;
    bool has_msa = false;  // an `msa` key with a non-empty value
    std::string msa;       // as written
    bool cyclic = false;
    std::string smiles;            // ligands: a SMILES string, or
    std::vector<std::string> ccd;  // CCD codes (one residue each)
    struct Mod {
        int position = 0;  // 1-based
        std::string ccd, where;
    };
    std::vector<Mod> mods;  // polymers' `modifications`
    std::string where;      // file:line:col of the entry
    std::string seq_where;  // of the sequence value
    bool fasta = false;     // read from a FASTA record (errors spell FASTA's fields, not YAML's)
};

// A polymer type's one-letter codes and their residues (bio::residue_of_letter), by letter.
std::map<char, std::string> letters_of(bio::MoleculeType t) {
    std::map<char, std::string> m;
    for (int c = 1; c < 128; ++c)
        if (const char* r = bio::residue_of_letter(t, char(c))) m.emplace(char(c), r);
    return m;
}

const std::map<char, std::string>& alphabet(bio::MoleculeType t) {
    static const std::map<char, std::string> protein = letters_of(bio::MoleculeType::Protein),
                                             rna = letters_of(bio::MoleculeType::Rna),
                                             dna = letters_of(bio::MoleculeType::Dna);
    if (t == bio::MoleculeType::Rna) return rna;
    if (t == bio::MoleculeType::Dna) return dna;
    return protein;
}

std::string alphabet_text(bio::MoleculeType t) {
    std::string s;
    for (const auto& [c, tok] : alphabet(t))
        if (c != '-') s.push_back(c);
    return s;
}

// Residue tokens of a polymer sequence. boltz maps any character outside the alphabet to the
// chain type's unknown token; here only the alphabet's own letters are accepted (X, B, J, O, U, Z
// give UNK for proteins, N gives the unknown nucleotide), anything else is an error.
std::vector<std::string> residue_tokens(const Entry& e, const std::string& chain) {
    const auto& map = alphabet(e.type);
    BI_CHECK(!e.sequence.empty(), e.seq_where, "chain ", chain, ": empty sequence");
    std::vector<std::string> out;
    out.reserve(e.sequence.size());
    for (size_t i = 0; i < e.sequence.size(); ++i) {
        const char c = e.sequence[i];
        auto it = map.find(c);
        BI_CHECK(it != map.end() && c != '-', e.seq_where, "chain ", chain, ": letter '", c,
                 "' at position ", i + 1, " is not in the ", bio::molecule_type_name(e.type),
                 " alphabet (", alphabet_text(e.type), ")");
        out.push_back(it->second);
    }
    return out;
}

// A relative MSA path: next to the input file, else as given (the working directory, as boltz).
std::string resolve_msa_path(const std::string& msa, const std::string& source) {
    fs::path p(msa);
    if (p.is_absolute()) return p.string();
    fs::path beside = fs::path(source).parent_path() / p;
    std::error_code ec;
    if (!fs::path(source).parent_path().empty() && fs::exists(beside, ec)) return beside.string();
    return p.string();
}

// Forms boltz's entities and chains from the entries (schema.py: group by (type, sequence) in
// first-appearance order; chains of a group in entry order; one MSA per entity).
bio::Target build_target(const std::vector<Entry>& entries, const std::string& source,
                         bool msa_server) {
    bio::Target t;
    t.source = source;
    t.name = fs::path(source).stem().string();
    BI_CHECK(!entries.empty(), source, "no sequences: expected at least one chain");

    std::map<std::string, std::string> seen_ids;  // id -> where
    for (const Entry& e : entries)
        for (size_t i = 0; i < e.ids.size(); ++i) {
            const std::string& id = e.ids[i];
            auto [it, fresh] = seen_ids.emplace(id, e.id_where[i]);
            BI_CHECK(fresh, e.id_where[i], "duplicated chain id '", id, "' (first used at ",
                     it->second, ")");
        }

    std::vector<std::pair<std::pair<bio::MoleculeType, std::string>, std::vector<const Entry*>>>
        groups;
    for (const Entry& e : entries) {
        auto key = std::make_pair(e.type, e.sequence);
        auto it = std::find_if(groups.begin(), groups.end(),
                               [&](const auto& g) { return g.first == key; });
        if (it == groups.end())
            groups.push_back({key, {&e}});
        else
            it->second.push_back(&e);
    }

    int smiles_entities = 0;
    for (size_t ent = 0; ent < groups.size(); ++ent) {
        const auto& items = groups[ent].second;
        const Entry& first = *items[0];
        const std::string first_chain = first.ids.at(0);
        // One MSA per entity, as boltz requires of proteins with the same sequence.
        bio::MsaKind kind = bio::MsaKind::None;
        std::string msa_path;
        if (first.type == bio::MoleculeType::Protein) {
            for (const Entry* e : items) {
                BI_CHECK(e->has_msa == first.has_msa && e->msa == first.msa, e->where, "chain ",
                         e->ids.at(0), " gives the MSA '", e->msa, "' but chain ", first_chain,
                         " with the same sequence gives '", first.msa,
                         "': all proteins with the same sequence must share the same MSA");
            }
            const std::string set_msa =
                first.fasta ? cat("name it in the record id, `>", first_chain,
                                  "|protein|<file.a3m|file.csv>`, or `>", first_chain,
                                  "|protein|empty` for single-sequence mode")
                            : "set `msa: <file.a3m|file.csv>`, or `msa: empty` for "
                              "single-sequence mode";
            BI_CHECK(first.has_msa || msa_server, first.where, "chain ", first_chain,
                     ": no MSA given; ", set_msa,
                     ", or pass --use_msa_server to search it on the ColabFold MSA server");
            if (!first.has_msa) {
                kind = bio::MsaKind::None;  // the MSA server's, fetched by load_boltz_msas
            } else if (first.msa == "empty") {
                kind = bio::MsaKind::Empty;
            } else {
                kind = bio::MsaKind::File;
                msa_path = resolve_msa_path(first.msa, source);
            }
        }
        std::vector<std::string> residues;
        if (first.type != bio::MoleculeType::Ligand) {
            residues = residue_tokens(first, first_chain);
            // The first entry's modifications, as boltz applies them to the whole entity; MSE is
            // read as MET, a residue token as that standard residue.
            for (const Entry::Mod& m : first.mods) {
                BI_CHECK(m.position >= 1 && m.position <= int(residues.size()), m.where, "chain ",
                         first_chain, ": modification position ", m.position,
                         " is outside the sequence (1 to ", residues.size(), ")");
                residues[size_t(m.position - 1)] = m.ccd == "MSE" ? "MET" : m.ccd;
            }
        }
        else if (!first.smiles.empty())  // boltz's LIG1, LIG2, ... per SMILES entity
            residues = {cat("LIG", ++smiles_entities)};
        else
            residues = first.ccd;
        int sym = 0;
        for (const Entry* e : items)
            for (const std::string& id : e->ids) {
                bio::Chain c;
                c.id = id;
                c.type = e->type;
                c.entity_id = int(ent);
                c.sym_id = sym++;
                c.sequence = first.sequence;
                c.residues = residues;
                c.cyclic = first.cyclic;
                c.smiles = first.smiles;
                c.ccd = first.ccd;
                c.msa_kind = kind;
                c.msa_path = msa_path;
                c.where = e->where;
                t.chains.push_back(std::move(c));
            }
    }
    return t;
}

// ---- YAML ---------------------------------------------------------------------------------------

std::string mark(const std::string& source, const YAML::Node& n) {
    const YAML::Mark m = n.Mark();
    if (m.line < 0) return source;
    return cat(source, ":", m.line + 1, ":", m.column + 1);
}

std::string scalar(const YAML::Node& n, const std::string& source, const std::string& what) {
    BI_CHECK(n.IsScalar(), mark(source, n), what, ": expected a single value");
    return n.Scalar();
}

// The keys of a mapping, each checked against `known`; a duplicate key is an error.
void check_keys(const YAML::Node& map, const std::string& source, const std::string& what,
                const std::set<std::string>& known) {
    std::set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
        const std::string key = scalar(it->first, source, what + " key");
        BI_CHECK(seen.insert(key).second, mark(source, it->first), what, ": duplicated key '", key,
                 "'");
        if (known.count(key)) continue;
        std::string list;
        for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
        fail(mark(source, it->first),
             cat(what, ": unknown key '", key, "' (expected one of: ", list, ")"));
    }
}

// `id: A` or `id: [A, B]` (copies of one entity).
void parse_yaml_ids(const YAML::Node& body, const std::string& source, const std::string& type,
                    Entry& e) {
    const YAML::Node id = body["id"];
    BI_CHECK(id.IsDefined() && !id.IsNull(), e.where, type, " entry: missing `id`");
    if (id.IsSequence()) {
        BI_CHECK(id.size() > 0, mark(source, id), type, " entry: empty id list");
        for (const auto& x : id) {
            e.ids.push_back(scalar(x, source, "chain id"));
            e.id_where.push_back(mark(source, x));
        }
    } else {
        e.ids.push_back(scalar(id, source, "chain id"));
        e.id_where.push_back(mark(source, id));
    }
    for (size_t i = 0; i < e.ids.size(); ++i) {
        const std::string& s = e.ids[i];
        BI_CHECK(!s.empty() && std::none_of(s.begin(), s.end(),
                                            [](char c) { return std::isspace((unsigned char)c); }),
                 e.id_where[i], "chain id '", s, "' must be non-empty without spaces");
    }
}

// `ligand: {id, smiles: ...}` or `ligand: {id, ccd: CODE | [CODE, ...]}`. boltz groups ligands
// into entities by the SMILES text or by the Python text of the CCD value (`SAH`, or `['SAH',
// 'ATP']` for a list), which the entry's sequence holds here.
Entry parse_yaml_ligand(const YAML::Node& body, const std::string& source, Entry& e) {
    e.type = bio::MoleculeType::Ligand;
    BI_CHECK(body.IsMap(), mark(source, body), "ligand entry: expected a mapping with id and "
             "smiles or ccd");
    check_keys(body, source, "ligand entry", {"id", "smiles", "ccd"});
    parse_yaml_ids(body, source, "ligand", e);
    const std::string chain = e.ids[0];
    const YAML::Node smiles = body["smiles"], ccd = body["ccd"];
    const bool has_smiles = smiles.IsDefined() && !smiles.IsNull();
    const bool has_ccd = ccd.IsDefined() && !ccd.IsNull();
    BI_CHECK(has_smiles != has_ccd, e.where, "chain ", chain,
             ": a ligand needs exactly one of `smiles` and `ccd`");
    if (has_smiles) {
        e.smiles = scalar(smiles, source, cat("chain ", chain, " smiles"));
        BI_CHECK(!e.smiles.empty(), mark(source, smiles), "chain ", chain, ": empty SMILES");
        e.sequence = e.smiles;
        e.seq_where = mark(source, smiles);
        return e;
    }
    e.seq_where = mark(source, ccd);
    if (ccd.IsSequence()) {
        BI_CHECK(ccd.size() > 0, e.seq_where, "chain ", chain, ": empty `ccd` list");
        std::string repr;
        for (const auto& x : ccd) {
            e.ccd.push_back(scalar(x, source, cat("chain ", chain, " ccd")));
            repr += (repr.empty() ? "'" : ", '") + e.ccd.back() + "'";
        }
        e.sequence = "[" + repr + "]";
    } else {
        e.ccd.push_back(scalar(ccd, source, cat("chain ", chain, " ccd")));
        e.sequence = e.ccd.back();
    }
    for (const std::string& code : e.ccd)
        BI_CHECK(!code.empty() && code.size() <= 5 &&
                     std::all_of(code.begin(), code.end(),
                                 [](char c) { return std::isalnum((unsigned char)c); }),
                 e.seq_where, "chain ", chain, ": '", code,
                 "' is not a CCD code (1 to 5 letters and digits)");
    return e;
}

Entry parse_yaml_entry(const YAML::Node& item, const std::string& source) {
    BI_CHECK(item.IsMap() && item.size() == 1, mark(source, item),
             "a `sequences` entry must be a mapping with one key: protein, dna, rna or ligand");
    const YAML::Node key = item.begin()->first;
    const YAML::Node body = item.begin()->second;
    const std::string type = lower(scalar(key, source, "entity type"));
    Entry e;
    e.where = mark(source, key);
    if (type == "ligand") return parse_yaml_ligand(body, source, e);
    BI_CHECK(type == "protein" || type == "dna" || type == "rna", e.where, "unknown entity type '",
             type, "' (expected protein, dna, rna or ligand)");
    e.type = type == "protein" ? bio::MoleculeType::Protein
             : type == "dna"   ? bio::MoleculeType::Dna
                               : bio::MoleculeType::Rna;
    BI_CHECK(body.IsMap(), mark(source, body), type,
             " entry: expected a mapping with id and sequence");
    std::set<std::string> known = {"id", "sequence", "modifications", "cyclic"};
    if (e.type == bio::MoleculeType::Protein) known.insert("msa");
    check_keys(body, source, type + " entry", known);

    parse_yaml_ids(body, source, type, e);
    const std::string chain = e.ids[0];

    const YAML::Node seq = body["sequence"];
    BI_CHECK(seq.IsDefined() && !seq.IsNull(), e.where, "chain ", chain, ": missing `sequence`");
    e.sequence = scalar(seq, source, cat("chain ", chain, " sequence"));
    e.seq_where = mark(source, seq);

    const YAML::Node mods = body["modifications"];
    if (mods.IsDefined() && !mods.IsNull()) {
        BI_CHECK(mods.IsSequence(), mark(source, mods), "chain ", chain,
                 ": `modifications` must be a list of {position, ccd}");
        for (const auto& m : mods) {
            const std::string w = mark(source, m);
            BI_CHECK(m.IsMap(), w, "chain ", chain, ": a modification must be {position, ccd}");
            check_keys(m, source, "modification", {"position", "ccd"});
            BI_CHECK(m["position"].IsDefined() && m["ccd"].IsDefined(), w, "chain ", chain,
                     ": a modification needs `position` and `ccd`");
            const std::string pos = scalar(m["position"], source, "modification position");
            int p = 0;
            try {
                size_t used = 0;
                p = std::stoi(pos, &used);
                BI_CHECK(used == pos.size(), w, "");
            } catch (const std::exception&) {
                fail(mark(source, m["position"]),
                     cat("chain ", chain, ": modification position '", pos, "' is not a number"));
            }
            const std::string code = scalar(m["ccd"], source, "modification ccd");
            BI_CHECK(!code.empty() && code.size() <= 5 &&
                         std::all_of(code.begin(), code.end(),
                                     [](char c) { return std::isalnum((unsigned char)c); }),
                     mark(source, m["ccd"]), "chain ", chain, ": '", code,
                     "' is not a CCD code (1 to 5 letters and digits)");
            e.mods.push_back({p, code, w});
        }
    }

    const YAML::Node cyc = body["cyclic"];
    if (cyc.IsDefined() && !cyc.IsNull()) {
        const std::string v = lower(scalar(cyc, source, "cyclic"));
        BI_CHECK(v == "true" || v == "false", mark(source, cyc), "chain ", chain,
                 ": cyclic must be true or false, got '", v, "'");
        e.cyclic = v == "true";
    }

    const YAML::Node msa = body["msa"];
    if (msa.IsDefined() && !msa.IsNull()) {
        e.msa = scalar(msa, source, cat("chain ", chain, " msa"));
        e.has_msa = !e.msa.empty();  // boltz treats an empty value as "not given"
    }
    return e;
}

// `[chain, residue, atom]` (atom = true) or `[chain, residue-or-atom]`.
bio::ConstraintRef parse_ref(const YAML::Node& n, const std::string& source, const std::string& what,
                   bool atom) {
    const std::string w = mark(source, n);
    const size_t want = atom ? 3 : 2;
    BI_CHECK(n.IsSequence() && n.size() == want, w, what, ": expected ",
             atom ? "[chain, residue number, atom name]" : "[chain, residue number or atom name]");
    bio::ConstraintRef r;
    r.where = w;
    r.chain = scalar(n[0], source, what + " chain");
    const std::string second = scalar(n[1], source, what);
    if (atom) {
        r.residue = second;
        r.atom = scalar(n[2], source, what + " atom");
    } else if (!second.empty() && std::all_of(second.begin(), second.end(),
                                              [](char c) { return std::isdigit((unsigned char)c); })) {
        r.residue = second;
    } else {
        r.atom = second;
    }
    return r;
}

double parse_distance(const YAML::Node& n, const std::string& source, const std::string& what) {
    if (!n.IsDefined() || n.IsNull()) return 6.0;  // boltz's default
    const std::string v = scalar(n, source, what);
    try {
        size_t used = 0;
        const double d = std::stod(v, &used);
        if (used == v.size() && d > 0 && std::isfinite(d)) return d;
    } catch (const std::exception&) {
    }
    fail(mark(source, n), cat(what, ": expected a positive distance in Angstrom, got '", v, "'"));
}

bool parse_bool(const YAML::Node& n, const std::string& source, const std::string& what) {
    if (!n.IsDefined() || n.IsNull()) return false;
    const std::string v = lower(scalar(n, source, what));
    BI_CHECK(v == "true" || v == "false", mark(source, n), what, ": expected true or false, got '",
             v, "'");
    return v == "true";
}

void parse_yaml_constraint(const YAML::Node& c, const std::string& source, bio::Target& t) {
    BI_CHECK(c.IsMap() && c.size() == 1, mark(source, c),
             "a constraint must be a mapping with one key: bond, pocket or contact");
    const std::string kind = scalar(c.begin()->first, source, "constraint");
    const YAML::Node b = c.begin()->second;
    const std::string w = mark(source, c.begin()->first);
    BI_CHECK(b.IsMap(), mark(source, b), kind, " constraint: expected a mapping");
    if (kind == "bond") {
        check_keys(b, source, "bond constraint", {"atom1", "atom2"});
        BI_CHECK(b["atom1"].IsDefined() && b["atom2"].IsDefined(), w,
                 "bond constraint: needs atom1 and atom2");
        t.bonds.push_back({parse_ref(b["atom1"], source, "bond atom1", true),
                           parse_ref(b["atom2"], source, "bond atom2", true)});
    } else if (kind == "pocket") {
        check_keys(b, source, "pocket constraint", {"binder", "contacts", "max_distance", "force"});
        BI_CHECK(b["binder"].IsDefined() && b["contacts"].IsDefined(), w,
                 "pocket constraint: needs binder and contacts");
        bio::PocketConstraint p;
        p.where = w;
        p.binder = scalar(b["binder"], source, "pocket binder");
        BI_CHECK(b["contacts"].IsSequence() && b["contacts"].size() > 0, mark(source, b["contacts"]),
                 "pocket contacts: expected a list of [chain, residue number or atom name]");
        for (const auto& x : b["contacts"]) p.contacts.push_back(parse_ref(x, source, "pocket contact", false));
        p.max_distance = parse_distance(b["max_distance"], source, "pocket max_distance");
        p.force = parse_bool(b["force"], source, "pocket force");
        t.pockets.push_back(std::move(p));
    } else if (kind == "contact") {
        check_keys(b, source, "contact constraint", {"token1", "token2", "max_distance", "force"});
        BI_CHECK(b["token1"].IsDefined() && b["token2"].IsDefined(), w,
                 "contact constraint: needs token1 and token2");
        bio::ContactConstraint k;
        k.where = w;
        k.token1 = parse_ref(b["token1"], source, "contact token1", false);
        k.token2 = parse_ref(b["token2"], source, "contact token2", false);
        k.max_distance = parse_distance(b["max_distance"], source, "contact max_distance");
        k.force = parse_bool(b["force"], source, "contact force");
        t.contacts.push_back(std::move(k));
    } else {
        fail(w, cat("unknown constraint '", kind, "' (expected bond, pocket or contact)"));
    }
}

// One id or a list of ids (`chain_id: A` or `chain_id: [A, B]`).
std::vector<std::string> id_list(const YAML::Node& n, const std::string& source,
                                 const std::string& what) {
    std::vector<std::string> out;
    if (!n.IsDefined() || n.IsNull()) return out;
    if (n.IsSequence()) {
        for (const auto& x : n) out.push_back(scalar(x, source, what));
    } else {
        out.push_back(scalar(n, source, what));
    }
    return out;
}

// boltz's checks (schema.py): a `cif` or `pdb` path; chain_id and template_id lists of one
// length when both are given; query chains that are protein chains; `threshold` with `force`.
// The template chains are checked against the file when it is read.
bio::Template parse_yaml_template(const YAML::Node& e, const std::string& source,
                                  const bio::Target& t) {
    const std::string w = mark(source, e);
    BI_CHECK(e.IsMap(), w, "a template is a mapping with `cif` or `pdb`");
    check_keys(e, source, "template",
               {"cif", "pdb", "chain_id", "template_id", "force", "threshold"});
    bio::Template k;
    k.where = w;
    BI_CHECK(e["cif"].IsDefined() || e["pdb"].IsDefined(), w,
             "template: missing the structure path (`cif:` or `pdb:`)");
    BI_CHECK(!(e["cif"].IsDefined() && e["pdb"].IsDefined()), w,
             "template: give one of `cif` and `pdb`");
    k.pdb = !e["cif"].IsDefined();
    const std::string given = scalar(k.pdb ? e["pdb"] : e["cif"], source, "template path");
    BI_CHECK(!given.empty(), w, "template: empty structure path");
    k.path = resolve_msa_path(given, source);
    k.name = fs::path(given).stem().string();
    k.chain_ids = id_list(e["chain_id"], source, "template chain_id");
    k.template_ids = id_list(e["template_id"], source, "template template_id");
    BI_CHECK(k.chain_ids.empty() || k.template_ids.empty() ||
                 k.chain_ids.size() == k.template_ids.size(),
             w, "template ", k.name, ": chain_id lists ", k.chain_ids.size(),
             " chains and template_id ", k.template_ids.size(), "; the two must match");
    for (const std::string& id : k.chain_ids) {
        const bio::Chain* c = nullptr;
        for (const bio::Chain& x : t.chains)
            if (x.id == id) c = &x;
        BI_CHECK(c && c->type == bio::MoleculeType::Protein, w, "template ", k.name, ": chain ", id,
                 " is not one of the protein chains of the input");
    }
    k.force = parse_bool(e["force"], source, "template force");
    if (k.force) {
        BI_CHECK(e["threshold"].IsDefined(), w, "template ", k.name,
                 ": `force: true` needs a `threshold` (A)");
        k.threshold = parse_distance(e["threshold"], source, "template threshold");
    } else {
        k.threshold = std::numeric_limits<double>::infinity();
    }
    return k;
}

}  // namespace

bio::Target parse_boltz_yaml(std::string_view text, const std::string& source, bool msa_server) {
    YAML::Node root;
    try {
        root = YAML::Load(std::string(text));
    } catch (const YAML::ParserException& ex) {
        fail(cat(source, ":", ex.mark.line + 1, ":", ex.mark.column + 1),
             cat("YAML syntax error: ", ex.msg));
    }
    BI_CHECK(root.IsMap(), source, "expected a YAML mapping with `version` and `sequences`");
    check_keys(root, source, "input",
               {"version", "sequences", "constraints", "templates", "properties"});
    const YAML::Node version = root["version"];
    if (version.IsDefined()) {
        const std::string v = scalar(version, source, "version");
        BI_CHECK(v == "1", mark(source, version), "unsupported input version ", v, ": expected 1");
    }
    const YAML::Node seqs = root["sequences"];
    BI_CHECK(seqs.IsDefined() && seqs.IsSequence(), source,
             "expected `sequences:` with a list of entries");
    std::vector<Entry> entries;
    for (const auto& item : seqs) entries.push_back(parse_yaml_entry(item, source));
    bio::Target t = build_target(entries, source, msa_server);
    const YAML::Node cons = root["constraints"];
    if (cons.IsDefined() && !cons.IsNull()) {
        BI_CHECK(cons.IsSequence(), mark(source, cons), "`constraints` must be a list");
        for (const auto& c : cons) parse_yaml_constraint(c, source, t);
    }
    const YAML::Node tmpl = root["templates"];
    if (tmpl.IsDefined() && !tmpl.IsNull()) {
        BI_CHECK(tmpl.IsSequence(), mark(source, tmpl), "`templates` must be a list");
        for (const auto& e : tmpl) t.templates.push_back(parse_yaml_template(e, source, t));
    }
    const YAML::Node props = root["properties"];
    if (props.IsDefined() && !props.IsNull()) {
        BI_CHECK(props.IsSequence(), mark(source, props), "`properties` must be a list");
        for (const auto& p : props) {
            BI_CHECK(p.IsMap() && p.size() == 1, mark(source, p),
                     "a property is a mapping with one key (affinity)");
            const std::string kind = lower(p.begin()->first.as<std::string>());
            BI_CHECK(kind == "affinity", mark(source, p), "unknown property '", kind,
                     "' (expected affinity)");
            const YAML::Node body = p.begin()->second;
            BI_CHECK(body.IsMap(), mark(source, p), "affinity: expected `binder: <chain id>`");
            check_keys(body, source, "affinity property", {"binder"});
            BI_CHECK(body["binder"].IsDefined() && body["binder"].IsScalar(), mark(source, body),
                     "affinity: `binder` must be one chain id (only one binder is supported)");
            const std::string binder = scalar(body["binder"], source, "affinity binder");
            const std::string w = mark(source, body["binder"]);
            BI_CHECK(t.affinity_binder.empty() || t.affinity_binder == binder, w,
                     "only one affinity binder is supported (", t.affinity_binder, " and ", binder,
                     ")");
            t.affinity_binder = binder;
            t.affinity_where = w;
        }
        if (!t.affinity_binder.empty()) check_affinity_binder(t);
    }
    return t;
}

void check_affinity_binder(const bio::Target& t) {
    const std::string& w = t.affinity_where.empty() ? t.source : t.affinity_where;
    const bio::Chain* binder = nullptr;
    for (const bio::Chain& c : t.chains)
        if (c.id == t.affinity_binder) binder = &c;
    BI_CHECK(binder, w, "affinity: the binder '", t.affinity_binder,
             "' is not a chain of the input");
    BI_CHECK(binder->type == bio::MoleculeType::Ligand, w, "affinity: chain ", binder->id,
             " is not a ligand (affinity is predicted for ligands only)");
    for (const bio::Chain& c : t.chains)
        BI_CHECK(&c == binder || c.entity_id != binder->entity_id, w, "affinity: the binder ",
                 binder->id, " has copies (chain ", c.id, "); affinity needs a single copy");
    BI_CHECK(binder->residues.size() == 1, w, "affinity: the binder ", binder->id, " has ",
             binder->residues.size(), " residues; affinity needs a single-residue ligand");
}

// ---- FASTA --------------------------------------------------------------------------------------

bio::Target parse_boltz_fasta(std::string_view text, const std::string& source, bool msa_server) {
    std::vector<Entry> entries;
    for (const FastaRecord& r : parse_fasta(text, source)) {
        const std::string where = cat(source, ":", r.line);
        std::vector<std::string> f;
        size_t b = 0;
        while (true) {
            size_t e = r.id.find('|', b);
            f.push_back(r.id.substr(b, e == std::string::npos ? std::string::npos : e - b));
            if (e == std::string::npos) break;
            b = e + 1;
        }
        BI_CHECK(f.size() >= 2 && f.size() <= 3, where, "invalid record id '", r.id,
                 "': expected CHAIN_ID|ENTITY_TYPE or CHAIN_ID|protein|MSA");
        BI_CHECK(!f[0].empty(), where, "empty chain id in '", r.id, "'");
        const std::string type = lower(f[1]);
        BI_CHECK(type == "protein" || type == "dna" || type == "rna" || type == "ccd" ||
                     type == "smiles",
                 where, "chain ", f[0], ": invalid entity type '", f[1],
                 "' (expected protein, dna, rna, ccd or smiles)");
        Entry e;
        e.type = type == "protein" ? bio::MoleculeType::Protein
                 : type == "dna"   ? bio::MoleculeType::Dna
                 : type == "rna"   ? bio::MoleculeType::Rna
                                   : bio::MoleculeType::Ligand;
        e.ids = {f[0]};
        e.id_where = {where};
        e.where = e.seq_where = where;
        e.fasta = true;
        e.sequence = r.sequence;
        BI_CHECK(!e.sequence.empty(), where, "chain ", f[0], ": empty ", type);
        if (type == "smiles") e.smiles = r.sequence;
        if (type == "ccd") e.ccd = {r.sequence};
        if (f.size() == 3 && !f[2].empty()) {
            BI_CHECK(e.type == bio::MoleculeType::Protein, where, "chain ", f[0],
                     ": an MSA is only allowed for proteins");
            e.msa = f[2];
            e.has_msa = true;
        }
        entries.push_back(std::move(e));
    }
    return build_target(entries, source, msa_server);
}

bio::Target read_boltz_input(const std::string& path, bool msa_server) {
    const std::string ext = lower(fs::path(path).extension().string());
    std::error_code ec;
    BI_CHECK(!fs::is_directory(path, ec), path, "is a directory, expected a .yaml or .fasta file");
    if (ext == ".yaml" || ext == ".yml") return parse_boltz_yaml(read_target_file(path), path, msa_server);
    if (ext == ".fasta" || ext == ".fa" || ext == ".fas")
        return parse_boltz_fasta(read_target_file(path), path, msa_server);
    fail(path, cat("unable to parse file type '", ext, "': expected a .fasta or .yaml file"));
}

void add_boltz_ligand(bio::Target& t, const std::string& id, const std::string& smiles,
                      const std::string& where) {
    BI_CHECK(!smiles.empty(), where, "chain ", id, ": empty SMILES");
    BI_CHECK(!id.empty() && std::none_of(id.begin(), id.end(),
                                         [](char c) { return std::isspace((unsigned char)c); }),
             where, "chain id '", id, "' must be non-empty without spaces");
    int max_entity = -1, smiles_entities = 0;
    std::set<int> counted;
    for (const bio::Chain& c : t.chains) {
        BI_CHECK(c.id != id, where, "chain id '", id, "' is already used by ", t.source);
        max_entity = std::max(max_entity, c.entity_id);
        if (!c.smiles.empty() && counted.insert(c.entity_id).second) ++smiles_entities;
    }
    bio::Chain c;
    c.id = id;
    c.type = bio::MoleculeType::Ligand;
    c.smiles = c.sequence = smiles;
    c.where = where;
    size_t at = t.chains.size();
    for (size_t i = 0; i < t.chains.size(); ++i)
        if (t.chains[i].type == bio::MoleculeType::Ligand && t.chains[i].smiles == smiles) {
            c.entity_id = t.chains[i].entity_id;
            c.residues = t.chains[i].residues;
            c.sym_id = t.chains[i].sym_id + 1;
            at = i + 1;  // after the entity's last chain
        }
    if (at == t.chains.size() && c.residues.empty()) {
        c.entity_id = max_entity + 1;
        c.residues = {cat("LIG", smiles_entities + 1)};
    }
    t.chains.insert(t.chains.begin() + int64_t(at), std::move(c));
}

// ---- MSAs ---------------------------------------------------------------------------------------

namespace {

// MSA files as read_msa reads them, kept for the next target that names the same file (each
// ligand of a screening job reads the receptor's): a few of the latest, keyed by path, row
// limit, size and modification time, so a changed file is read again.
bio::Msa read_msa_cached(const std::string& path, int64_t max_msa_seqs) {
    using Key = std::tuple<std::string, int64_t, uintmax_t, int64_t>;
    static std::mutex mutex;
    static std::deque<std::pair<Key, std::shared_ptr<const bio::Msa>>> cache;
    constexpr size_t kKeep = 4;
    std::error_code ec;
    const uintmax_t size = fs::file_size(path, ec);
    const int64_t mtime =
        ec ? 0 : int64_t(fs::last_write_time(path, ec).time_since_epoch().count());
    if (ec) return read_msa(path, max_msa_seqs);  // let the reader name the problem
    const Key key{fs::absolute(path).lexically_normal().string(), max_msa_seqs, size, mtime};
    {
        std::lock_guard<std::mutex> lock(mutex);
        for (const auto& [k, msa] : cache)
            if (k == key) return *msa;
    }
    auto msa = std::make_shared<const bio::Msa>(read_msa(path, max_msa_seqs));
    std::lock_guard<std::mutex> lock(mutex);
    cache.emplace_back(key, msa);
    if (cache.size() > kKeep) cache.pop_front();
    return *msa;
}

}  // namespace

void load_boltz_msas(bio::Target& target, int64_t max_msa_seqs, const MsaFetch& fetch) {
    // proteins that named no MSA: one query per entity, in entity order, as boltz's compute_msa
    std::vector<std::pair<int, std::string>> wanted;
    for (const bio::Chain& c : target.chains)
        if (c.type == bio::MoleculeType::Protein && c.msa_kind == bio::MsaKind::None &&
            std::none_of(wanted.begin(), wanted.end(),
                         [&](const auto& w) { return w.first == c.entity_id; }))
            wanted.push_back({c.entity_id, c.sequence});
    if (!wanted.empty()) {
        BI_CHECK(bool(fetch), target.source, "chain ", target.chains.at(0).id,
                 ": no MSA given and no MSA server to ask (--use_msa_server)");
        const std::vector<std::string> paths = fetch(target.name, wanted);
        BI_CHECK(paths.size() == wanted.size(), target.source, "the MSA server gave ",
                 paths.size(), " MSAs for ", wanted.size(), " protein entities");
        for (bio::Chain& c : target.chains)
            for (size_t k = 0; k < wanted.size(); ++k)
                if (c.msa_kind == bio::MsaKind::None && c.type == bio::MoleculeType::Protein &&
                    c.entity_id == wanted[k].first) {
                    c.msa_kind = bio::MsaKind::File;
                    c.msa_path = paths[k];
                }
    }
    // an MSA letter's residue token (every letter A-Z, and '-', is one)
    const auto msa_token = [](char l) -> std::string {
        const char* r = bio::residue_of_letter(bio::MoleculeType::Protein, l);
        return r ? r : "?";
    };
    // per entity: its MSA, or null when its first row is not the query (single-sequence)
    std::map<int, std::shared_ptr<const bio::Msa>> by_entity;
    const auto single_sequence = [](bio::Chain& c) {
        c.msa_kind = bio::MsaKind::Empty;  // boltz's dummy_msa: the query alone
        c.msa = nullptr;
    };
    for (bio::Chain& c : target.chains) {
        if (c.msa_kind != bio::MsaKind::File) continue;
        auto it = by_entity.find(c.entity_id);
        if (it != by_entity.end()) {
            if (it->second) c.msa = it->second;
            else single_sequence(c);
            continue;
        }
        bio::Msa msa;
        try {
            msa = read_msa_cached(c.msa_path, max_msa_seqs);
        } catch (const Error& ex) {
            fail(cat(target.source, ": chain ", c.id), cat("unreadable MSA: ", ex.what()));
        }
        // boltz's featurizer compares the first row with the chain's residues (by token).
        bio::MsaRow& q = msa.rows.at(0);
        const std::string where = cat(msa.source, ":", q.line);
        // Where it is not the query, boltz warns ("MSA does not match input sequence, creating
        // dummy") and folds the chain single-sequence; so does this.
        const auto not_the_query = [&](const std::string& why) {
            target.warnings.push_back(cat(target.source, ": chain ", c.id, ": the first row of its MSA (",
                                          where, ") is not its sequence (", why, "); chain ", c.id,
                                          " folds single-sequence, as boltz does"));
            by_entity[c.entity_id] = nullptr;
            single_sequence(c);
        };
        if (q.residues.size() != c.residues.size()) {
            not_the_query(cat("it has ", q.residues.size(), " residues, the chain ", c.residues.size()));
            continue;
        }
        // The structure's residue types: a modified residue (a CCD code) is UNK there.
        const auto structure_tok = [&](size_t i) -> std::string {
            const std::string& r = c.residues[i];
            return bio::residue_token(r) >= 0 ? r : "UNK";
        };
        std::vector<size_t> mism;
        for (size_t i = 0; i < c.residues.size(); ++i) {
            if (msa_token(q.residues[i]) != structure_tok(i)) mism.push_back(i);
        }
        if (!mism.empty()) {
            bool met_unk = true, input_unk = true;
            for (size_t i : mism) {
                const std::string msa_tok = msa_token(q.residues[i]);
                met_unk &= structure_tok(i) == "MET" && msa_tok == "UNK";
                input_unk &= structure_tok(i) == "UNK";
            }
            if (!met_unk && !input_unk) {
                not_the_query(cat("position ", mism[0] + 1, " is '", q.residues[mism[0]],
                                  "', the sequence has '", c.sequence[mism[0]], "'"));
                continue;
            }
            // Accepted as boltz does: the query row takes the input's residues.
            for (size_t i : mism) q.residues[i] = c.sequence[i];
        }
        auto shared = std::make_shared<const bio::Msa>(std::move(msa));
        by_entity[c.entity_id] = shared;
        c.msa = shared;
    }
}

}  // namespace bioinfer::io
