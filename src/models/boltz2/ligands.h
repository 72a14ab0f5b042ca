// Ligand molecules for Boltz-2, made as boltz 2.2.1's input parser makes them: SMILES through
// RDKit (hydrogens added, atoms named by canonical rank, an ETKDGv3 conformer cleaned up with UFF),
// CCD codes read from boltz's molecule cache (mols/<CODE>.pkl).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "models/boltz2/conformers.h"

namespace bioinfer::boltz2 {

// A SMILES ligand as the residue `res_name` (boltz names them LIG1, LIG2, ... per SMILES entity):
//  - RDKit parses and sanitises the SMILES and adds hydrogens;
//  - every atom is named by its element (upper case) and its canonical rank + 1 over the molecule
//    with hydrogens (aspirin: C21, C14, O10, ...), after which stereochemistry is assigned;
//  - one ETKDGv3 conformer, retried from random coordinates when embedding fails, then up to
//    1000 UFF iterations (a failing UFF keeps the embedded coordinates);
//  - the heavy atoms in SMILES order with that conformer, their bonds in RDKit's order.
// boltz embeds with RDKit's process-wide generator, so its conformer depends on the molecules
// embedded before it in the same process; here every ligand is embedded with `seed`, so a ligand
// gets the same conformer whatever else the run holds. Errors name `where` (the input and chain):
// RDKit's own message for a SMILES it cannot parse or sanitise, an atom name over 4 characters,
// a molecule that cannot be embedded.
// The conformer has a time budget, io::input_limits().conformer_seconds, checked before each
// embedding attempt (past it, an error naming `where`; RDKit cannot stop inside an attempt, and
// one from random coordinates on a 200-atom chain takes a minute); while it runs,
// ConformerProgress reports its attempts.
ResidueMol ligand_from_smiles(const std::string& smiles, const std::string& res_name,
                              const std::string& where, int seed = 42);

// While alive, ligand_from_smiles on this thread reports its conformer search to `report` (about
// once a second: "ligand conformer: attempt 120, 14 s of 300 s").
class ConformerProgress {
public:
    explicit ConformerProgress(std::function<void(const std::string&)> report);
    ~ConformerProgress();
    ConformerProgress(const ConformerProgress&) = delete;
    ConformerProgress& operator=(const ConformerProgress&) = delete;

private:
    std::function<void(const std::string&)> report_;
    const std::function<void(const std::string&)>* previous_;
};

// Heavy atoms of a SMILES ligand (its tokens), from RDKit's parse alone; errors as above.
int64_t smiles_heavy_atoms(const std::string& smiles, const std::string& where);
// The names ligand_from_smiles gives the ligand's heavy atoms, in its order, without a conformer.
std::vector<std::string> smiles_atom_names(const std::string& smiles, const std::string& where);

// The binder's molecular weight boltz's affinity correction reads (RDKit's average atomic
// weights): a SMILES ligand's heavy atoms, the molecule ligand_from_smiles made (boltz weighs it
// with its hydrogens removed unsanitised, which counts none); a CCD component's every atom as its
// cached molecule holds them.
double molecular_weight(const ResidueMol& mol);
double ccd_molecular_weight(const std::string& code, const std::string& mols_dir,
                            const std::string& where);

}  // namespace bioinfer::boltz2
namespace RDKit {
class ROMol;
}
namespace bioinfer::boltz2 {

// boltz's constraints of a molecule with its hydrogens (schema.py compute_geometry_constraints,
// compute_chiral_atom_constraints, compute_stereo_bond_constraints, compute_flatness_constraints)
// over the atoms idx_map keeps (its value: the atom's index among the kept ones; -1: dropped).
// Chirality and stereo need every atom's _CIPRank (boltz's SMILES path assigns them).
// RDKit releases differ in their distance bounds: Debian's 2022.09 and the reference's 2026.09
// disagree by up to 0.16 A on the test ligands; the other constraints agree.
ResidueConstraints residue_constraints(RDKit::ROMol& mol, const std::vector<int>& idx_map);

// A molecule of boltz's cache (a CCD component) or of its processed SMILES ligands, as
// read_boltz_mol reads it, with the constraints boltz's parse_ccd_residue computes on it (none for
// a single heavy atom); errors name the file.
ResidueMol read_ligand_mol(const std::string& path, const std::string& res);

// A CCD component as boltz finds it: in `canonical` (boltz's canonical residues) first, else in
// boltz's molecule folder (<mols_dir>/<code>.pkl). An unknown code names itself and the file
// looked for; an empty mols_dir says the cache is needed.
ResidueMol ccd_molecule(const std::string& code, const ConformerLibrary& canonical,
                        const std::string& mols_dir, const std::string& where);

}  // namespace bioinfer::boltz2
