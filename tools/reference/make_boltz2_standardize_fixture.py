"""Boltz-2 affinity binder standardisation fixture: boltz's own `standardize` (schema.py, the ChEMBL
structure pipeline's clean-up boltz runs on an affinity binder's SMILES) on a set of SMILES.

    .venv-reference/bin/python tools/reference/make_boltz2_standardize_fixture.py [--out tests/fixtures/boltz2_tiny]

Writes standardize.tsv: a header line, then one line per case: the input SMILES, a tab, and
boltz's output SMILES, or the literal ERROR where boltz's standardize raises (an excluded
molecule, a SMILES RDKit cannot parse, a step RDKit refuses). And standardize_salts.tsv, the same
for SALTS: boltz's steps with the molecule's property cache updated before the largest fragment is
chosen (see SALTS).
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from rdkit import RDLogger

from boltz.data.parse.schema import standardize

CASES = [
    # neutral drugs written non-canonically: aspirin, ibuprofen, caffeine, paracetamol
    "OC(=O)c1ccccc1OC(C)=O",
    "CC(C)Cc1ccc(cc1)C(C)C(O)=O",
    "Cn1cnc2c1c(=O)n(C)c(=O)n2C",
    "O=C(C)Nc1ccc(O)cc1",
    # charges to neutralise: carboxylate, ammonium, both (zwitterion), a quaternary ammonium
    # (kept charged) with its carboxylate, a phenolate
    "CC(=O)[O-]",
    "[NH3+]CCc1ccccc1",
    "[NH3+][C@@H](C)C([O-])=O",
    "C[N+](C)(C)CC([O-])=O",
    "[O-]c1ccccc1",
    # salts and mixtures: the largest fragment. Only salts written with bracket atoms alone are
    # here. With the reference's RDKit (2026.09), LargestFragmentChooser.choose (chooseInPlace)
    # counts each fragment's hydrogens with Atom::getTotalNumHs, which on boltz's unsanitised
    # molecule fails for an organic-subset atom (its implicit hydrogens were never computed:
    # "Pre-condition Violation: getNumImplicitHs() called without preceding call to
    # calcImplicitValence()"), so boltz's standardize raises for "CC(=O)[O-].[Na+]",
    # "Cl.CCN(CC)CC", "O.O.OC(=O)c1ccccc1", "OC(=O)CC[NH3+].[Cl-]", "CC[O-].[Na+]". Debian's RDKit
    # 2022.09 choose() does not fail there (it writes each fragment's SMILES first, which computes
    # the valences), and bioinfer returns CC(=O)O, CCN(CC)CC, O=C(O)c1ccccc1, NCCC(=O)O, CCO: what
    # the reference's own pipeline gives for them once the molecule's property cache is updated
    # (UpdatePropertyCache(strict=False)) before choose. An RDKit-version difference, so these
    # stay out of this list (SALTS below writes the reference's answers for them apart).
    "[NH4+].[Cl-]",
    "[Na+].[Br-]",
    # alkali alkoxide: the bond is broken into ions (normalize_mol), the ions stay
    "CO[Na]",
    # normalisations: nitro written N(=O)=O, sulfoxides uncharged and charge-separated, an azide
    # written both ways, a pyridine N-oxide, a halide alone
    "c1ccccc1N(=O)=O",
    "CS(C)=O",
    "C[S+](C)[O-]",
    "CCN=[N+]=[N-]",
    "CC[N-][N+]#N",
    "[O-][n+]1ccccc1",
    "[Cl-]",
    # explicit hydrogens: kept on a stereocentre, removed otherwise
    "[H][C@@](C)(N)C(=O)O",
    "[H]OC(=O)CC",
    "[H]C(Cl)(Br)F",
    # stereo: tetrahedral and double bonds
    "C[C@H](N)C(=O)O",
    "N[C@@H](Cc1ccccc1)C(=O)O",
    "C/C=C/C(=O)O",
    "F/C=C\\Cl",
    # tartaric acid: its two stereocentres are flattened
    "OC(=O)[C@H](O)[C@@H](O)C(O)=O",
    "OC(=O)[C@@H](O)[C@@H](O)C(O)=O",
    # a boronic acid (one boron: kept)
    "OB(O)c1ccccc1",
    # excluded: a metal complex, 8 borons
    "Cl[Pt](Cl)(N)N",
    "BBBBBBBB",
    # refused by RDKit: kekulisation, an unclosed ring
    "c1cccc1",
    "C1CC",
]


# The salts boltz's standardize raises on with the reference's RDKit (see CASES): the reference
# pipeline's answer once the unsanitised molecule's property cache is updated before
# LargestFragmentChooser, what Debian's RDKit 2022.09 computes on its own.
SALTS = ["CC(=O)[O-].[Na+]", "Cl.CCN(CC)CC", "O.O.OC(=O)c1ccccc1", "OC(=O)CC[NH3+].[Cl-]",
         "CC[O-].[Na+]"]


def standardize_with_valences(smiles: str) -> str:
    """boltz's standardize (schema.py) step for step, with UpdatePropertyCache(strict=False) before
    the largest fragment is chosen."""
    from chembl_structure_pipeline.exclude_flag import exclude_flag
    from chembl_structure_pipeline.standardizer import standardize_mol
    from rdkit import Chem
    from rdkit.Chem.MolStandardize import rdMolStandardize

    mol = Chem.MolFromSmiles(smiles, sanitize=False)
    assert not exclude_flag(mol, includeRDKitSanitization=False), smiles
    mol.UpdatePropertyCache(strict=False)
    mol = rdMolStandardize.LargestFragmentChooser().choose(mol)
    out = Chem.MolToSmiles(standardize_mol(mol))
    assert Chem.MolFromSmiles(out) is not None, smiles
    return out


def write_tsv(path: Path, header: str, rows: list[tuple[str, str]]) -> None:
    path.write_text("\n".join([header] + [f"{a}\t{b}" for a, b in rows]) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tests/fixtures/boltz2_tiny")
    args = parser.parse_args()
    RDLogger.DisableLog("rdApp.*")
    rows = []
    for smiles in CASES:
        try:
            out = standardize(smiles)
        except Exception:  # noqa: BLE001 (boltz raises ValueError, RDKit's errors, AttributeError)
            out = "ERROR"
        rows.append((smiles, out))
    os.makedirs(args.out, exist_ok=True)
    path = Path(args.out) / "standardize.tsv"
    write_tsv(path, "smiles\tboltz_standardize", rows)
    print(f"wrote {path} ({len(CASES)} cases)")
    path = Path(args.out) / "standardize_salts.tsv"
    write_tsv(path, "smiles\tboltz_standardize_valences_updated",
              [(smiles, standardize_with_valences(smiles)) for smiles in SALTS])
    print(f"wrote {path} ({len(SALTS)} cases)")


if __name__ == "__main__":
    main()
