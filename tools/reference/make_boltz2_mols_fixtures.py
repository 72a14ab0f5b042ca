#!/usr/bin/env python3
"""Writes tests/fixtures/boltz2_mols/: what the C++ reader of boltz's molecule cache and its
conformer choice are tested against.

- numpy_choice.json: np.random.default_rng(seed).choice(list) draws (boltz's per-residue
  conformer pick) for several seeds and list lengths, plus the first raw PCG64 outputs.
- multi/<RES>.pkl: boltz's canonical residues with hydrogens and several conformers each (ids not
  0..n-1), pickled as boltz's cache is (pickle.dump of an RDKit Mol, all properties), and
  multi.json: each molecule's heavy atoms (name, atomic number, formal charge, chirality tag name)
  and every conformer (id, heavy-atom coordinates) as RDKit reads them back.
- multi_choice.json: for the protein_rna case, the conformer id boltz's featurizer picks for each
  residue in token order (np.random.default_rng(42), Generator.choice over the conformer ids).
- big.pkl / big.json: a molecule of more than 255 atoms (RDKit then writes 4-byte atom indices).

    .venv-reference/bin/python tools/reference/make_boltz2_mols_fixtures.py
"""
from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = ROOT / "tests/fixtures/boltz2_mols"
sys.path.insert(0, str(HERE))


def describe(mol) -> dict:
    heavy = [a for a in mol.GetAtoms() if a.GetAtomicNum() != 1]
    return {
        "atoms": [{"name": a.GetProp("name"), "element": a.GetAtomicNum(),
                   "charge": a.GetFormalCharge(), "chirality": a.GetChiralTag().name}
                  for a in heavy],
        "conformers": [{"id": int(c.GetId()),
                        "xyz": [[float(c.GetAtomPosition(a.GetIdx()).x),
                                 float(c.GetAtomPosition(a.GetIdx()).y),
                                 float(c.GetAtomPosition(a.GetIdx()).z)] for a in heavy]}
                       for c in mol.GetConformers()],
    }


def main() -> None:
    import numpy as np
    from rdkit import Chem
    from rdkit.Chem import AllChem

    import boltz2_tiny as bt
    from boltz.data import const

    Chem.SetDefaultPickleProperties(Chem.PropertyPickleOptions.AllProps)
    OUT.mkdir(parents=True, exist_ok=True)

    # numpy's Generator.choice on lists of several lengths, several seeds (one generator per seed,
    # lengths drawn in order, as the featurizer draws residue after residue).
    lengths = [1, 2, 3, 5, 1, 7, 10, 2, 100, 4, 1, 65536, 3, 1000003, 6]
    seeds = [0, 1, 7, 42, 12345, 2**32 + 7, 2**63 + 5]
    choice = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        draws = [int(rng.choice(list(range(n)))) for n in lengths]
        raw = [str(int(x)) for x in np.random.default_rng(seed).bit_generator.random_raw(4)]
        choice.append({"seed": str(seed), "lengths": lengths, "draws": draws, "raw_uint64": raw})
    (OUT / "numpy_choice.json").write_text(json.dumps(choice, indent=1) + "\n")

    # Canonical residues with hydrogens kept and 2-4 conformers with scattered ids.
    multi_dir = OUT / "multi"
    multi_dir.mkdir(exist_ok=True)
    described = {}
    for i, res in enumerate(bt.CANONICAL_RESIDUES):
        mol = Chem.AddHs(bt.canonical_residue(res))
        for a in mol.GetAtoms():
            if a.GetAtomicNum() == 1:
                a.SetProp("name", f"H{a.GetIdx()}")
        params = AllChem.ETKDGv3()
        params.randomSeed = 100 + i
        n = 2 + i % 3
        cids = list(AllChem.EmbedMultipleConfs(mol, n, params))
        assert len(cids) == n, res
        for k, c in enumerate(mol.GetConformers()):
            c.SetId(3 * k + i % 2)
            c.SetProp("name", "Computed")
        with open(multi_dir / f"{res}.pkl", "wb") as f:
            pickle.dump(mol, f)
        with open(multi_dir / f"{res}.pkl", "rb") as f:
            described[res] = describe(pickle.load(f))  # noqa: S301 (written just above)
    (OUT / "multi.json").write_text(json.dumps(described) + "\n")

    # The conformer boltz's featurizer picks per residue of the protein_rna case (its polymer
    # chains as boltz2_tiny.CASES writes them), in token order, from default_rng(42).
    import yaml
    letters = {"protein": const.prot_letter_to_token, "rna": const.rna_letter_to_token,
               "dna": const.dna_letter_to_token}
    residues = []
    for entry in yaml.safe_load(bt.CASES["protein_rna"][0])["sequences"]:
        (kind, chain), = entry.items()
        residues += [letters[kind][c] for c in chain["sequence"]]
    rng = np.random.default_rng(42)
    picks = [int(rng.choice([c["id"] for c in described[r]["conformers"]])) for r in residues]
    (OUT / "multi_choice.json").write_text(
        json.dumps({"case": "protein_rna", "residues": residues, "conformer_ids": picks}) + "\n")

    # More than 255 atoms: 4-byte atom indices in RDKit's format.
    big = Chem.AddHs(Chem.MolFromSequence("ACDEFGHIKLMNPQRSTVWY" * 2))
    for a in big.GetAtoms():
        a.SetProp("name", a.GetMonomerInfo().GetName().strip() if a.GetMonomerInfo()
                  else f"X{a.GetIdx()}")
    conf = Chem.Conformer(big.GetNumAtoms())  # arbitrary coordinates: only the format matters
    for i in range(big.GetNumAtoms()):
        conf.SetAtomPosition(i, (0.1 * i, 1.5 * (i % 7) - 3.25, 0.01 * i * i))
    conf.SetId(11)
    big.AddConformer(conf)
    assert big.GetNumAtoms() > 255
    with open(OUT / "big.pkl", "wb") as f:
        pickle.dump(big, f)
    with open(OUT / "big.pkl", "rb") as f:
        (OUT / "big.json").write_text(json.dumps(describe(pickle.load(f))) + "\n")  # noqa: S301
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
