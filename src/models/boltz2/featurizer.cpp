// Boltz-2 featurizer for polymers: tokenisation (boltz/data/tokenize/boltz2.py), token, atom, MSA
// and dummy template features (boltz/data/feature/featurizerv2.py) as inferencev2.py requests
// them (compute_frames, no cropping, max_seqs = const.max_msa_seqs). featurize() tokenises, then
// runs one function per feature group under featurizerv2.py's name for it (process_token_features,
// process_atom_features, process_msa_features, ...), always in one order. All of it is host-side
// bookkeeping on small index tables, built in std::vectors and handed over as tensors once.
#include "models/boltz2/featurizer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <tuple>

#include "bioinfer/error.h"
#include "models/boltz2/constraint_refs.h"
#include "models/boltz2/ligands.h"
#include "models/boltz2/numpy_rng.h"
#include "models/boltz2/standardize.h"
#include "models/boltz2/templates.h"

namespace bioinfer::boltz2 {
namespace {

constexpr const char* kWhere = "boltz2 featurize";

Tensor make(std::vector<float> v, Shape shape) {
    return Tensor::of(v, std::move(shape));
}

// boltz's quaternion_to_matrix (real part first).
std::array<std::array<float, 3>, 3> quaternion_to_matrix(double r, double i, double j, double k) {
    const double two_s = 2.0 / (r * r + i * i + j * j + k * k);
    std::array<std::array<float, 3>, 3> m{};
    m[0] = {float(1 - two_s * (j * j + k * k)), float(two_s * (i * j - k * r)),
            float(two_s * (i * k + j * r))};
    m[1] = {float(two_s * (i * j + k * r)), float(1 - two_s * (i * i + k * k)),
            float(two_s * (j * k - i * r))};
    m[2] = {float(two_s * (i * k - j * r)), float(two_s * (j * k + i * r)),
            float(1 - two_s * (i * i + j * j))};
    return m;
}

// An MSA in boltz's terms for one chain: residue token ids per row (query length), the pairing
// key per row, and the flat deletion table with each row's [del_start, del_end) into it.
struct ChainMsa {
    std::vector<std::vector<int>> rows;
    std::vector<int64_t> taxonomy;
    std::vector<std::tuple<int, int>> deletions;  // (res_idx, count), all rows concatenated
    std::vector<std::pair<size_t, size_t>> del_range;
};

ChainMsa chain_msa(const bio::Chain& c, const std::vector<int>& query_tokens) {
    const Vocab& v = vocab();
    ChainMsa m;
    if (c.msa_kind != bio::MsaKind::File) {  // boltz's dummy_msa: the query alone
        m.rows.push_back(query_tokens);
        m.taxonomy.push_back(-1);
        m.del_range.push_back({0, 0});
        return m;
    }
    for (const bio::MsaRow& r : c.msa->rows) {
        std::vector<int> toks;
        toks.reserve(r.residues.size());
        for (char ch : r.residues) toks.push_back(v.token_id(v.protein_letters.at(ch)));
        m.rows.push_back(std::move(toks));
        m.taxonomy.push_back(r.taxonomy);
        const size_t start = m.deletions.size();
        for (const auto& [idx, count] : r.deletions) m.deletions.emplace_back(idx, count);
        m.del_range.push_back({start, m.deletions.size()});
    }
    // A modified residue is UNK in the structure while the MSA's query row keeps its letter:
    // boltz replaces the query row by the structure's residues when every mismatch is at UNK.
    if (!m.rows.empty() && m.rows[0].size() == query_tokens.size() && m.rows[0] != query_tokens) {
        const int unk = v.token_id("UNK");
        bool only_unk = true;
        for (size_t i = 0; i < query_tokens.size(); ++i)
            only_unk &= m.rows[0][i] == query_tokens[i] || query_tokens[i] == unk;
        if (only_unk) m.rows[0] = query_tokens;
    }
    return m;
}

struct Token {
    int chain = 0;  // asym_id
    int res_idx = 0;
    std::string res_name;
    int res_type = 0;
    int mol_type = 0;
    bool modified = false;  // a modified polymer residue (a CCD code in `modifications`)
    int64_t atom_begin = 0, atom_count = 0, center = 0, disto = 0;  // center/disto: in-residue
};

// A residue's constraints (`c`, indices into its molecule's atoms) appended to `out` on global
// atom indices (`at`: molecule atom -> global atom, -1 for an atom left out); a constraint that
// touches an atom left out is dropped, as boltz's idx_map drops it.
void append_constraints(const ResidueConstraints& c, const std::vector<int64_t>& at,
                        ResidueConstraints& out) {
    const auto map = [&](auto atoms, auto& dst) {
        for (auto& i : atoms) {
            if (at[size_t(i)] < 0) return false;
            i = int(at[size_t(i)]);
        }
        dst = atoms;
        return true;
    };
    for (ResidueConstraints::Bounds b : c.bounds) {
        std::array<int, 2> ab{b.a, b.b};
        if (!map(ab, ab)) continue;
        b.a = ab[0], b.b = ab[1];
        out.bounds.push_back(b);
    }
    for (ResidueConstraints::Chiral x : c.chiral)
        if (map(x.atoms, x.atoms)) out.chiral.push_back(x);
    for (ResidueConstraints::Stereo x : c.stereo)
        if (map(x.atoms, x.atoms)) out.stereo.push_back(x);
    for (auto x : c.planar_bonds)
        if (map(x, x)) out.planar_bonds.push_back(x);
    for (auto x : c.rings5)
        if (map(x, x)) out.rings5.push_back(x);
    for (auto x : c.rings6)
        if (map(x, x)) out.rings6.push_back(x);
}

// Index rows (k, E) of E k-tuples of atom (or chain) indices, as boltz's features hold them.
template <size_t K>
Tensor index_rows(const std::vector<std::array<int, K>>& rows) {
    const int64_t E = int64_t(rows.size());
    std::vector<float> v(K * size_t(E));
    for (int64_t e = 0; e < E; ++e)
        for (size_t k = 0; k < K; ++k) v[k * size_t(E) + size_t(e)] = float(rows[size_t(e)][k]);
    return make(v, {int64_t(K), E});
}

// ---- tokens and atoms (boltz2.py's tokenizer: one token per standard residue; atoms in
// const.ref_atoms order) ----------------------------------------------------------------------

// Each residue's chain, index in the chain and atoms [begin, begin + count), in order: the
// global residue index is the position here.
struct ResAtoms {
    int chain = 0, res = 0;
    int64_t begin = 0, count = 0;
};

// The tokenised target: its tokens, and per atom its reference data, in token order.
struct Tokenized {
    std::vector<Token> tokens;
    // per atom: name, element, charge, chirality, conformer xyz, uid, backbone class
    std::vector<std::string> atom_names;
    std::vector<int> atom_element, atom_charge, atom_chirality, atom_uid, atom_backbone;
    std::vector<std::array<float, 3>> atom_pos;
    std::vector<std::vector<int>> chain_res_types;  // per chain, per residue, for MSAs
    // Bonds between atoms (global indices) with boltz's bond type, in boltz's order: each
    // residue's own bonds (ligands), chain by chain.
    std::vector<std::array<int64_t, 3>> bonds;
    std::vector<ResAtoms> res_atoms;
    std::vector<int64_t> src_atom;  // per atom: its index in the uncropped target
    // The ligand and modified residues' geometric constraints (boltz's residue_constraints), in
    // residue order, on global atom indices; those touching a dropped (leaving) atom are left out.
    ResidueConstraints constraints;
    int64_t num_atoms = 0;
};

// Ligand molecules by residue name: injected ones first, then SMILES through RDKit (once per
// entity: copies share LIG<k>), then CCD codes from the canonical set or boltz's mols folder.
struct LigandMols {
    const bio::Target& target;
    const FeaturizeOptions& opt;
    const ConformerLibrary& lib;
    std::map<std::string, ResidueMol> mols;

