// SMILES ligands through RDKit, in the order of boltz's schema parser (parse_boltz_schema's ligand
// branch and compute_3d_conformer).
#include "models/boltz2/ligands.h"

#include <GraphMol/AtomIterators.h>
#include <DistGeom/BoundsMatrix.h>
#include <DistGeom/TriangleSmooth.h>
#include <GraphMol/DistGeomHelpers/BoundsMatrixBuilder.h>
#include <GraphMol/DistGeomHelpers/Embedder.h>
#include <GraphMol/ForceFieldHelpers/UFF/UFF.h>
#include <GraphMol/GraphMol.h>
#include <GraphMol/MolOps.h>
#include <GraphMol/PeriodicTable.h>
#include <GraphMol/SmilesParse/SmilesParse.h>
#include <GraphMol/Substruct/SubstructMatch.h>
#include <GraphMol/new_canon.h>
#include <RDGeneral/RDLog.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>

#include "bioinfer/error.h"
#include "io/limits.h"
#include "io/rdkit_pickle.h"
#include "io/torch_checkpoint.h"
#include "io/untrusted.h"
#include "models/boltz2/rdkit_util.h"

namespace bioinfer::boltz2 {
namespace {

std::string upper(std::string s) {
    for (char& c : s) c = char(std::toupper((unsigned char)c));
    return s;
}

int64_t smiles_heavy_atoms_of(const RDKit::ROMol& mol) {
    int64_t n = 0;
    for (const RDKit::Atom* a : mol.atoms()) n += a->getAtomicNum() != 1 ? 1 : 0;
    return n;
}

// boltz's atom names of a molecule with its hydrogens: element (upper case) and canonical rank + 1.
std::vector<std::string> boltz_atom_names(const RDKit::ROMol& mol, const std::string& smiles,
                                          const std::string& where) {
    std::vector<unsigned int> ranks;
    RDKit::Canon::rankMolAtoms(mol, ranks, /*breakTies=*/true, /*includeChirality=*/true,
                               /*includeIsotopes=*/true);
    std::vector<std::string> names(mol.getNumAtoms());
    for (const RDKit::Atom* a : mol.atoms()) {
        const unsigned i = a->getIdx();
        names[i] = upper(a->getSymbol()) + std::to_string(ranks[i] + 1);
        BI_CHECK(names[i].size() <= 4, where, "SMILES '", smiles,
                 "' has an atom whose name would be longer than 4 characters: ", names[i],
                 " (boltz names atoms by element and rank, so molecules over 999 atoms with "
                 "hydrogens cannot be named)");
    }
    return names;
}

// RDKit's sanitised molecule of a SMILES with at least one atom, or an error naming `where`.
std::unique_ptr<RDKit::RWMol> parse_ligand(const std::string& smiles, const std::string& where) {
    std::unique_ptr<RDKit::RWMol> mol = parse_smiles(smiles, where);
    BI_CHECK(mol->getNumAtoms() > 0, where, "SMILES '", smiles, "' has no atoms");
    return mol;
}

// RDKit reports each embedding attempt through a plain function pointer: the budget and progress
// of the conformer this thread is computing.
struct ConformerWatch {
    using clock = std::chrono::steady_clock;
    clock::time_point start, deadline, last_report;
    double budget = 0;
    unsigned attempts = 0;
};
thread_local ConformerWatch* t_watch = nullptr;
thread_local const std::function<void(const std::string&)>* t_report = nullptr;
struct ConformerTimeout {};  // thrown from RDKit's callback, through the embedder, to us

void on_embed_attempt(unsigned int) {
    ConformerWatch* w = t_watch;
    if (!w) return;
    ++w->attempts;
    const auto now = ConformerWatch::clock::now();
    if (now > w->deadline) throw ConformerTimeout{};
    if (t_report && now - w->last_report >= std::chrono::seconds(1)) {
        w->last_report = now;
        (*t_report)(cat("ligand conformer: attempt ", w->attempts, ", ",
                        int64_t(std::chrono::duration<double>(now - w->start).count()), " s of ",
                        w->budget, " s"));
    }
}

}  // namespace

ConformerProgress::ConformerProgress(std::function<void(const std::string&)> report)
    : report_(std::move(report)), previous_(t_report) {
    t_report = &report_;
}

ConformerProgress::~ConformerProgress() { t_report = previous_; }

int64_t smiles_heavy_atoms(const std::string& smiles, const std::string& where) {
    return smiles_heavy_atoms_of(*parse_ligand(smiles, where));
}

std::vector<std::string> smiles_atom_names(const std::string& smiles, const std::string& where) {
    std::unique_ptr<RDKit::RWMol> mol = parse_ligand(smiles, where);
    RdkitLogCapture logs;
    RDKit::MolOps::addHs(*mol);
    const std::vector<std::string> all = boltz_atom_names(*mol, smiles, where);
    std::vector<std::string> heavy;
    for (const RDKit::Atom* a : mol->atoms())
        if (a->getAtomicNum() != 1) heavy.push_back(all[a->getIdx()]);
    return heavy;
}

double molecular_weight(const ResidueMol& mol) {
    const RDKit::PeriodicTable* table = RDKit::PeriodicTable::getTable();
    double w = 0;
    for (const MolAtom& a : mol.atoms) w += table->getAtomicWeight(a.element);
    return w;
}

double ccd_molecular_weight(const std::string& code, const std::string& mols_dir,
                            const std::string& where) {
    BI_CHECK(!mols_dir.empty(), where, "CCD component ", code, " needs boltz's molecule cache");
    const std::string path = (std::filesystem::path(mols_dir) / (code + ".pkl")).string();
    BI_CHECK(std::filesystem::is_regular_file(path), where, "CCD component ", code,
             " not found: ", path, " does not exist");
    const io::RdkitMol rd = io::decode_rdkit_mol(io::read_rdkit_mol_pickle(path), path);
    const RDKit::PeriodicTable* table = RDKit::PeriodicTable::getTable();
    double w = 0;
    for (const io::RdkitAtom& a : rd.atoms) w += table->getAtomicWeight(a.atomic_num);
    return w;
}

ResidueMol ccd_molecule(const std::string& code, const ConformerLibrary& canonical,
                        const std::string& mols_dir, const std::string& where) {
    if (canonical.has(code)) {
        ResidueMol m = canonical.at(code);
        m.name = code;
        return m;
    }
    BI_CHECK(!mols_dir.empty(), where, "CCD component ", code, " needs boltz's molecule cache (mols/",
             code, ".pkl): give a model folder or boltz cache that holds mols/");
    const std::string path = (std::filesystem::path(mols_dir) / (code + ".pkl")).string();
    BI_CHECK(std::filesystem::is_regular_file(path), where, "CCD component ", code,
             " not found: ", path, " does not exist");
    return read_ligand_mol(path, code);
}

namespace {

// The pickled molecule rebuilt in RDKit as the pickle holds it, unsanitised: atoms with their
// aromaticity, hybridization and hydrogen counts, bonds with aromaticity, conjugation, direction
// and stereo, the atoms' properties (CIP ranks as unsigned integers, as RDKit keeps them).
std::unique_ptr<RDKit::RWMol> rdkit_molecule(const io::RdkitMol& rd, const std::string& path) {
    auto mol = std::make_unique<RDKit::RWMol>();
    for (const io::RdkitAtom& a : rd.atoms) {
        BI_CHECK(a.hybridization <= int(RDKit::Atom::OTHER), path, "RDKit molecule: hybridization ",
                 a.hybridization, " is not one this RDKit knows");
        RDKit::Atom atom(a.atomic_num);
        atom.setFormalCharge(a.formal_charge);
        atom.setChiralTag(a.chiral_tag <= int(RDKit::Atom::CHI_OCTAHEDRAL)
                              ? RDKit::Atom::ChiralType(a.chiral_tag)
                              : RDKit::Atom::CHI_OTHER);
        atom.setHybridization(RDKit::Atom::HybridizationType(a.hybridization));
        atom.setNumExplicitHs(unsigned(a.explicit_hs));
        atom.setNumRadicalElectrons(unsigned(a.radicals));
        atom.setIsotope(a.isotope);
        atom.setIsAromatic(a.aromatic);
        atom.setNoImplicit(a.no_implicit);
        for (const auto& [k, v] : a.props) {
            if (k == RDKit::common_properties::_CIPRank) {
                int64_t rank = 0;
                BI_CHECK(io::parse_decimal(v, 9, rank), path, "RDKit molecule: atom property ", k,
                         " is not a count: '", v, "'");
                atom.setProp<unsigned>(k, unsigned(rank), /*computed=*/true);
            } else {
                atom.setProp(k, v);
            }
        }
        mol->addAtom(&atom, /*updateLabel=*/false, /*takeOwnership=*/false);
    }
    for (const io::RdkitBond& b : rd.bonds) {
        const unsigned idx =
            mol->addBond(unsigned(b.begin), unsigned(b.end), RDKit::Bond::BondType(b.type)) - 1;
        RDKit::Bond* bond = mol->getBondWithIdx(idx);
        bond->setIsAromatic(b.aromatic);
        bond->setIsConjugated(b.conjugated);
        bond->setBondDir(RDKit::Bond::BondDir(b.dir));
        // Stereo RDKit 2022.09 lacks (atropisomers) constrains no E/Z bond: left unset
        // (stored as RDKit's unpickler stores them, unchecked)
        if (b.stereo <= int(RDKit::Bond::STEREOTRANS)) {
            bond->getStereoAtoms().assign(b.stereo_atoms.begin(), b.stereo_atoms.end());
            bond->setStereo(RDKit::Bond::BondStereo(b.stereo));
        }
    }
    return mol;
}

}  // namespace

ResidueMol read_ligand_mol(const std::string& path, const std::string& res) {
    ResidueMol m = read_boltz_mol(path, res);
    // parse_ccd_residue: a molecule of one heavy atom has no constraints; others are computed on
    // the molecule with its hydrogens, over its heavy atoms
    if (m.atoms.size() < 2) return m;
    const io::RdkitMol rd = io::decode_rdkit_mol(io::read_rdkit_mol_pickle(path), path);
    std::unique_ptr<RDKit::RWMol> mol = rdkit_molecule(rd, path);
    std::vector<int> heavy(rd.atoms.size(), -1);
    int k = 0;
    for (size_t i = 0; i < rd.atoms.size(); ++i)
        if (rd.atoms[i].atomic_num != 1) heavy[i] = k++;
    RdkitLogCapture logs;
    try {
        m.constraints = residue_constraints(*mol, heavy);
    } catch (const std::exception& e) {
        fail(path,
             cat("RDKit could not compute the geometric constraints of ", res, ": ", e.what()));
    }
    return m;
}

namespace {

std::vector<RDKit::MatchVectType> smarts_matches(const RDKit::ROMol& mol, const std::string& smarts) {
    std::unique_ptr<RDKit::RWMol> q(RDKit::SmartsToMol(smarts));
    std::vector<RDKit::MatchVectType> matches;
    RDKit::SubstructMatch(mol, *q, matches);  // uniquify, at most 1000 matches, as RDKit's Python
    return matches;
}

}  // namespace

ResidueConstraints residue_constraints(RDKit::ROMol& mol, const std::vector<int>& idx_map) {
    ResidueConstraints c;
    const unsigned n = mol.getNumAtoms();
    const auto in = [&](unsigned i) { return idx_map[i] >= 0; };
    // compute_geometry_constraints: RDKit's bounds (1-5 bounds, scaled vdW, triangle smoothed)
    // for heavy-atom pairs, flagged as bonds ("*~*") and angles ("*~*~*" ends)
    if (n > 1) {
        mol.updatePropertyCache(false);
        RDKit::MolOps::symmetrizeSSSR(mol);
        DistGeom::BoundsMatPtr mat(new DistGeom::BoundsMatrix(n));
        RDKit::DGeomHelpers::initBoundsMat(mat);
        RDKit::DGeomHelpers::setTopolBounds(mol, mat, /*set15bounds=*/true, /*scaleVDW=*/true,
                                            /*useMacrocycle14config=*/false);
        DistGeom::triangleSmoothBounds(mat);
        std::set<std::pair<int, int>> bonds, angles;
        for (const auto& m : smarts_matches(mol, "*~*"))
            bonds.insert(std::minmax(m[0].second, m[1].second));
        for (const auto& m : smarts_matches(mol, "*~*~*"))
            angles.insert(std::minmax(m[0].second, m[2].second));
        for (unsigned i = 0; i < n; ++i)
            for (unsigned j = i + 1; j < n; ++j) {
                if (!in(i) || !in(j)) continue;
                const auto key = std::make_pair(static_cast<int>(i), static_cast<int>(j));
                c.bounds.push_back({idx_map[i], idx_map[j], bonds.count(key) > 0,
                                    angles.count(key) > 0, float(mat->getUpperBound(i, j)),
                                    float(mat->getLowerBound(i, j))});
            }
    }
    bool ranked = true;
    for (const RDKit::Atom* a : mol.atoms()) ranked &= a->hasProp(RDKit::common_properties::_CIPRank);
    // neighbours other than `skip`, by CIP rank, highest first (a stable sort, as Python's)
    const auto by_rank = [&](const RDKit::Atom* a, int skip) {
        std::vector<std::pair<int, unsigned>> nb;
        for (const RDKit::Atom* x : mol.atomNeighbors(a))
            if (int(x->getIdx()) != skip)
                nb.emplace_back(int(x->getIdx()),
                                x->getProp<unsigned>(RDKit::common_properties::_CIPRank));
        std::stable_sort(nb.begin(), nb.end(),
                         [](const auto& x, const auto& y) { return x.second > y.second; });
        std::vector<int> out;
        for (const auto& [i, r] : nb) out.push_back(i);
        return out;
    };
    if (ranked) {
        // compute_chiral_atom_constraints (FindMolChiralCenters: assigned centres, legacy CIP)
        RDKit::MolOps::assignStereochemistry(mol, /*cleanIt=*/false, /*force=*/true);
        for (const RDKit::Atom* centre : mol.atoms()) {
            std::string code;
            if (!centre->getPropIfPresent(RDKit::common_properties::_CIPCode, code)) continue;
            const std::vector<int> nb = by_rank(centre, -1);
            const bool is_r = code == "R";
            if (nb.size() > 4 || centre->getHybridization() != RDKit::Atom::SP3) continue;
            const int ci = int(centre->getIdx());
            const auto add = [&](std::array<int, 4> atoms, bool reference) {
                for (int i : atoms)
                    if (idx_map[size_t(i)] < 0) return;
                for (int& i : atoms) i = idx_map[size_t(i)];
                c.chiral.push_back({atoms, reference, is_r});
            };
            if (nb.size() >= 3) add({nb[0], nb[1], nb[2], ci}, true);
            if (nb.size() == 4)
                for (int skip = 0; skip < 3; ++skip) {
                    std::vector<int> set;
                    for (int k = 0; k < 4; ++k)
                        if (k != skip) set.push_back(nb[size_t(k)]);
                    if (skip % 2 == 0) std::reverse(set.begin(), set.end());
                    add({set[0], set[1], set[2], ci}, false);
                }
        }
        // compute_stereo_bond_constraints
        for (const RDKit::Bond* b : mol.bonds()) {
            const auto st = b->getStereo();
            if (st != RDKit::Bond::STEREOE && st != RDKit::Bond::STEREOZ) continue;
            const int s0 = int(b->getBeginAtomIdx()), e0 = int(b->getEndAtomIdx());
            const std::vector<int> sn = by_rank(b->getBeginAtom(), e0), en = by_rank(b->getEndAtom(), s0);
            const bool is_e = st == RDKit::Bond::STEREOE;
            const auto add = [&](std::array<int, 4> atoms, bool check) {
                for (int i : atoms)
                    if (idx_map[size_t(i)] < 0) return;
                for (int& i : atoms) i = idx_map[size_t(i)];
                c.stereo.push_back({atoms, check, is_e});
            };
            if (!sn.empty() && !en.empty()) add({sn[0], s0, e0, en[0]}, true);
            if (sn.size() == 2 && en.size() == 2) add({sn[1], s0, e0, en[1]}, false);
        }
    }
    // compute_flatness_constraints
    const auto mapped = [&](const RDKit::MatchVectType& m, auto& out) {
        typename std::decay_t<decltype(out)>::value_type atoms{};
        for (size_t k = 0; k < m.size(); ++k) {
            if (idx_map[size_t(m[k].second)] < 0) return;
            atoms[k] = idx_map[size_t(m[k].second)];
        }
        out.push_back(atoms);
    };
    for (const auto& m : smarts_matches(mol, "[C;X3;^2](*)(*)=[C;X3;^2](*)(*)")) mapped(m, c.planar_bonds);
    for (const auto& m : smarts_matches(mol, "[ar5^2]1[ar5^2][ar5^2][ar5^2][ar5^2]1")) mapped(m, c.rings5);
    for (const auto& m : smarts_matches(mol, "[ar6^2]1[ar6^2][ar6^2][ar6^2][ar6^2][ar6^2]1"))
        mapped(m, c.rings6);
    return c;
}

ResidueMol ligand_from_smiles(const std::string& smiles, const std::string& res_name,
                              const std::string& where, int seed) {
    std::unique_ptr<RDKit::RWMol> mol = parse_ligand(smiles, where);
    RdkitLogCapture logs;  // RDKit's warnings while embedding stay off stderr

    // Hydrogens are appended after the heavy atoms, which keep their SMILES indices.
    RDKit::MolOps::addHs(*mol);
    const std::vector<std::string> names = boltz_atom_names(*mol, smiles, where);
    RDKit::MolOps::assignStereochemistry(*mol, /*cleanIt=*/true, /*force=*/true);

    // compute_3d_conformer: ETKDGv3, then random starting coordinates, then UFF.
    RDKit::DGeomHelpers::EmbedParameters params = RDKit::DGeomHelpers::ETKDGv3;
    params.clearConfs = false;
    params.randomSeed = seed;
    // A time budget: ETKDG retries up to 10 x atoms times, which on a long flexible chain takes
    // minutes; each attempt checks the clock (and reports progress) through the callback.
    ConformerWatch watch;
    watch.start = watch.last_report = ConformerWatch::clock::now();
    watch.budget = io::input_limits().conformer_seconds;
    watch.deadline = watch.start + std::chrono::duration_cast<ConformerWatch::clock::duration>(
                                       std::chrono::duration<double>(watch.budget));
    params.callback = on_embed_attempt;
    struct WatchScope {
        ConformerWatch* previous = t_watch;
        explicit WatchScope(ConformerWatch* w) { t_watch = w; }
        ~WatchScope() { t_watch = previous; }
    } watch_scope(&watch);
    int conf_id = -1;
    try {
        conf_id = RDKit::DGeomHelpers::EmbedMolecule(*mol, params);
        if (conf_id == -1) {
            // one attempt from random coordinates can take minutes on a long flexible ligand, and
            // RDKit checks nothing inside an attempt: say so while it runs
            if (t_report)
                (*t_report)(cat("ligand conformer: from random coordinates after ", watch.attempts,
                                " attempts"));
            params.useRandomCoords = true;
            conf_id = RDKit::DGeomHelpers::EmbedMolecule(*mol, params);
        }
        if (conf_id != -1)
            RDKit::UFF::UFFOptimizeMolecule(*mol, /*maxIters=*/1000, /*vdwThresh=*/10.0, conf_id);
    } catch (const ConformerTimeout&) {
        fail(where, cat("RDKit found no 3D conformer for the ", smiles_heavy_atoms_of(*mol),
                        "-heavy-atom SMILES ligand within ", watch.budget, " s (", watch.attempts,
                        " attempt(s); --conformer-timeout raises the limit)"));
    } catch (const std::exception&) {
        // As boltz: a failing force field keeps the embedded coordinates.
    }
    BI_CHECK(conf_id != -1, where, "RDKit could not compute a 3D conformer for SMILES '", smiles,
             "' (ETKDGv3, also from random coordinates)");

    // The molecule boltz keeps: hydrogens removed without sanitising (chiral tags stay as they
    // are), the conformer's heavy-atom coordinates.
    RDKit::RWMol heavy(*mol);
    for (const RDKit::Atom* a : mol->atoms()) heavy.getAtomWithIdx(a->getIdx())->setProp(
        "name", names[a->getIdx()]);
    RDKit::MolOps::removeHs(heavy, /*implicitOnly=*/false, /*updateExplicitCount=*/false,
                            /*sanitize=*/false);
    const RDKit::Conformer& conf = heavy.getConformer(conf_id);
    std::map<std::string, const RDKit::Atom*> by_name;  // boltz's featurizer matches by name
    for (const RDKit::Atom* a : heavy.atoms()) by_name[a->getProp<std::string>("name")] = a;

    // parse_ccd_residue: the atoms other than hydrogen in the molecule's order, and the bonds
    // between them in its bond order.
    ResidueMol m;
    m.name = res_name;
    m.conformer_ids.push_back(0);
    m.conformers.emplace_back();
    std::vector<int> kept(mol->getNumAtoms(), -1);
    for (const RDKit::Atom* h : mol->atoms()) {
        if (h->getAtomicNum() == 1) continue;
        auto it = by_name.find(names[h->getIdx()]);
        BI_CHECK(it != by_name.end(), where, "SMILES '", smiles, "': atom ", names[h->getIdx()],
                 " was lost removing hydrogens");
        const RDKit::Atom* a = it->second;
        MolAtom ma;
        ma.name = names[h->getIdx()];
        ma.element = int(a->getAtomicNum());
        ma.symbol = a->getSymbol();
        ma.charge = a->getFormalCharge();
        ma.chirality = boltz_chirality(int(a->getChiralTag()));
        kept[h->getIdx()] = int(m.atoms.size());
        m.atoms.push_back(std::move(ma));
        const RDGeom::Point3D& p = conf.getAtomPos(a->getIdx());
        m.conformers.back().push_back({p.x, p.y, p.z});
    }
    for (const RDKit::Bond* b : mol->bonds()) {
        const int x = kept[b->getBeginAtomIdx()], y = kept[b->getEndAtomIdx()];
        if (x < 0 || y < 0) continue;
        m.bonds.push_back({std::min(x, y), std::max(x, y), boltz_bond_type(int(b->getBondType()))});
    }
    m.constraints = residue_constraints(*mol, kept);
    return m;
}

}  // namespace bioinfer::boltz2
