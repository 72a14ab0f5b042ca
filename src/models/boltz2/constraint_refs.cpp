// Constraint references resolved by boltz's rules (see constraint_refs.h).
#include "models/boltz2/constraint_refs.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "bioinfer/error.h"
#include "io/untrusted.h"
#include "models/boltz2/ligands.h"
#include "models/boltz2/standardize.h"

namespace bioinfer::boltz2 {

int constraint_chain(const bio::Target& target, const bio::ConstraintRef& r) {
    for (size_t ci = 0; ci < target.chains.size(); ++ci)
        if (target.chains[ci].id == r.chain) return int(ci);
    fail(r.where, cat("constraint: the input has no chain '", r.chain, "'"));
}

int constraint_residue(const bio::Chain& c, const bio::ConstraintRef& r) {
    int64_t n = 0;
    if (!io::parse_decimal(r.residue, 9, n))
        fail(r.where, cat("constraint: residue '", r.residue, "' of chain ", c.id, " is not a number"));
    BI_CHECK(n >= 1 && n <= int64_t(c.residues.size()), r.where, "constraint: chain ", c.id,
             " has residues 1 to ", c.residues.size(), ", not ", n);
    return int(n - 1);
}

bool token_names_atom(const bio::Chain& c, const bio::ConstraintRef& r) {
    if (c.type == bio::MoleculeType::Ligand) {
        BI_CHECK(!r.atom.empty(), r.where, "constraint: chain ", c.id,
                 " is a ligand: name one of its atoms, not residue ", r.residue);
        return true;
    }
    BI_CHECK(r.atom.empty(), r.where, "constraint: chain ", c.id,
             " is a polymer: give a residue number, not '", r.atom, "'");
    return false;
}

void fail_missing_atom(const bio::Chain& c, int residue, const bio::ConstraintRef& r) {
    fail(r.where, cat("constraint: residue ", residue + 1, " (", c.residues[size_t(residue)],
                      ") of chain ", c.id, " has no atom '", r.atom, "'"));
}

void check_constraint_references(const bio::Target& target, const ConformerLibrary& canonical,
                                 const std::string& mols_dir) {
    const Vocab& v = vocab();
    // atom names per (chain, residue), looked up once
    std::map<std::pair<int, int>, std::vector<std::string>> names;
    const auto atom_names = [&](int ci, int res) -> const std::vector<std::string>& {
        auto it = names.find({ci, res});
        if (it != names.end()) return it->second;
        const bio::Chain& c = target.chains[size_t(ci)];
        const std::string& code = c.residues[size_t(res)];
        const std::string where = cat(c.where.empty() ? target.source : c.where, ": chain ", c.id);
        std::vector<std::string> out;
        const bool ligand = c.type == bio::MoleculeType::Ligand;
        if (ligand && !c.smiles.empty()) {
            // the featurizer builds the affinity binder from its standardised SMILES
            out = smiles_atom_names(
                c.id == target.affinity_binder ? standardize_smiles(c.smiles, where) : c.smiles,
                where);
        } else if (!ligand && v.ref_atoms.count(code)) {
            out = v.ref_atoms.at(code);
        } else {  // a CCD ligand, or a modified residue without its leaving atoms
            for (const MolAtom& a : ccd_molecule(code, canonical, mols_dir, where).atoms)
                if (ligand || !a.leaving) out.push_back(a.name);
        }
        return names.emplace(std::make_pair(ci, res), std::move(out)).first->second;
    };
    const auto check_atom = [&](int ci, int res, const bio::ConstraintRef& r) {
        const auto& n = atom_names(ci, res);
        if (std::find(n.begin(), n.end(), r.atom) == n.end())
            fail_missing_atom(target.chains[size_t(ci)], res, r);
    };
    // a pocket or contact token: a polymer's residue, or a ligand's atom (in its first residue)
    const auto check_token = [&](const bio::ConstraintRef& r) {
        const int ci = constraint_chain(target, r);
        const bio::Chain& c = target.chains[size_t(ci)];
        if (token_names_atom(c, r)) {
            bio::ConstraintRef first = r;
            first.residue = "1";
            check_atom(ci, constraint_residue(c, first), r);
        } else {
            constraint_residue(c, r);
        }
    };
    for (const bio::BondConstraint& b : target.bonds)
        for (const bio::ConstraintRef* r : {&b.atom1, &b.atom2}) {
            const int ci = constraint_chain(target, *r);
            check_atom(ci, constraint_residue(target.chains[size_t(ci)], *r), *r);
        }
    for (const bio::PocketConstraint& p : target.pockets) {
        bio::ConstraintRef binder;
        binder.chain = p.binder;
        binder.where = p.where;
        constraint_chain(target, binder);
        for (const bio::ConstraintRef& r : p.contacts) check_token(r);
    }
    for (const bio::ContactConstraint& k : target.contacts) {
        check_token(k.token1);
        check_token(k.token2);
    }
}

}  // namespace bioinfer::boltz2