    const ResidueMol& get(const bio::Chain& c, const std::string& res) {
        auto it = mols.find(res);
        if (it != mols.end()) return it->second;
        const std::string where = cat(target.source, ": chain ", c.id);
        ResidueMol m;
        if (opt.extra_mols && opt.extra_mols->has(res)) {
            m = opt.extra_mols->at(res);
        } else if (!c.smiles.empty()) {
            // boltz builds an affinity binder from its standardised SMILES (standardize.h)
            const std::string smiles =
                c.id == target.affinity_binder ? standardize_smiles(c.smiles, where) : c.smiles;
            m = ligand_from_smiles(smiles, res, where, opt.ligand_seed);
        } else {
            m = ccd_molecule(res, lib, opt.mols_dir, where);
        }
        return mols.emplace(res, std::move(m)).first->second;
    }
};

// A residue as the tokenizer takes it: its chain (asym id) and index in the chain, its name, the
// chain's type as const.chain_types names it, and whether it is a ligand or a modified residue.
struct ResidueSite {
    int chain = 0, index = 0;
    std::string name, type_upper;
    bool ligand = false, modified = false;
};

// The residue's atoms as indices into the molecule: standard residues in const.ref_atoms order;
// ligands every heavy atom in the molecule's order; modified residues those the CCD does not flag
// as leaving atoms.
std::vector<int> residue_atoms(const ResidueMol& mol, const std::string& res, bool ligand,
                               bool modified) {
    const Vocab& v = vocab();
    std::vector<int> mol_atoms;
    if (ligand || modified) {
        for (size_t k = 0; k < mol.atoms.size(); ++k)
            if (ligand || !mol.atoms[k].leaving) mol_atoms.push_back(int(k));
    } else {
        for (const std::string& n : v.ref_atoms.at(res)) {
            const int k = mol.atom_index(n);
            BI_CHECK(k >= 0, kWhere, "canonical molecule ", res, " has no atom ", n);
            mol_atoms.push_back(k);
        }
    }
    return mol_atoms;
}

// An atom's atom_backbone_feat class: 0 for none, then the protein backbone atoms, then the
// nucleic acid ones.
int backbone_class(const ResidueSite& s, const std::string& atom_name) {
    const Vocab& v = vocab();
    int bb = 0;
    if (s.type_upper == "PROTEIN") {
        auto it = std::find(v.protein_backbone.begin(), v.protein_backbone.end(), atom_name);
        if (it != v.protein_backbone.end()) bb = int(it - v.protein_backbone.begin()) + 1;
    } else if (!s.ligand) {
        auto it = std::find(v.nucleic_backbone.begin(), v.nucleic_backbone.end(), atom_name);
        if (it != v.nucleic_backbone.end())
            bb = int(it - v.nucleic_backbone.begin()) + 1 + int(v.protein_backbone.size());
    }
    return bb;
}

// The residue's atoms (`mol_atoms` of `mol` at conformer `conf`), appended after the atoms so
// far, all with the residue's ref_space_uid; `full_atom` is the first one's index in the
// uncropped target. Each atom belongs to the residue's token (a ligand's: to its own).
void add_residue_atoms(const ResidueSite& s, const ResidueMol& mol,
                       const std::vector<int>& mol_atoms,
                       const std::vector<std::array<double, 3>>& conf, int uid, int64_t full_atom,
                       Tokenized& tk, StructureMeta& meta) {
    const int64_t first_token = int64_t(tk.tokens.size());
    for (size_t j = 0; j < mol_atoms.size(); ++j) {
        const int k = mol_atoms[j];
        const MolAtom& a = mol.atoms[size_t(k)];
        tk.atom_names.push_back(a.name);
        tk.atom_element.push_back(a.element);
        tk.atom_charge.push_back(a.charge);
        tk.atom_chirality.push_back(a.chirality);
        tk.atom_pos.push_back(
            {float(conf[size_t(k)][0]), float(conf[size_t(k)][1]), float(conf[size_t(k)][2])});
        tk.atom_uid.push_back(uid);
        tk.src_atom.push_back(full_atom + int64_t(j));
        tk.atom_backbone.push_back(backbone_class(s, a.name));
        meta.atoms.push_back(
            {a.name, a.element, a.symbol, first_token + (s.ligand ? int64_t(j) : 0)});
    }
}

// The residue's tokens: one per standard residue, one per atom of a ligand (UNK, the atom its own
// center and representative). Its `n_atoms` atoms start at global atom `res_begin`.
void add_residue_tokens(const ResidueSite& s, int64_t res_begin, int64_t n_atoms, Tokenized& tk,
                        StructureMeta& meta) {
    const Vocab& v = vocab();
    const int unk_type = v.token_id("UNK");
    const int64_t n_tok = s.ligand ? n_atoms : 1;
    for (int64_t j = 0; j < n_tok; ++j) {
        Token t;
        t.chain = s.chain;
        t.res_idx = s.index;
        t.res_name = s.name;
        t.res_type = s.ligand     ? unk_type
                     : s.modified ? v.token_id(v.unk_token.at(s.type_upper))
                                  : v.token_id(s.name);
        t.mol_type = v.chain_type_id(s.type_upper);
        t.modified = s.modified;
        if (s.ligand) {
            t.atom_begin = res_begin + j;
            t.atom_count = 1;
        } else if (s.modified) {  // center and representative: the first kept atom
            t.atom_begin = res_begin;
            t.atom_count = n_atoms;
        } else {
            const auto& names = v.ref_atoms.at(s.name);
            const auto find = [&](const std::string& n) {
                return int64_t(std::find(names.begin(), names.end(), n) - names.begin());
            };
            t.atom_begin = res_begin;
            t.atom_count = n_atoms;
            t.center = find(v.center_atom.at(s.name));
            t.disto = find(v.disto_atom.at(s.name));
        }
        meta.tokens.push_back({s.chain, s.name, s.index, t.atom_begin, t.atom_count,
                               t.atom_begin + t.center, t.atom_begin + t.disto});
        tk.tokens.push_back(std::move(t));
    }
}

// The residue's own bonds between kept atoms, and its geometric constraints: ligands and modified
// residues (boltz stores none for standard residues).
void add_residue_bonds(const ResidueMol& mol, const std::vector<int>& mol_atoms, int64_t res_begin,
                       Tokenized& tk) {
    std::vector<int64_t> at(mol.atoms.size(), -1);
    for (size_t j = 0; j < mol_atoms.size(); ++j) at[size_t(mol_atoms[j])] = res_begin + int64_t(j);
    for (const MolBond& b : mol.bonds)
        if (at[size_t(b.a)] >= 0 && at[size_t(b.b)] >= 0)
            tk.bonds.push_back({at[size_t(b.a)], at[size_t(b.b)], int64_t(b.type)});
    append_constraints(mol.constraints, at, tk.constraints);
}

// Tokens and atoms of the residues `keep` marks (by global residue index; null: all), and the
// structure's metadata (`meta`, made again). Skipped residues draw no conformer and take no
// ref_space_uid, as in boltz's crop.
Tokenized tokenize(const bio::Target& target, const FeaturizeOptions& opt,
                   const ConformerLibrary& lib, LigandMols& ligand_mols,
                   const std::vector<char>* keep, StructureMeta& meta) {
    const Vocab& v = vocab();
    const int unk_type = v.token_id("UNK");
    Tokenized tk;
    tk.chain_res_types.resize(target.chains.size());
    meta = StructureMeta();
    NumpyGenerator conformer_rng(opt.conformer_seed);
    int64_t full_atom = 0;
    int next_uid = 0;
    for (size_t ci = 0; ci < target.chains.size(); ++ci) {
        const bio::Chain& c = target.chains[ci];
        const bool ligand = c.type == bio::MoleculeType::Ligand;
        const std::string type_upper = c.type == bio::MoleculeType::Protein ? "PROTEIN"
                                       : c.type == bio::MoleculeType::Dna   ? "DNA"
                                       : c.type == bio::MoleculeType::Rna   ? "RNA"
                                                                              : "NONPOLYMER";
        ChainMeta cm;
        cm.id = c.id;
        cm.type = bio::molecule_type_name(c.type);
        cm.asym_id = int(ci);
        cm.entity_id = c.entity_id;
        cm.sym_id = c.sym_id;
        cm.token_begin = int64_t(tk.tokens.size());
        cm.atom_begin = tk.num_atoms;
        for (size_t r = 0; r < c.residues.size(); ++r) {
            const std::string& res = c.residues[r];
            // A polymer residue outside boltz's residue tokens is a modification (a CCD code).
            const bool modified = !ligand && v.ref_atoms.count(res) == 0;
            const ResidueMol& mol = ligand || modified ? ligand_mols.get(c, res) : lib.at(res);
            const std::vector<int> mol_atoms = residue_atoms(mol, res, ligand, modified);
            BI_CHECK(!mol_atoms.empty(), kWhere, "chain ", c.id, ": molecule ", res,
                     " has no heavy atoms");
            tk.chain_res_types[ci].push_back(ligand || modified ? unk_type : v.token_id(res));
            if (keep && !(*keep)[tk.res_atoms.size()]) {
                tk.res_atoms.push_back({int(ci), int(r), -1, 0});
                full_atom += int64_t(mol_atoms.size());
                continue;
            }
            // boltz draws random.choice(conformer ids) once per (chain, residue), in token
            // order, from np.random.default_rng(42); nothing else draws from it before at
            // inference. A single conformer draws nothing (numpy returns at once for a range of
            // one).
            const auto& conf =
                mol.conformers[size_t(conformer_rng.choice_index(int64_t(mol.conformers.size())))];
            const int uid = next_uid++;  // (chain, residue) counter
            const int64_t res_begin = tk.num_atoms;
            const ResidueSite site{int(ci), int(r), res, type_upper, ligand, modified};
            add_residue_atoms(site, mol, mol_atoms, conf, uid, full_atom, tk, meta);
            tk.num_atoms += int64_t(mol_atoms.size());
            full_atom += int64_t(mol_atoms.size());
            tk.res_atoms.push_back({int(ci), int(r), res_begin, int64_t(mol_atoms.size())});
            add_residue_tokens(site, res_begin, int64_t(mol_atoms.size()), tk, meta);
            if (ligand || modified) add_residue_bonds(mol, mol_atoms, res_begin, tk);
        }
        cm.token_count = int64_t(tk.tokens.size()) - cm.token_begin;
        cm.atom_count = tk.num_atoms - cm.atom_begin;
        meta.chains.push_back(cm);
    }
    return tk;
}

// ---- the affinity stage's crop ---------------------------------------------------------------

// The affinity binder's chain (its asym id), which must be a ligand chain of the input.
int affinity_binder_chain(const bio::Target& target, const AffinityInputs& aff) {
    int binder_chain = -1;
    for (size_t ci = 0; ci < target.chains.size(); ++ci)
        if (target.chains[ci].id == aff.binder) binder_chain = int(ci);
    BI_CHECK(binder_chain >= 0, kWhere, target.source, ": the affinity binder '", aff.binder,
             "' is not a chain of the input");
    BI_CHECK(target.chains[size_t(binder_chain)].type == bio::MoleculeType::Ligand, kWhere,
             target.source, ": the affinity binder '", aff.binder, "' is not a ligand");
    return binder_chain;
}

// boltz's AffinityCropper on the predicted coordinates picks the tokens, whole residues always:
// the residues it keeps (by global residue index), and in `num_tokens` how many tokens it picked.
std::vector<char> affinity_crop_residues(const bio::Target& target, const AffinityInputs& aff,
                                         int binder_chain, const Tokenized& tk,
                                         size_t& num_tokens) {
    BI_CHECK(int64_t(aff.coords.size()) == tk.num_atoms, kWhere, target.source,
             ": the structure has ", aff.coords.size(), " atom coordinates for ", tk.num_atoms,
             " atoms");
    std::vector<CropToken> crop_tokens;
    for (const Token& t : tk.tokens)
        crop_tokens.push_back({t.chain, t.res_idx, t.mol_type, t.chain == binder_chain,
                               aff.coords[size_t(t.atom_begin + t.center)], t.atom_count});
    // token -> global residue: tokens come residue by residue
    std::vector<size_t> token_res;
    size_t g = 0;
    for (const Token& t : tk.tokens) {
        while (g < tk.res_atoms.size() &&
               !(tk.res_atoms[g].chain == t.chain && tk.res_atoms[g].res == t.res_idx))
            ++g;
        BI_CHECK(g < tk.res_atoms.size(), kWhere, "token table out of order");
        token_res.push_back(g);
    }
    std::vector<char> keep(tk.res_atoms.size(), 0);
    const std::vector<int64_t> kept = affinity_crop(crop_tokens, aff.limits);
    BI_CHECK(!kept.empty(), kWhere, target.source, ": the affinity crop kept no tokens");
    for (const int64_t i : kept) keep[token_res[size_t(i)]] = 1;
    num_tokens = kept.size();
    return keep;
}

// An atom's coordinates in the given structure (the affinity stage's prediction).
std::array<float, 3> predicted_coord(const AffinityInputs& aff, const Tokenized& tk, int64_t a) {
    return aff.coords[size_t(tk.src_atom[size_t(a)])];
}

// ---- constraints: covalent bonds (after the residues' own bonds), pocket and contact tokens ---

// A pocket or contact constraint: the token pairs (rows x cols) it conditions, with its class
// and distance.
struct CondPair {
    std::vector<int64_t> rows, cols;
    int cls = 0;
    float threshold = 0;
};

// The target's bond, pocket and contact constraints on the tokenised target.
struct ConstraintTables {
    // boltz's cyclic rule reads the bonds' global residue indices (see cyclic_periods).
    std::vector<std::array<int64_t, 3>> bond_residues;  // chain (both ends), residue, residue
    // covalent bonds between chains: the chains and the atoms (connected_*_index)
    std::vector<std::array<int, 2>> connected_chains, connected_atoms;
    std::vector<CondPair> conditioning;  // in boltz's order: pockets, then contacts
    // Forced constraints steer the sampler (potentials.h): per pocket token (in token order) the
    // pairs of every binder atom with every atom of the token, per contact the pairs of the two
    // tokens' atoms; each such set one union group.
    std::vector<float> guide_i, guide_j, guide_group, guide_threshold;

