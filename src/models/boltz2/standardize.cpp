// boltz's `standardize` (boltz/data/parse/schema.py) and the parts of the ChEMBL structure pipeline
// 1.2 it calls (chembl_structure_pipeline/standardizer.py standardize_mol, exclude_flag.py), step
// for step, with RDKit's C++ API.
#include "models/boltz2/standardize.h"

#include <GraphMol/Conformer.h>
#include <GraphMol/GraphMol.h>
#include <GraphMol/MolOps.h>
#include <GraphMol/MolStandardize/Charge.h>
#include <GraphMol/MolStandardize/Fragment.h>
#include <GraphMol/MolStandardize/MolStandardize.h>
#include <GraphMol/MolStandardize/Normalize.h>
#include <GraphMol/MolTransforms/MolTransforms.h>
#include <GraphMol/PeriodicTable.h>
#include <GraphMol/SmilesParse/SmilesParse.h>
#include <GraphMol/SmilesParse/SmilesWrite.h>
#include <GraphMol/SubstanceGroup.h>
#include <GraphMol/Substruct/SubstructMatch.h>
#include <RDGeneral/RDLog.h>

#include <cctype>
#include <cmath>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <vector>

#include "bioinfer/error.h"
#include "models/boltz2/rdkit_util.h"

namespace bioinfer::boltz2 {
namespace {

// exclude_flag.py's METAL_LIST (Zn is left out on purpose there: ChEMBL has simple zinc salts).
const std::set<std::string>& metal_list() {
    static const std::set<std::string> metals = {
        "Sc", "Ti", "V",  "Cr", "Mn", "Fe", "Co", "Ni", "Cu", "Ga", "Y",  "Zr", "Nb", "Mo",
        "Tc", "Ru", "Rh", "Pd", "Cd", "In", "Sn", "La", "Hf", "Ta", "W",  "Re", "Os", "Ir",
        "Pt", "Au", "Hg", "Tl", "Pb", "Bi", "Po", "Ac", "Ce", "Pr", "Nd", "Pm", "Sm", "Eu",
        "Gd", "Tb", "Dy", "Ho", "Er", "Tm", "Yb", "Lu", "Th", "Pa", "U",  "Np", "Pu", "Am",
        "Cm", "Bk", "Cf", "Es", "Fm", "Md", "No", "Lr", "Ge", "Sb"};
    return metals;
}

// exclude_flag(mol, includeRDKitSanitization=False): a listed metal, or more than 7 borons.
bool exclude_flag(const RDKit::ROMol& mol) {
    bool metallic = false;
    int borons = 0;
    for (const RDKit::Atom* a : mol.atoms()) {
        const std::string symbol = a->getSymbol();
        if (metal_list().count(symbol)) metallic = true;
        if (symbol == "B") ++borons;
    }
    return metallic || borons > 7;
}

// standardizer.py's _normalization_transforms, verbatim (tab-separated name and SMIRKS; "//"
// lines are comments): MolVS's set with ChEMBL's additions.
constexpr const char* kNormalizationTransforms =
    "\n"
    "//\tName\tSMIRKS\n"
    "Nitro to N+(O-)=O\t[N;X3:1](=[O:2])=[O:3]>>[*+1:1]([*-1:2])=[*:3]\n"
    "Diazonium N\t[*:1]-[N;X2:2]#[N;X1:3]>>[*:1]-[*+1:2]#[*:3]\n"
    "Quaternary N\t[N;X4;v4;+0:1]>>[*+1:1]\n"
    "Trivalent O\t[*:1]=[O;X2;v3;+0:2]-[#6:3]>>[*:1]=[*+1:2]-[*:3]\n"
    "Sulfoxide to -S+(O-)\t[!O:1][S+0;D3:2](=[O:3])[!O:4]>>[*:1][S+1:2]([O-:3])[*:4]\n"
    "// this form addresses a pathological case that came up a few times in testing:\n"
    "Sulfoxide to -S+(O-) 2\t[!O:1][SH1+1;D3:2](=[O:3])[!O:4]>>[*:1][S+1:2]([O-:3])[*:4]\n"
    "Trivalent S\t[O:1]=[S;D2;+0:2]-[#6:3]>>[*:1]=[*+1:2]-[*:3]\n"
    "// Note that the next one doesn't work propertly because repeated appplications\n"
    "// don't carry the cations from the previous rounds through. This should be\n"
    "// fixed by implementing single-molecule transformations, but that's a longer-term\n"
    "// project\n"
    "//Alkaline oxide to ions\t[Li,Na,K;+0:1]-[O+0:2]>>([*+1:1].[O-:2])\n"
    "Bad amide tautomer1\t[C:1]([OH1;D1:2])=;!@[NH1:3]>>[C:1](=[OH0:2])-[NH2:3]\n"
    "Bad amide tautomer2\t[C:1]([OH1;D1:2])=;!@[NH0:3]>>[C:1](=[OH0:2])-[NH1:3]\n"
    "Halogen with no neighbors\t[F,Cl,Br,I;X0;+0:1]>>[*-1:1]\n"
    "Odd pyridine/pyridazine oxide structure\t[C,N;-;D2,D3:1]-[N+2;D3:2]-[O-;D1:3]>>"
    "[*-0:1]=[*+1:2]-[*-:3]\n"
    "Odd azide\t[*:1][N-:2][N+:3]#[N:4]>>[*:1][N+0:2]=[N+:3]=[N-:4]\n";

std::unique_ptr<RDKit::RWMol> smarts(const std::string& text) {
    std::unique_ptr<RDKit::RWMol> q(RDKit::SmartsToMol(text));
    if (!q) throw std::runtime_error("bad SMARTS " + text);
    return q;
}

// remove_hs_from_mol: RemoveHs, keeping the hydrogens RemoveHs keeps and those with a wedged bond,
// on a tetrahedral stereocentre, or on an atom (not simply protonated: charge +1 and valence one
// over its default) above its default valence or with three ring bonds. Kept ones carry isotope
// 100 through RemoveHs.
std::unique_ptr<RDKit::ROMol> remove_hs_from_mol(RDKit::RWMol& m) {
    RDKit::MolOps::fastFindRings(m);
    if (m.needsUpdatePropertyCache()) m.updatePropertyCache(false);
    constexpr unsigned kSentinel = 100;
    const RDKit::PeriodicTable* table = RDKit::PeriodicTable::getTable();
    for (RDKit::Atom* atom : m.atoms()) {
        if (atom->getAtomicNum() != 1 || atom->getDegree() != 1 || atom->getIsotope()) continue;
        const RDKit::Atom* nbr = *m.atomNeighbors(atom).begin();
        const RDKit::Bond* bnd = *m.atomBonds(atom).begin();
        bool preserve = false;
        unsigned stereo = 0;
        if (bnd->getBondDir() == RDKit::Bond::BEGINWEDGE ||
            bnd->getBondDir() == RDKit::Bond::BEGINDASH ||
            (bnd->getPropIfPresent(RDKit::common_properties::_MolFileBondStereo, stereo) &&
             (stereo == 1 || stereo == 6))) {
            preserve = true;
        } else {
            const int default_valence = table->getDefaultValence(nbr->getAtomicNum());
            const bool is_protonated =
                nbr->getFormalCharge() == 1 && nbr->getExplicitValence() == default_valence + 1;
            if (nbr->getChiralTag() == RDKit::Atom::CHI_TETRAHEDRAL_CCW ||
                nbr->getChiralTag() == RDKit::Atom::CHI_TETRAHEDRAL_CW) {
                preserve = true;
            } else if (!is_protonated) {
                if (nbr->getExplicitValence() > default_valence) {
                    preserve = true;
                } else {
                    int ring_bonds = 0;
                    for (const RDKit::Bond* b : m.atomBonds(nbr))
                        ring_bonds += m.getRingInfo()->numBondRings(b->getIdx()) ? 1 : 0;
                    if (ring_bonds >= 3) preserve = true;
                }
            }
        }
        if (preserve) atom->setIsotope(kSentinel);
    }
    std::unique_ptr<RDKit::ROMol> res(RDKit::MolOps::removeHs(static_cast<const RDKit::ROMol&>(m),
                                                              false, false, /*sanitize=*/false));
    for (RDKit::Atom* atom : res->atoms())
        if (atom->getAtomicNum() == 1 && atom->getIsotope() == kSentinel) atom->setIsotope(0);
    return res;
}

// normalize_mol: alkali alkoxides and amides split into ions, then the pipeline's normalizer
// (NormalizerFromData with default CleanupParameters).
std::unique_ptr<RDKit::ROMol> normalize_mol(const RDKit::ROMol& in) {
    RDKit::MolOps::fastFindRings(in);
    static const std::unique_ptr<RDKit::RWMol> alkoxide = smarts("[Li,Na,K;+0]-[#7,#8;+0]");
    RDKit::RWMol m(in);
    std::vector<RDKit::MatchVectType> matches;
    if (RDKit::SubstructMatch(m, *alkoxide, matches)) {
        for (const RDKit::MatchVectType& match : matches) {
            m.removeBond(match[0].second, match[1].second);
            m.getAtomWithIdx(match[0].second)->setFormalCharge(1);
            m.getAtomWithIdx(match[1].second)->setFormalCharge(-1);
        }
    }
    std::istringstream data(kNormalizationTransforms);
    RDKit::MolStandardize::Normalizer normalizer(
        data, RDKit::MolStandardize::defaultCleanupParameters.maxRestarts);
    return std::unique_ptr<RDKit::ROMol>(normalizer.normalize(m));
}

// flatten_tartrate_mol: free tartrate / tartaric acid fragments lose their two stereocentres.
void flatten_tartrate_mol(RDKit::RWMol& m) {
    static const std::unique_ptr<RDKit::ROMol> tartrate = [] {
        const auto pattern = smarts("OC(=O)C(O)C(O)C(=O)O");
        auto params = RDKit::MolOps::AdjustQueryParameters::noAdjustments();
        params.adjustDegree = true;
        params.adjustDegreeFlags = RDKit::MolOps::ADJUST_IGNORENONE;
        return std::unique_ptr<RDKit::ROMol>(RDKit::MolOps::adjustQueryProperties(
            static_cast<const RDKit::ROMol&>(*pattern), &params));
    }();
    std::vector<RDKit::MatchVectType> matches;
    RDKit::SubstructMatch(m, *tartrate, matches);
    for (const RDKit::MatchVectType& match : matches) {
        m.getAtomWithIdx(match[3].second)->setChiralTag(RDKit::Atom::CHI_UNSPECIFIED);
        m.getAtomWithIdx(match[5].second)->setChiralTag(RDKit::Atom::CHI_UNSPECIFIED);
    }
}

// _check_and_straighten_at_triple_bond: a degree-2 atom's angle made 180 degrees when more than
// about a degree off.
void straighten_at(const RDKit::ROMol& m, const RDKit::Atom* at, RDKit::Conformer& conf) {
    if (at->getDegree() != 2) throw std::runtime_error("only works with degree 2");
    std::vector<unsigned> nbrs;
    for (const RDKit::Atom* n : m.atomNeighbors(at)) nbrs.push_back(n->getIdx());
    const double angle = MolTransforms::getAngleRad(conf, nbrs[0], at->getIdx(), nbrs[1]);
    if (std::abs(std::abs(angle) - M_PI) > 0.017)
        MolTransforms::setAngleRad(conf, nbrs[0], at->getIdx(), nbrs[1], M_PI);
}

// cleanup_drawing_mol: nothing without a conformer (a SMILES has none unless CXSMILES gives
// coordinates); else a flat conformer's acyclic triple bonds and allenes are straightened.
void cleanup_drawing_mol(RDKit::RWMol& m) {
    if (!m.getNumConformers()) return;
    RDKit::Conformer& conf = m.getConformer();
    if (conf.is3D()) {
        for (unsigned i = 0; i < m.getNumAtoms(); ++i)
            if (std::abs(conf.getAtomPos(i).z) >= 0.0001)
                throw std::runtime_error("cleanup_drawing_mol() only works for 2D molecules");
        conf.set3D(false);
    }
    RDKit::MolOps::fastFindRings(m);
    for (const RDKit::Bond* bond : m.bonds()) {
        if (bond->getBondType() != RDKit::Bond::TRIPLE ||
            m.getRingInfo()->numBondRings(bond->getIdx()))
            continue;
        if (bond->getBeginAtom()->getDegree() == 2) straighten_at(m, bond->getBeginAtom(), conf);
        if (bond->getEndAtom()->getDegree() == 2) straighten_at(m, bond->getEndAtom(), conf);
    }
    const auto allene = smarts("*=[C;R0]=*");
    std::vector<RDKit::MatchVectType> matches;
    RDKit::SubstructMatch(m, *allene, matches);
    for (const RDKit::MatchVectType& match : matches) {
        const unsigned i = match[0].second, j = match[1].second, k = match[2].second;
        const double angle = MolTransforms::getAngleRad(conf, i, j, k);
        if (std::abs(std::abs(angle) - M_PI) > 0.017)
            MolTransforms::setAngleRad(conf, i, j, k, M_PI);
    }
}

// standardize_mol(m) with its defaults (check_exclusion, sanitize) on the chosen fragment.
std::unique_ptr<RDKit::RWMol> standardize_mol(const RDKit::ROMol& in) {
    auto m = std::make_unique<RDKit::RWMol>(in);  // update_mol_valences
    m->updatePropertyCache(false);
    RDKit::getSubstanceGroups(*m).clear();  // remove_sgroups_from_mol
    RDKit::MolOps::Kekulize(*m, /*markAtomsBonds (Python's clearAromaticFlags)=*/false);
    const auto no_hs = remove_hs_from_mol(*m);
    const auto normalized = normalize_mol(*no_hs);
    RDKit::MolStandardize::Uncharger uncharger(/*canonicalOrdering=*/true);
    auto res = std::make_unique<RDKit::RWMol>(
        *std::unique_ptr<RDKit::ROMol>(uncharger.uncharge(*normalized)));
    res->updatePropertyCache(false);
    flatten_tartrate_mol(*res);
    cleanup_drawing_mol(*res);
    RDKit::MolOps::sanitizeMol(*res);
    return res;
}

}  // namespace

std::string standardize_smiles(const std::string& smiles, const std::string& where) {
    RdkitLogCapture logs;  // the standardisation steps' RDKit messages stay off stderr
    // Chem.MolFromSmiles(smiles, sanitize=False): no sanitisation, explicit hydrogens kept.
    RDKit::SmilesParserParams params;
    params.sanitize = false;
    params.removeHs = false;
    const std::unique_ptr<RDKit::RWMol> mol = parse_smiles(smiles, where, params);
    BI_CHECK(!exclude_flag(*mol), where, "SMILES '", smiles,
             "' is excluded by the ChEMBL standardizer (metal or more than 7 borons)");
    std::string out;
    try {
        RDKit::MolStandardize::LargestFragmentChooser chooser;  // default parameters
        const std::unique_ptr<RDKit::ROMol> largest(chooser.choose(*mol));
        // standardize_mol checks the exclusion again: a fragment of a molecule that passed does
        // too.
        const auto standardized = standardize_mol(*largest);
        out = RDKit::MolToSmiles(*standardized);
    } catch (const std::exception& e) {  // RDKit's own: kekulisation, valence, precondition, ...
        fail(where, cat("RDKit could not standardize SMILES '", smiles, "': ", e.what()));
    }
    std::unique_ptr<RDKit::RWMol> check;
    try {
        check.reset(RDKit::SmilesToMol(out));
    } catch (const std::exception&) {
    }
    BI_CHECK(check != nullptr, where, "SMILES '", smiles,
             "': standardization broke the molecule ('", out, "' does not parse)");
    return out;
}

std::string canonical_smiles(const std::string& smiles, const std::string& where) {
    RDKit::SmilesParserParams params;
    params.removeHs = false;
    return RDKit::MolToSmiles(*parse_smiles(smiles, where, params));
}

}  // namespace bioinfer::boltz2
