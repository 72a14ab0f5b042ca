// SMILES ligands through RDKit, in the order of boltz's schema parser (parse_boltz_schema's ligand
// branch and compute_3d_conformer).
#include "models/boltz2/ligands.h"

#include <GraphMol/AtomIterators.h>
#include <GraphMol/DistGeomHelpers/Embedder.h>
#include <GraphMol/ForceFieldHelpers/UFF/UFF.h>
#include <GraphMol/GraphMol.h>
#include <GraphMol/MolOps.h>
#include <GraphMol/PeriodicTable.h>
#include <GraphMol/SmilesParse/SmilesParse.h>
#include <GraphMol/new_canon.h>
#include <RDGeneral/RDLog.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "bioinfer/error.h"
#include "io/rdkit_pickle.h"
#include "io/torch_checkpoint.h"
#include "models/boltz2/rdkit_util.h"

namespace bioinfer::boltz2 {
namespace {

std::string upper(std::string s) {
    for (char& c : s) c = char(std::toupper((unsigned char)c));
    return s;
}

// RDKit's sanitised molecule of a SMILES with at least one atom, or an error naming `where`.
std::unique_ptr<RDKit::RWMol> parse_ligand(const std::string& smiles, const std::string& where) {
    std::unique_ptr<RDKit::RWMol> mol = parse_smiles(smiles, where);
    BI_CHECK(mol->getNumAtoms() > 0, where, "SMILES '", smiles, "' has no atoms");
    return mol;
}

}  // namespace

int64_t smiles_heavy_atoms(const std::string& smiles, const std::string& where) {
    const auto mol = parse_ligand(smiles, where);
    int64_t n = 0;
    for (const RDKit::Atom* a : mol->atoms()) n += a->getAtomicNum() != 1 ? 1 : 0;
    return n;
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
    return read_boltz_mol(path, code);
}

ResidueMol ligand_from_smiles(const std::string& smiles, const std::string& res_name,
                              const std::string& where, int seed) {
    std::unique_ptr<RDKit::RWMol> mol = parse_ligand(smiles, where);
    RdkitLogCapture logs;  // RDKit's warnings while embedding stay off stderr

    // Hydrogens are appended after the heavy atoms, which keep their SMILES indices.
    RDKit::MolOps::addHs(*mol);
    std::vector<unsigned int> ranks;
    RDKit::Canon::rankMolAtoms(*mol, ranks, /*breakTies=*/true, /*includeChirality=*/true,
                               /*includeIsotopes=*/true);
    RDKit::MolOps::assignStereochemistry(*mol, /*cleanIt=*/true, /*force=*/true);
    std::vector<std::string> names(mol->getNumAtoms());
    for (const RDKit::Atom* a : mol->atoms()) {
        const unsigned i = a->getIdx();
        names[i] = upper(a->getSymbol()) + std::to_string(ranks[i] + 1);
        BI_CHECK(names[i].size() <= 4, where, "SMILES '", smiles,
                 "' has an atom whose name would be longer than 4 characters: ", names[i],
                 " (boltz names atoms by element and rank, so molecules over 999 atoms with "
                 "hydrogens cannot be named)");
    }

    // compute_3d_conformer: ETKDGv3, then random starting coordinates, then UFF.
    RDKit::DGeomHelpers::EmbedParameters params = RDKit::DGeomHelpers::ETKDGv3;
    params.clearConfs = false;
    params.randomSeed = seed;
    int conf_id = -1;
    try {
        conf_id = RDKit::DGeomHelpers::EmbedMolecule(*mol, params);
        if (conf_id == -1) {
            params.useRandomCoords = true;
            conf_id = RDKit::DGeomHelpers::EmbedMolecule(*mol, params);
        }
        if (conf_id != -1)
            RDKit::UFF::UFFOptimizeMolecule(*mol, /*maxIters=*/1000, /*vdwThresh=*/10.0, conf_id);
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
    return m;
}

}  // namespace bioinfer::boltz2
