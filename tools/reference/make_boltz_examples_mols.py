"""The molecules boltz's examples (tests/fixtures/boltz_examples/examples, copied from boltz's
repository at 832486d with their MSAs; MIT, LICENSE beside them) use beyond the tiny fixture's
molecule cache (tests/fixtures/boltz2_tiny/mols): SAH (ligand.yaml, ligand.fasta) and EKY
(pocket.yaml), laid out as boltz's CCD cache holds molecules (boltz2_tiny.ccd_like_molecule):
hydrogens explicit, every atom with its CCD `name` and `leaving_atom` flag, stereo from the CCD's
ideal coordinates, one ETKDGv3 conformer named Computed. Read from biotite's copy of the CCD.

    .venv-reference/bin/python tools/reference/make_boltz_examples_mols.py
"""
from __future__ import annotations

import pickle
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE.parent.parent / "tests/fixtures/boltz_examples/mols"
CODES = ("SAH", "EKY")


def ccd_molecule(code: str, seed: int = 5):
    import biotite.structure.info as info
    from biotite.interface import rdkit as bir
    from rdkit import Chem
    from rdkit.Chem import AllChem

    atoms = info.residue(code)
    leaving = info.get_from_ccd("chem_comp_atom", code, "pdbx_leaving_atom_flag").as_array()
    mol = bir.to_mol(atoms)
    Chem.SanitizeMol(mol)
    Chem.AssignStereochemistryFrom3D(mol)
    for a, name, flag in zip(mol.GetAtoms(), atoms.atom_name, leaving):
        a.SetProp("name", str(name))
        a.SetProp("leaving_atom", "1" if str(flag).upper() == "Y" else "0")
    mol.RemoveAllConformers()
    params = AllChem.ETKDGv3()
    params.randomSeed = seed
    assert AllChem.EmbedMolecule(mol, params) == 0, f"ETKDG failed for {code}"
    mol.GetConformer(0).SetProp("name", "Computed")
    return mol


def main() -> None:
    from rdkit import Chem

    Chem.SetDefaultPickleProperties(Chem.PropertyPickleOptions.AllProps)
    OUT.mkdir(parents=True, exist_ok=True)
    for code in CODES:
        with open(OUT / f"{code}.pkl", "wb") as f:
            pickle.dump(ccd_molecule(code), f)


if __name__ == "__main__":
    main()