    void add_guide(int64_t a0, int64_t na, int64_t b0, int64_t nb, float thr) {
        const float group = guide_group.empty() ? 0.f : guide_group.back() + 1.f;
        for (int64_t a = a0; a < a0 + na; ++a)
            for (int64_t b = b0; b < b0 + nb; ++b) {
                guide_i.push_back(float(a));
                guide_j.push_back(float(b));
                guide_group.push_back(group);
                guide_threshold.push_back(thr);
            }
    }
};

// A constraint's references (chain, residue, atom) resolved on the tokenised target.
struct RefResolver {
    const bio::Target& target;
    const std::vector<ResAtoms>& res_atoms;
    const std::vector<std::string>& atom_names;
    const std::vector<AtomMeta>& atoms;

    int chain_of(const bio::ConstraintRef& r) const { return constraint_chain(target, r); }
    // The referenced residue's global residue index.
    size_t residue_of(int ci, const bio::ConstraintRef& r) const {
        const int n = constraint_residue(target.chains[size_t(ci)], r);
        for (size_t g = 0; g < res_atoms.size(); ++g)
            if (res_atoms[g].chain == ci && res_atoms[g].res == n) return g;
        fail(r.where, "constraint: residue not found");
    }
    // A residue the affinity crop left out has no atoms: constraints on it are dropped (-1).
    int64_t atom_in(size_t g, const bio::ConstraintRef& r) const {
        const ResAtoms& ra = res_atoms[g];
        if (ra.count == 0) return -1;
        for (int64_t a = ra.begin; a < ra.begin + ra.count; ++a)
            if (atom_names[size_t(a)] == r.atom) return a;
        fail_missing_atom(target.chains[size_t(ra.chain)], ra.res, r);
    }
    // A pocket or contact token: a polymer residue's token, or a ligand atom's (in the chain's
    // first residue, where boltz looks names up).
    int64_t token_of(const bio::ConstraintRef& r) const {
        const int ci = chain_of(r);
        const bio::Chain& c = target.chains[size_t(ci)];
        if (token_names_atom(c, r)) {
            bio::ConstraintRef first = r;
            first.residue = "1";
            const int64_t a = atom_in(residue_of(ci, first), r);
            return a < 0 ? -1 : atoms[size_t(a)].token;
        }
        const size_t g = residue_of(ci, r);
        return res_atoms[g].count == 0 ? -1 : atoms[size_t(res_atoms[g].begin)].token;
    }
};

// Bond constraints: a COVALENT bond between their atoms (kept by the crop) after the residues'
// own bonds, a connection when it joins two chains, and its residues when within one chain.
void add_bond_constraints(const RefResolver& refs, std::vector<std::array<int64_t, 3>>& bonds,
                          ConstraintTables& ct) {
    for (const bio::BondConstraint& b : refs.target.bonds) {
        const int c1 = refs.chain_of(b.atom1), c2 = refs.chain_of(b.atom2);
        const size_t g1 = refs.residue_of(c1, b.atom1), g2 = refs.residue_of(c2, b.atom2);
        const int64_t a1 = refs.atom_in(g1, b.atom1), a2 = refs.atom_in(g2, b.atom2);
        if (a1 >= 0 && a2 >= 0) {
            bonds.push_back({a1, a2, 5});  // COVALENT
            if (c1 != c2) {
                ct.connected_chains.push_back({c1, c2});
                ct.connected_atoms.push_back({int(a1), int(a2)});
            }
        }
        if (c1 == c2) ct.bond_residues.push_back({c1, int64_t(g1), int64_t(g2)});
    }
}

// Pocket constraints: each pocket token conditioned on the binder's tokens and back; a forced
// pocket steers every binder atom towards each pocket token's atoms.
void add_pocket_constraints(const RefResolver& refs, const std::vector<Token>& tokens,
                            const StructureMeta& meta, ConstraintTables& ct) {
    const Vocab& v = vocab();
    const int64_t N = int64_t(tokens.size());
    for (const bio::PocketConstraint& pk : refs.target.pockets) {
        bio::ConstraintRef b;
        b.chain = pk.binder;
        b.where = pk.where;
        const int bc = refs.chain_of(b);
        std::vector<int64_t> binder;
        for (int64_t i = 0; i < N; ++i)
            if (tokens[size_t(i)].chain == bc) binder.push_back(i);
        std::vector<bool> pocket(size_t(N), false);
        for (const bio::ConstraintRef& r : pk.contacts) {
            const int64_t t = refs.token_of(r);
            if (t < 0) continue;
            pocket[size_t(t)] = true;
            ct.conditioning.push_back(
                {binder, {t}, v.contact_conditioning.at("BINDER>POCKET"), float(pk.max_distance)});
            ct.conditioning.push_back(
                {{t}, binder, v.contact_conditioning.at("POCKET>BINDER"), float(pk.max_distance)});
        }
        if (!pk.force) continue;
        const ChainMeta& bm = meta.chains[size_t(bc)];
        for (int64_t t = 0; t < N; ++t)
            if (pocket[size_t(t)])
                ct.add_guide(bm.atom_begin, bm.atom_count, tokens[size_t(t)].atom_begin,
                             tokens[size_t(t)].atom_count, float(pk.max_distance));
    }
}

// Contact constraints: the two tokens conditioned on each other; a forced contact steers their
// atoms together.
void add_contact_constraints(const RefResolver& refs, const std::vector<Token>& tokens,
                             ConstraintTables& ct) {
    const Vocab& v = vocab();
    for (const bio::ContactConstraint& k : refs.target.contacts) {
        const int64_t a = refs.token_of(k.token1), b = refs.token_of(k.token2);
        if (a < 0 || b < 0) continue;
        const int cls = v.contact_conditioning.at("CONTACT");
        ct.conditioning.push_back({{a}, {b}, cls, float(k.max_distance)});
        ct.conditioning.push_back({{b}, {a}, cls, float(k.max_distance)});
        if (k.force)
            ct.add_guide(tokens[size_t(a)].atom_begin, tokens[size_t(a)].atom_count,
                         tokens[size_t(b)].atom_begin, tokens[size_t(b)].atom_count,
                         float(k.max_distance));
    }
}

// ---- token features (process_token_features) --------------------------------------------------

// Each token's cyclic_period: parse_polymer's, the sequence length for `cyclic: true` ...
std::vector<float> cyclic_periods(const bio::Target& target, const std::vector<Token>& tokens,
                                  const ConstraintTables& ct) {
    const int64_t N = int64_t(tokens.size());
    std::vector<float> cyclic(N, 0.f);
    for (int64_t i = 0; i < N; ++i) {
        const bio::Chain& c = target.chains[size_t(tokens[size_t(i)].chain)];
        cyclic[i] = c.cyclic ? float(c.residues.size()) : 0.f;
    }
    // ... and a bond within a chain (of over 2 residues) between the global residue indices
    // 0 and (its length - 1) makes it cyclic too: boltz compares the bonds' global residue
    // indices with chain-local ones, so only the first chain can match.
    for (size_t ci = 0; ci < target.chains.size(); ++ci) {
        const int64_t n = int64_t(target.chains[ci].residues.size());
        if (n <= 2 || target.chains[ci].type == bio::MoleculeType::Ligand) continue;
        for (const auto& [bc, g1, g2] : ct.bond_residues)
            if (bc == int64_t(ci) && g1 != g2 && std::min(g1, g2) == 0 && std::max(g1, g2) == n - 1)
                for (int64_t i = 0; i < N; ++i)
                    if (tokens[size_t(i)].chain == int(ci))
                        cyclic[size_t(i)] = std::max(cyclic[size_t(i)], float(n));
    }
    return cyclic;
}

// Token bonds from atom bonds: both directions, type = bond type + 1 (0: no bond); a later bond
// of the same pair wins. Standard residues have none.
void set_token_bonds(const std::vector<std::array<int64_t, 3>>& bonds, const StructureMeta& meta,
                     int64_t N, Features& f) {
    std::vector<float> token_bonds(size_t(N * N), 0.f), type_bonds(size_t(N * N), 0.f);
    for (const auto& [a1, a2, type] : bonds) {
        const int64_t i = meta.atoms[size_t(a1)].token, j = meta.atoms[size_t(a2)].token;
        for (const int64_t p : {i * N + j, j * N + i}) {
            token_bonds[size_t(p)] = 1.f;
            type_bonds[size_t(p)] = float(type + 1);
        }
    }
    f.set("token_bonds", make(token_bonds, {N, N, 1}));
    f.set("type_bonds", make(type_bonds, {N, N}));
}

// Pocket and contact constraints: every pair starts UNSELECTED, the constrained ones take their
// class and distance; with none, boltz turns every pair UNSPECIFIED.
void set_contact_conditioning(const std::vector<CondPair>& conditioning, int64_t N, Features& f) {
    const Vocab& v = vocab();
    const int n_cc = int(v.contact_conditioning.size());
    std::vector<int> cls(size_t(N * N), v.contact_conditioning.at(
                                            conditioning.empty() ? "UNSPECIFIED" : "UNSELECTED"));
    std::vector<float> threshold(size_t(N * N), 0.f);
    for (const CondPair& cp : conditioning)
        for (int64_t i : cp.rows)
            for (int64_t j : cp.cols) {
                cls[size_t(i * N + j)] = cp.cls;
                threshold[size_t(i * N + j)] = cp.threshold;
            }
    std::vector<float> cc(size_t(N * N * n_cc), 0.f);
    for (int64_t p = 0; p < N * N; ++p) cc[size_t(p * n_cc + cls[size_t(p)])] = 1.f;
    f.set("contact_conditioning", make(cc, {N, N, n_cc}));
    f.set("contact_threshold", make(threshold, {N, N}));
}

// The per-token features, token bonds (the atom bonds also go to meta.bonds), masks, contact
// conditioning, method, modified residues and the affinity binder's mask (binder_chain; -1:
// none). `aff`: the affinity stage, whose distogram centres are the prediction's.
void process_token_features(const bio::Target& target, const Tokenized& tk,
                            const ConstraintTables& ct, const AffinityInputs* aff, int binder_chain,
                            int method, StructureMeta& meta, Features& f) {
    const Vocab& v = vocab();
    const std::vector<Token>& tokens = tk.tokens;
    const int64_t N = int64_t(tokens.size());
    const int num_classes = int(v.tokens.size());  // 33
    std::vector<float> token_index(N), residue_index(N), asym(N), entity(N), sym(N), mol(N),
        res_type(size_t(N * num_classes), 0.f);
    for (int64_t i = 0; i < N; ++i) {
        const Token& t = tokens[size_t(i)];
        const bio::Chain& c = target.chains[size_t(t.chain)];
        token_index[i] = float(i);
        residue_index[i] = float(t.res_idx);
        asym[i] = float(t.chain);
        entity[i] = float(c.entity_id);
        sym[i] = float(c.sym_id);
        mol[i] = float(t.mol_type);
        res_type[size_t(i * num_classes + t.res_type)] = 1.f;
    }
    f.set("token_index", make(token_index, {N}));
    f.set("residue_index", make(residue_index, {N}));
    f.set("asym_id", make(asym, {N}));
    f.set("entity_id", make(entity, {N}));
    f.set("sym_id", make(sym, {N}));
    f.set("mol_type", make(mol, {N}));
    f.set("res_type", make(res_type, {N, num_classes}));
    f.set("cyclic_period", make(cyclic_periods(target, tokens, ct), {N}));
    // Structure coordinates are all zero at inference (the parser sets them so); the
    // affinity stage's are the prediction's, at each token's representative atom.
    std::vector<float> disto(size_t(N * 3), 0.f);
    if (aff)
        for (int64_t i = 0; i < N; ++i) {
            const Token& t = tokens[size_t(i)];
            const auto x = predicted_coord(*aff, tk, t.atom_begin + t.disto);
            for (int e = 0; e < 3; ++e) disto[size_t(i * 3 + e)] = x[e];
        }
    f.set("disto_center", make(disto, {N, 3}));
    set_token_bonds(tk.bonds, meta, N, f);
    meta.bonds = tk.bonds;
    f.set("token_pad_mask", make(std::vector<float>(size_t(N), 1.f), {N}));
    f.set("token_resolved_mask", make(std::vector<float>(size_t(N), 1.f), {N}));
    f.set("token_disto_mask", make(std::vector<float>(size_t(N), 1.f), {N}));
    set_contact_conditioning(ct.conditioning, N, f);
    f.set("method_feature", make(std::vector<float>(size_t(N), float(method)), {N}));
    std::vector<float> modified(size_t(N), 0.f);
    for (int64_t i = 0; i < N; ++i) modified[size_t(i)] = tokens[size_t(i)].modified ? 1.f : 0.f;
    f.set("modified", make(modified, {N}));
    std::vector<float> binder(size_t(N), 0.f);
    for (int64_t i = 0; i < N; ++i)
        binder[size_t(i)] = tokens[size_t(i)].chain == binder_chain ? 1.f : 0.f;
    f.set("affinity_token_mask", make(binder, {N}));
}

// process_contact_feature_constraints: the forced constraints' atom pairs (potentials.h), as
// boltz names them.
void process_contact_feature_constraints(const ConstraintTables& ct, Features& f) {
    const int64_t E = int64_t(ct.guide_i.size());
    std::vector<float> pairs = ct.guide_i;
    pairs.insert(pairs.end(), ct.guide_j.begin(), ct.guide_j.end());
    f.set("contact_pair_index", make(pairs, {2, E}));
    f.set("contact_union_index", make(ct.guide_group, {E}));
    f.set("contact_negation_mask", make(std::vector<float>(size_t(E), 1.f), {E}));
    f.set("contact_thresholds", make(ct.guide_threshold, {E}));
}

// ---- the physical potentials' constraints; boltz's affinity stage reads none -------------------

// process_residue_constraint_features: the ligand and modified residues' RDKit distance bounds,
// chiral centres, stereo bonds, planar bonds and rings.
void process_residue_constraint_features(const ResidueConstraints& rc, Features& f) {
    const int64_t E = int64_t(rc.bounds.size());
    const size_t n = static_cast<size_t>(E);
    std::vector<float> idx(2 * n), bond(n), angle(n), up(n), lo(n);
    for (int64_t e = 0; e < E; ++e) {
        const ResidueConstraints::Bounds& b = rc.bounds[size_t(e)];
        idx[size_t(e)] = float(b.a);
        idx[size_t(E + e)] = float(b.b);
        bond[size_t(e)] = b.is_bond ? 1.f : 0.f;
        angle[size_t(e)] = b.is_angle ? 1.f : 0.f;
        up[size_t(e)] = b.upper;
        lo[size_t(e)] = b.lower;
    }
    f.set("rdkit_bounds_index", make(idx, {2, E}));
    f.set("rdkit_bounds_bond_mask", make(bond, {E}));
    f.set("rdkit_bounds_angle_mask", make(angle, {E}));
    f.set("rdkit_upper_bounds", make(up, {E}));
    f.set("rdkit_lower_bounds", make(lo, {E}));
    std::vector<std::array<int, 4>> chiral, stereo;
    std::vector<float> chiral_ref, chiral_r, stereo_check, stereo_e;
    for (const auto& x : rc.chiral) {
        chiral.push_back(x.atoms);
        chiral_ref.push_back(x.is_reference ? 1.f : 0.f);
        chiral_r.push_back(x.is_r ? 1.f : 0.f);
    }
    for (const auto& x : rc.stereo) {
        stereo.push_back(x.atoms);
        stereo_check.push_back(x.is_check ? 1.f : 0.f);
        stereo_e.push_back(x.is_e ? 1.f : 0.f);
    }
    const int64_t C = int64_t(chiral.size()), S = int64_t(stereo.size());
    f.set("chiral_atom_index", index_rows(chiral));
    f.set("chiral_reference_mask", make(chiral_ref, {C}));
    f.set("chiral_atom_orientations", make(chiral_r, {C}));
    f.set("stereo_bond_index", index_rows(stereo));
    f.set("stereo_reference_mask", make(stereo_check, {S}));
    f.set("stereo_bond_orientations", make(stereo_e, {S}));
    f.set("planar_bond_index", index_rows(rc.planar_bonds));
    f.set("planar_ring_5_index", index_rows(rc.rings5));
    f.set("planar_ring_6_index", index_rows(rc.rings6));
}

// process_chain_feature_constraints: the covalent bonds between chains, and the pairs of chains
// of one entity.
void process_chain_feature_constraints(const bio::Target& target, const ConstraintTables& ct,
                                       Features& f) {
    f.set("connected_chain_index", index_rows(ct.connected_chains));
    f.set("connected_atom_index", index_rows(ct.connected_atoms));
    std::vector<std::array<int, 2>> symmetric;  // chains of one entity, i < j
    for (size_t i = 0; i < target.chains.size(); ++i)
        for (size_t j = i + 1; j < target.chains.size(); ++j)
            if (target.chains[i].entity_id == target.chains[j].entity_id)
                symmetric.push_back({int(i), int(j)});
    f.set("symmetric_chain_index", index_rows(symmetric));
}

// ---- atom features (process_atom_features) ----------------------------------------------------

// center_random_augmentation for uid in range(max(uid)): the last residue keeps its raw conformer
// (boltz's off-by-one); the others are centred, rotated and translated.
void center_random_augmentation(const FeaturizeOptions& opt, const std::vector<int>& atom_uid,
                                std::vector<std::array<float, 3>>& atom_pos) {
    AugmentationSource aug = opt.augmentation ? opt.augmentation : seeded_augmentation(opt.seed);
    const int max_uid = atom_uid.empty() ? 0 : *std::max_element(atom_uid.begin(), atom_uid.end());
    std::vector<std::vector<size_t>> uid_atoms(size_t(max_uid) + 1);
    for (size_t a = 0; a < atom_uid.size(); ++a) uid_atoms[size_t(atom_uid[a])].push_back(a);
    for (int uid = 0; uid < max_uid; ++uid) {
        const std::vector<size_t>& idx = uid_atoms[size_t(uid)];
        if (idx.empty()) continue;
        float mean[3] = {0, 0, 0};
        for (size_t a : idx)
            for (int d = 0; d < 3; ++d) mean[d] += atom_pos[a][d];
        for (float& m : mean) m /= float(idx.size());
        const RigidTransform t = aug(uid);
        for (size_t a : idx) {
            float x[3];
            for (int d = 0; d < 3; ++d) x[d] = atom_pos[a][d] - mean[d];
            for (int j = 0; j < 3; ++j)
                atom_pos[a][j] =
                    x[0] * t.rot[0][j] + x[1] * t.rot[1][j] + x[2] * t.rot[2][j] + t.trans[j];
        }
    }
}

// The per-atom features, padded to Ap atoms: reference positions (the augmented conformers),
// masks, name characters, element, charge, chirality, backbone class, ref_space_uid and
// atom_to_token.
void process_atom_features(const Tokenized& tk, const StructureMeta& meta, int64_t Ap,
                           Features& f) {
    const Vocab& v = vocab();
    const int64_t A = tk.num_atoms, N = int64_t(tk.tokens.size());
    const int n_bb = 1 + int(v.protein_backbone.size() + v.nucleic_backbone.size());  // 17
    const int n_el = v.num_elements;
    std::vector<float> ref_pos(size_t(Ap * 3), 0.f), mask(size_t(Ap), 0.f),
        name_chars(size_t(Ap * 4 * 64), 0.f), element(size_t(Ap * n_el), 0.f),
        charge(size_t(Ap), 0.f), chirality(size_t(Ap), 0.f), backbone(size_t(Ap * n_bb), 0.f),
        uid(size_t(Ap), 0.f), a2t(size_t(Ap * N), 0.f);
    for (int64_t a = 0; a < A; ++a) {
        for (int d = 0; d < 3; ++d) ref_pos[size_t(a * 3 + d)] = tk.atom_pos[size_t(a)][d];
        mask[size_t(a)] = 1.f;
        const std::string& n = tk.atom_names[size_t(a)];
        BI_CHECK(n.size() <= 4, kWhere, "atom name '", n, "' is longer than 4 characters");
        for (size_t k = 0; k < n.size(); ++k) {
            const int code = int((unsigned char)n[k]) - 32;
            BI_CHECK(code >= 0 && code < 64, kWhere, "atom name '", n,
                     "' has a character outside ASCII 32..95");
            name_chars[size_t((a * 4 + int64_t(k)) * 64 + code)] = 1.f;
        }
        for (size_t k = n.size(); k < 4; ++k) name_chars[size_t((a * 4 + int64_t(k)) * 64)] = 1.f;
        element[size_t(a * n_el + tk.atom_element[size_t(a)])] = 1.f;
        charge[size_t(a)] = float(tk.atom_charge[size_t(a)]);
        chirality[size_t(a)] = float(tk.atom_chirality[size_t(a)]);
        backbone[size_t(a * n_bb + tk.atom_backbone[size_t(a)])] = 1.f;
        uid[size_t(a)] = float(tk.atom_uid[size_t(a)]);
        a2t[size_t(a * N + meta.atoms[size_t(a)].token)] = 1.f;
    }
    f.set("ref_pos", make(ref_pos, {Ap, 3}));
    f.set("atom_resolved_mask", make(mask, {Ap}));
    f.set("atom_pad_mask", make(mask, {Ap}));
    f.set("ref_atom_name_chars", make(name_chars, {Ap, 4, 64}));
    f.set("ref_element", make(element, {Ap, n_el}));
    f.set("ref_charge", make(charge, {Ap}));
    f.set("ref_chirality", make(chirality, {Ap}));
    f.set("atom_backbone_feat", make(backbone, {Ap, n_bb}));
    f.set("ref_space_uid", make(uid, {Ap}));
    f.set("atom_to_token", make(a2t, {Ap, N}));
}

// Each token's representative (distogram) and center atom, and the R set: the resolved tokens of
// polymer chains, by their center atom.
void set_token_atom_maps(const std::vector<Token>& tokens, int64_t Ap, Features& f) {
    const Vocab& v = vocab();
    const int64_t N = int64_t(tokens.size());
    std::vector<float> rep(size_t(N * Ap), 0.f), center(size_t(N * Ap), 0.f), r_set;
    const int nonpolymer = v.chain_type_id("NONPOLYMER");
    int64_t r_rows = 0;
    for (int64_t i = 0; i < N; ++i) {
        const Token& t = tokens[size_t(i)];
        rep[size_t(i * Ap + t.atom_begin + t.disto)] = 1.f;
        center[size_t(i * Ap + t.atom_begin + t.center)] = 1.f;
        if (t.mol_type != nonpolymer) {
            r_set.resize(size_t((r_rows + 1) * Ap), 0.f);
            r_set[size_t(r_rows * Ap + t.atom_begin + t.center)] = 1.f;
            ++r_rows;
        }
    }
    f.set("token_to_rep_atom", make(rep, {N, Ap}));
    f.set("r_set_to_rep_atom", make(r_set, {r_rows, Ap}));
    f.set("token_to_center_atom", make(center, {N, Ap}));
}

// compute_collinear_mask on frame atoms (a, b, c) of the affinity stage's prediction: b - a and
// b - c neither shorter than 1e-2 nor within 25 degrees of (anti)parallel; fp32 as numpy computes
// it.
bool not_collinear(const AffinityInputs& aff, const Tokenized& tk, int64_t a, int64_t b,
                   int64_t c) {
    const auto xa = predicted_coord(aff, tk, a), xb = predicted_coord(aff, tk, b),
               xc = predicted_coord(aff, tk, c);
    float v1[3], v2[3], n1 = 0, n2 = 0;
    for (int e = 0; e < 3; ++e) {
        v1[e] = xb[e] - xa[e];
        v2[e] = xb[e] - xc[e];
        n1 += v1[e] * v1[e];
        n2 += v2[e] * v2[e];
    }
    n1 = std::sqrt(n1), n2 = std::sqrt(n2);
    float dot = 0;
    for (int e = 0; e < 3; ++e) dot += (v1[e] / (n1 + 1e-6f)) * (v2[e] / (n2 + 1e-6f));
    return std::fabs(dot) < 0.9063 && n1 > 1e-2f && n2 > 1e-2f;
}

// compute_frames_nonpolymer for a ligand atom's token `t` of chain `cm`: the chain's atoms
// (nearest, itself, second nearest) by the structure's coordinates. At inference these are all
// zero: numpy's argsort of a row of zeros is 0, 1, 2, ..., so every token gets the chain's first
// three atoms, and no frame is resolved. The affinity stage has a prediction.
void nonpolymer_frame(const Token& t, const ChainMeta& cm, const AffinityInputs* aff,
                      const Tokenized& tk, float* frame, float& resolved) {
    int64_t order[3] = {0, 1, 2};
    if (aff) {
        std::vector<std::pair<float, int64_t>> d;
        const auto x = predicted_coord(*aff, tk, t.atom_begin);
        for (int64_t k = 0; k < cm.atom_count; ++k) {
            const auto y = predicted_coord(*aff, tk, cm.atom_begin + k);
            float s2 = 0;
            for (int e = 0; e < 3; ++e) s2 += (x[e] - y[e]) * (x[e] - y[e]);
            d.push_back({std::sqrt(s2), k});
        }
        std::stable_sort(d.begin(), d.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
        for (int k = 0; k < 3; ++k) order[k] = d[size_t(k)].second;
    }
    const int64_t f0 = cm.atom_begin + order[1], f1 = cm.atom_begin + order[0],
                  f2 = cm.atom_begin + order[2];
    frame[0] = float(f0);
    frame[1] = float(f1);
    frame[2] = float(f2);
    resolved = aff && not_collinear(*aff, tk, f0, f1, f2) ? 1.f : 0.f;
}

// compute_frames: N, CA, C for proteins; C1', C3', C4' for nucleic acids; none for UNK; a
// nonpolymer chain of 3 or more atoms per atom (nonpolymer_frame). A frame counts as resolved
// only in the affinity stage (by its prediction).
void compute_frames(const Tokenized& tk, const StructureMeta& meta, const AffinityInputs* aff,
                    Features& f) {
    const Vocab& v = vocab();
    const int64_t N = int64_t(tk.tokens.size());
    const int unk_type = v.token_id("UNK");
    const int nonpolymer = v.chain_type_id("NONPOLYMER");
    std::vector<float> frames(size_t(N * 3), 0.f), frame_mask(size_t(N), 0.f);
    for (int64_t i = 0; i < N; ++i) {
        const Token& t = tk.tokens[size_t(i)];
        int64_t fa = 0, fb = 0, fc = 0;
        bool ok = false;
        const auto pos = [&](const char* n) {
            const auto& names = v.ref_atoms.at(t.res_name);
            return int64_t(std::find(names.begin(), names.end(), n) - names.begin());
        };
        const ChainMeta& cm = meta.chains[size_t(t.chain)];
        if (t.mol_type == nonpolymer && cm.atom_count >= 3) {
            nonpolymer_frame(t, cm, aff, tk, &frames[size_t(i * 3)], frame_mask[size_t(i)]);
            continue;
        }
        // A modified nucleotide's frame atoms are looked up by name among its own atoms (the
        // first atom when absent).
        const auto own = [&](const char* n) {
            for (int64_t k = 0; k < t.atom_count; ++k)
                if (tk.atom_names[size_t(t.atom_begin + k)] == n) return k;
            return int64_t(0);
        };
        if (t.atom_count < 3 || t.res_type == unk_type || t.res_name == "PAD" ||
            t.res_name == "-") {
        } else if (t.modified) {
            fa = own("C1'"), fb = own("C3'"), fc = own("C4'"), ok = true;
        } else if (t.mol_type == v.chain_type_id("PROTEIN")) {
            fa = pos("N"), fb = pos("CA"), fc = pos("C"), ok = true;
        } else {
            fa = pos("C1'"), fb = pos("C3'"), fc = pos("C4'"), ok = true;
        }
        frames[size_t(i * 3 + 0)] = float(t.atom_begin + fa);
        frames[size_t(i * 3 + 1)] = float(t.atom_begin + fb);
        frames[size_t(i * 3 + 2)] = float(t.atom_begin + fc);
        // boltz then ANDs a collinearity test on the structure's coordinates, which are all
        // zero at inference: zero-length vectors fail it, so no frame counts as resolved.
        const bool collinear_ok =
            aff && not_collinear(*aff, tk, t.atom_begin + fa, t.atom_begin + fb, t.atom_begin + fc);
        frame_mask[size_t(i)] = (ok && collinear_ok) ? 1.f : 0.f;
    }
    f.set("frames_idx", make(frames, {1, N, 3}));
    f.set("frame_resolved_mask", make(frame_mask, {1, N}));
}

// process_ensemble_features: inference featurises the one (input) conformer.
void process_ensemble_features(Features& f) {
    f.set("ensemble_ref_idxs", Tensor::zeros({1}));
}

// ---- MSA features (process_msa_features: construct_paired_msa + prepare_msa_arrays) -----------

// Each chain's MSA. Only the chains with tokens take part in the pairing (a crop can leave some
// out): the others get none.
std::vector<ChainMsa> chain_msas(const bio::Target& target, const Tokenized& tk) {
    const int C = int(target.chains.size());
    std::vector<ChainMsa> msas;
    std::vector<bool> present(size_t(C), false);
    for (const Token& t : tk.tokens) present[size_t(t.chain)] = true;
    for (int c = 0; c < C; ++c) {
        msas.push_back(present[size_t(c)]
                           ? chain_msa(target.chains[size_t(c)], tk.chain_res_types[size_t(c)])
                           : ChainMsa());
    }
    return msas;
}

// Taxonomy groups (key, their (chain, row) items) in first-appearance order, those with more
// than one sequence, sorted (stably) by how many chains they cover, most first.
std::vector<std::pair<int64_t, std::vector<std::pair<int, int>>>> taxonomy_groups(
    const std::vector<ChainMsa>& msas) {
    const int C = int(msas.size());
    std::vector<std::pair<int64_t, std::vector<std::pair<int, int>>>> tax;
    for (int c = 0; c < C; ++c)
        for (size_t s = 0; s < msas[size_t(c)].rows.size(); ++s) {
            const int64_t key = msas[size_t(c)].taxonomy[s];
            if (key == -1) continue;
            auto it =
                std::find_if(tax.begin(), tax.end(), [&](const auto& g) { return g.first == key; });
            if (it == tax.end())
                tax.push_back({key, {{c, int(s)}}});
            else
                it->second.push_back({c, int(s)});
        }
    tax.erase(
        std::remove_if(tax.begin(), tax.end(), [](const auto& g) { return g.second.size() <= 1; }),
        tax.end());
    auto n_chains = [](const std::vector<std::pair<int, int>>& items) {
        std::vector<int> cs;
        for (const auto& [c, s] : items)
            if (std::find(cs.begin(), cs.end(), c) == cs.end()) cs.push_back(c);
        return cs.size();
    };
    std::stable_sort(tax.begin(), tax.end(), [&](const auto& a, const auto& b) {
        return n_chains(a.second) > n_chains(b.second);
    });
    return tax;
}

// The joint MSA's rows: per row each chain's sequence index (-1: gaps) and whether it is paired.
struct PairedMsa {
    std::vector<std::vector<int>> pairing, paired;
};

// construct_paired_msa: the query row, one row per taxonomy group's occurrence (the chains without
// one take their next available row), then the unpaired rows, to at most max_msa_seqs rows.
PairedMsa construct_paired_msa(const std::vector<ChainMsa>& msas) {
    const Vocab& v = vocab();
    const int C = int(msas.size());
    const auto tax = taxonomy_groups(msas);
    // boltz means to hold paired sequences back from the unpaired rows, but its `visited`
    // set is built from the wrong tuple and never matches: every row but the query stays
    // available (so paired rows also appear unpaired; boltz issue #581).
    std::vector<std::deque<int>> available(static_cast<size_t>(C));
    for (int c = 0; c < C; ++c)
        for (size_t s = 1; s < msas[size_t(c)].rows.size(); ++s)
            available[size_t(c)].push_back(int(s));

    PairedMsa pm;
    std::vector<std::vector<int>>& pairing = pm.pairing;
    std::vector<std::vector<int>>& paired = pm.paired;
    pairing.push_back(std::vector<int>(size_t(C), 0));
    paired.push_back(std::vector<int>(size_t(C), 1));
    const size_t max_pairs = size_t(v.max_paired_seqs), max_total = size_t(v.max_msa_seqs);
    for (const auto& [key, items] : tax) {
        std::vector<std::pair<int, std::vector<int>>> occ;  // chain -> seq idxs, first seen
        for (const auto& [c, s] : items) {
            const int chain = c;  // a lambda may not capture a structured binding (clang 14)
            auto it = std::find_if(occ.begin(), occ.end(),
                                   [&](const auto& o) { return o.first == chain; });
            if (it == occ.end())
                occ.push_back({c, {s}});
            else
                it->second.push_back(s);
        }
        size_t max_occ = 0;
        for (const auto& o : occ) max_occ = std::max(max_occ, o.second.size());
        for (size_t i = 0; i < max_occ; ++i) {
            std::vector<int> row(size_t(C), -1), rp(size_t(C), 0);
            std::vector<bool> present(size_t(C), false);
            for (const auto& [c, idxs] : occ) {
                row[size_t(c)] = idxs[i % idxs.size()];
                rp[size_t(c)] = 1;
                present[size_t(c)] = true;
            }
            for (int c = 0; c < C; ++c) {
                if (present[size_t(c)]) continue;
                auto& av = available[size_t(c)];
                if (!av.empty()) {
                    row[size_t(c)] = av.front();
                    av.pop_front();
                }
            }
            pairing.push_back(row);
            paired.push_back(rp);
            if (pairing.size() >= max_pairs) break;
        }
        if (pairing.size() >= max_pairs) break;
    }
    size_t max_left = 0;
    for (const auto& av : available) max_left = std::max(max_left, av.size());
    const int64_t n_unpaired =
        std::min<int64_t>(int64_t(max_total) - int64_t(pairing.size()), int64_t(max_left));
    for (int64_t u = 0; u < n_unpaired; ++u) {
        std::vector<int> row(size_t(C), -1);
        for (int c = 0; c < C; ++c) {
            auto& av = available[size_t(c)];
            if (!av.empty()) {
                row[size_t(c)] = av.front();
                av.pop_front();
            }
        }
        pairing.push_back(row);
        paired.push_back(std::vector<int>(size_t(C), 0));
        if (pairing.size() >= max_total) break;
    }
    // Deterministic truncation to max_seqs (const.max_msa_seqs at inference).
    if (pairing.size() > max_total) {
        pairing.resize(max_total);
        paired.resize(max_total);
    }
    return pm;
}

// Deletions keyed by (chain, row, residue), with boltz's quirk: the loop narrows the deletion
// table to each row's own slice in turn (chain_deletions = chain_deletions[del_start:del_end]),
// so after the first row it slices an already narrowed table. With a query row without
// insertions every later row finds nothing.
std::map<std::tuple<int, int, int>, int> msa_deletions(const std::vector<ChainMsa>& msas) {
    const int C = int(msas.size());
    std::map<std::tuple<int, int, int>, int> dels;
    for (int c = 0; c < C; ++c) {
        const ChainMsa& m = msas[size_t(c)];
        std::vector<std::tuple<int, int>> cur = m.deletions;
        for (size_t s = 0; s < m.rows.size(); ++s) {
            const size_t b = std::min(m.del_range[s].first, cur.size());
            const size_t e = std::min(m.del_range[s].second, cur.size());
            cur = e > b ? std::vector<std::tuple<int, int>>(cur.begin() + int64_t(b),
                                                            cur.begin() + int64_t(e))
                        : std::vector<std::tuple<int, int>>{};
            for (const auto& [res, count] : cur) dels[{c, int(s), res}] = count;
        }
    }
    return dels;
}

// process_msa_features on the joint MSA: prepare_msa_arrays' per-token rows (msa, msa_paired,
// deletions), the profile and deletion mean; the affinity stage adds its own profile.
void process_msa_features(const bio::Target& target, const Tokenized& tk, bool affinity,
                          Features& f) {
    const Vocab& v = vocab();
    const int num_classes = int(v.tokens.size());  // 33
    const int64_t N = int64_t(tk.tokens.size());
    const std::vector<ChainMsa> msas = chain_msas(target, tk);
    const PairedMsa pm = construct_paired_msa(msas);
    const std::map<std::tuple<int, int, int>, int> dels = msa_deletions(msas);

    const int64_t S = int64_t(pm.pairing.size());
    const int gap = v.token_id("-");
    std::vector<float> msa(size_t(S * N)), msa_paired(size_t(S * N)), del(size_t(S * N), 0.f),
        has_del(size_t(S * N)), del_value(size_t(S * N)), profile(size_t(N * num_classes), 0.f),
        del_mean(size_t(N), 0.f);
    for (int64_t i = 0; i < N; ++i) {
        const Token& t = tk.tokens[size_t(i)];
        const ChainMsa& m = msas[size_t(t.chain)];
        for (int64_t p = 0; p < S; ++p) {
            const int s = pm.pairing[size_t(p)][size_t(t.chain)];
            int res = gap, d = 0;
            if (s != -1) {
                res = m.rows[size_t(s)].at(size_t(t.res_idx));
                auto it = dels.find({t.chain, s, t.res_idx});
                if (it != dels.end()) d = it->second;
            }
            const size_t k = size_t(p * N + i);
            msa[k] = float(res);
            msa_paired[k] = float(pm.paired[size_t(p)][size_t(t.chain)]);
            has_del[k] = d > 0 ? 1.f : 0.f;
            // pi/2 * arctan(d / 3), in fp32 as boltz computes it on a float tensor
            del_value[k] = float(M_PI / 2) * std::atan(float(d) / 3.f);
            profile[size_t(i * num_classes + res)] += 1.f;
            del_mean[size_t(i)] += del_value[k];
        }
        for (int r = 0; r < num_classes; ++r) profile[size_t(i * num_classes + r)] /= float(S);
        del_mean[size_t(i)] /= float(S);
    }
    f.set("msa", make(msa, {S, N}));
    f.set("msa_paired", make(msa_paired, {S, N}));
    f.set("deletion_value", make(del_value, {S, N}));
    f.set("has_deletion", make(has_del, {S, N}));
    f.set("deletion_mean", make(del_mean, {N}));
    f.set("profile", make(profile, {N, num_classes}));
    f.set("msa_mask", make(std::vector<float>(size_t(S * N), 1.f), {S, N}));
    if (affinity) {
        // process_msa_features(max_seqs=1, affinity=True): the pairing's first row alone
        // (each chain's query), so the profile is its one-hot and the deletion mean its
        // deletion values.
        std::vector<float> profile0(static_cast<size_t>(N * num_classes), 0.f),
            del0(static_cast<size_t>(N), 0.f);
        for (int64_t i = 0; i < N; ++i) {
            profile0[size_t(i * num_classes + int64_t(msa[size_t(i)]))] = 1.f;
            del0[size_t(i)] = del_value[size_t(i)];
        }
        f.set("profile_affinity", make(profile0, {N, num_classes}));
        f.set("deletion_mean_affinity", make(del0, {N}));
    }
}

// ---- templates (process_template_features) ---------------------------------------------------

// load_dummy_templates_features (tdim 1): one template of gaps, masked out.
void load_dummy_templates_features(int64_t N, Features& f) {
    const int num_classes = int(vocab().tokens.size());  // 33
    std::vector<float> restype(size_t(N * num_classes), 0.f);
    for (int64_t i = 0; i < N; ++i) restype[size_t(i * num_classes)] = 1.f;  // one_hot(0)
    f.set("template_restype", make(restype, {1, N, num_classes}));
    f.set("template_frame_rot", Tensor::zeros({1, N, 3, 3}));
    f.set("template_frame_t", Tensor::zeros({1, N, 3}));
    f.set("template_cb", Tensor::zeros({1, N, 3}));
    f.set("template_ca", Tensor::zeros({1, N, 3}));
    f.set("template_mask_cb", Tensor::zeros({1, N}));
    f.set("template_mask_frame", Tensor::zeros({1, N}));
    f.set("template_mask", Tensor::zeros({1, N}));
    f.set("query_to_template", Tensor::zeros({1, N}));
    f.set("visibility_ids", Tensor::zeros({1, N}));
}

// The input's templates' features (none in the affinity stage), or the dummy set when they
// give none.
void process_template_features(const bio::Target& target, const FeaturizeOptions& opt,
                               const ConformerLibrary& lib, const StructureMeta& meta, int64_t N,
                               Features& f) {
    if (!target.templates.empty() && !opt.affinity) {
        std::vector<TemplateStructure> structures;
        structures.reserve(target.templates.size());
        std::map<std::string, const TemplateStructure*> by_name;  // the last file of a name
        std::vector<TemplateRecord> records;
        for (const bio::Template& e : target.templates) {
            structures.push_back(read_template(e, lib, opt.mols_dir));
            by_name[e.name] = &structures.back();
            for (TemplateRecord& r : template_records(e, target, structures.back()))
                records.push_back(std::move(r));
        }
        TemplateQuery q;
        q.chains.resize(meta.chains.size());
        for (const ChainMeta& c : meta.chains) q.chains[size_t(c.asym_id)] = c.id;
        for (const TokenMeta& t : meta.tokens) {
            q.token_chain.push_back(meta.chains[size_t(t.chain)].id);
            q.token_res_idx.push_back(t.res_idx);
        }
        if (!records.empty()) set_template_features(records, by_name, q, f);
    }
    if (!f.has("template_mask")) load_dummy_templates_features(N, f);
}

}  // namespace

AugmentationSource seeded_augmentation(uint64_t seed) {
    auto rng = std::make_shared<std::mt19937_64>(seed);
    return [rng](int64_t) {
        std::normal_distribution<double> normal(0.0, 1.0);
        double q[4];
        for (double& x : q) x = normal(*rng);
        const double norm =
            std::copysign(std::sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]), q[0]);
        RigidTransform t;
        t.rot = quaternion_to_matrix(q[0] / norm, q[1] / norm, q[2] / norm, q[3] / norm);
        for (float& x : t.trans) x = float(normal(*rng));
        return t;
    };
}

Featurized featurize(const bio::Target& target_in, const FeaturizeOptions& opt) {
    const Vocab& v = vocab();
    const ConformerLibrary& lib = opt.conformers ? *opt.conformers : ConformerLibrary::builtin();
    BI_CHECK(opt.atoms_per_window > 0, kWhere, "atoms_per_window must be positive, got ",
             opt.atoms_per_window);
    std::string method = opt.affinity ? std::string("other") : opt.method;
    for (char& ch : method) ch = char(std::tolower((unsigned char)ch));  // boltz's .lower()
    auto method_it = v.method_types.find(method);
    BI_CHECK(method_it != v.method_types.end(), kWhere, "unknown method '", opt.method, "'");

    bio::Target target = target_in;
    BI_CHECK(!target.chains.empty(), kWhere, target.source, ": no chains");
    bool need_msas = false;
    for (const auto& c : target.chains) need_msas |= c.msa_kind == bio::MsaKind::File && !c.msa;
    if (need_msas) io::load_boltz_msas(target, opt.max_msa_seqs);

    LigandMols ligand_mols{target, opt, lib, {}};
    Featurized out;
    StructureMeta& meta = out.meta;
    // Tokens and atoms of every residue (each drawing its conformer).
    Tokenized tk = tokenize(target, opt, lib, ligand_mols, nullptr, meta);
    // The affinity stage: boltz's AffinityCropper on the predicted coordinates picks the tokens,
    // whole residues always, and the target is built again from those residues.
    const AffinityInputs* aff = opt.affinity;
    int binder_chain = -1;
    if (aff) {
        binder_chain = affinity_binder_chain(target, *aff);
        size_t kept = 0;
        const std::vector<char> keep = affinity_crop_residues(target, *aff, binder_chain, tk, kept);
        tk = tokenize(target, opt, lib, ligand_mols, &keep, meta);
        BI_CHECK(tk.tokens.size() == kept, kWhere, "the affinity crop split a residue");
    }
    const int64_t N = int64_t(tk.tokens.size());

    // The input's bond, pocket and contact constraints on those tokens and atoms.
    ConstraintTables ct;
    const RefResolver refs{target, tk.res_atoms, tk.atom_names, meta.atoms};
    add_bond_constraints(refs, tk.bonds, ct);
    add_pocket_constraints(refs, tk.tokens, meta, ct);
    add_contact_constraints(refs, tk.tokens, ct);
    const int64_t A = tk.num_atoms;
    const int64_t W = opt.atoms_per_window;
    const int64_t Ap = ((A - 1) / W + 1) * W;  // padded to a multiple of the query window
    meta.num_atoms_padded = Ap;

    Features& f = out.feats;
    process_token_features(target, tk, ct, aff, binder_chain, method_it->second, meta, f);
    process_contact_feature_constraints(ct, f);
    // The physical potentials' constraints; boltz's affinity stage reads none.
    if (!aff) {
        process_residue_constraint_features(tk.constraints, f);
        process_chain_feature_constraints(target, ct, f);
    }
    // process_atom_features: the conformers' random motions (the augmentation's draws), the atom
    // features, the token-atom maps and the frames.
    center_random_augmentation(opt, tk.atom_uid, tk.atom_pos);
    process_atom_features(tk, meta, Ap, f);
    set_token_atom_maps(tk.tokens, Ap, f);
    compute_frames(tk, meta, aff, f);
    process_ensemble_features(f);
    process_msa_features(target, tk, aff != nullptr, f);
    process_template_features(target, opt, lib, meta, N, f);
    for (auto& [res, m] : ligand_mols.mols) out.ligands.add(std::move(m));
    return out;
}

}  // namespace bioinfer::boltz2
