"""Boltz-2 output fixtures: what `boltz predict` writes for a prediction, made by the boltz
package's own writer (BoltzWriter, to_mmcif, to_pdb) from fixed numbers, so the C++ writer can be
compared with it byte for byte.

    .venv-reference/bin/python tools/reference/make_boltz2_output_fixtures.py [--out tests/fixtures/boltz2_tiny/outputs]

For each case (a YAML input processed by boltz's own pipeline, with the canonical residue molecules
of tests/fixtures/boltz2_tiny/mols) it makes a prediction of 2 samples with seeded random numbers
(coordinates, per-token pLDDT in 0-1, PAE, PDE, the confidence scalars and the chain-pair ipTM) and
writes into --out/<case>/:
  input.json             the structure's chains, residues, atoms and bonds as the writer sees
                         them, and the prediction's numbers (float32 values, exactly)
  mmcif/predictions/...  BoltzWriter(output_format="mmcif"), with boltz2=True
  pdb/predictions/...    BoltzWriter(output_format="pdb")
The npz files the writer makes (plddt_/pae_/pde_) are compressed with a timestamp inside, so they
are not kept; input.json holds their contents.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import boltz2_tiny as bt  # noqa: E402

CASES = {
    # the 2-chain case of the parity fixtures: a protein and an RNA with an unknown base (N)
    "protein_rna": bt.CASES["protein_rna"][0],
    # a ligand between polymers: HETATM records, one token per ligand atom, CONECT records
    "protein_lig_rna": """version: 1
sequences:
  - protein:
      id: A
      sequence: MKVL
      msa: empty
  - ligand:
      id: L
      smiles: 'OC(=O)CCl'
  - rna:
      id: R
      sequence: GCA
""",
    # two copies of one protein (one entity, a sequence wrapped over lines in the mmCIF), DNA with
    # an unknown base, a one-residue protein chain (a non-polymer entity to ihm) and two copies
    # of a ligand
    "multimer_dna": """version: 1
sequences:
  - protein:
      id: [A, B]
      sequence: MKTAYIAKQRQISFVKSHFSRQ
      msa: empty
  - dna:
      id: C
      sequence: ACGTNA
  - protein:
      id: D
      sequence: W
      msa: empty
  - ligand:
      id: [E, F]
      smiles: 'CC(N)=O'
""",
}
NUM_SAMPLES = 2
PAD_ATOMS = 3  # the batch pads atoms; the writer drops them with the pad mask


def process(case: str, yaml_text: str, work: Path, mol_dir: Path):
    from boltz.data.types import Manifest, StructureV2
    from boltz.main import process_inputs

    inp = work / "input"
    inp.mkdir(parents=True)
    (inp / f"{case}.yaml").write_text(yaml_text)
    cwd = os.getcwd()
    os.chdir(inp)
    try:
        process_inputs(data=[inp / f"{case}.yaml"], out_dir=work / "root", ccd_path=mol_dir.parent / "ccd.pkl",
                       mol_dir=mol_dir, msa_server_url="", msa_pairing_strategy="greedy", boltz2=True)
    finally:
        os.chdir(cwd)
    processed = work / "root" / "processed"
    manifest = Manifest.load(processed / "manifest.json")
    record = manifest.records[0]
    structure = StructureV2.load(processed / "structures" / f"{record.id}.npz")
    return processed / "structures", record, structure


def prediction(structure, seed: int) -> dict:
    """Random numbers shaped as Boltz2.predict_step returns them (batch of one, 2 samples)."""
    from boltz.data import const

    s = structure.remove_invalid_chains()
    n_atoms = len(s.atoms)
    n_tokens = 0
    for chain in s.chains:
        if chain["mol_type"] == const.chain_type_ids["NONPOLYMER"]:
            n_tokens += int(chain["atom_num"])
        else:
            n_tokens += int(chain["res_num"])
    g = torch.Generator().manual_seed(seed)
    S = NUM_SAMPLES
    coords = torch.randn(S, n_atoms + PAD_ATOMS, 3, generator=g) * 12.0
    masks = torch.ones(1, n_atoms + PAD_ATOMS)
    masks[0, n_atoms:] = 0
    pred = {
        "exception": False,
        "coords": coords,
        "masks": masks,
        "plddt": torch.rand(S, n_tokens, generator=g),
        "pae": torch.rand(S, n_tokens, n_tokens, generator=g) * 31.75,
        "pde": torch.rand(S, n_tokens, n_tokens, generator=g) * 31.75,
    }
    for key in ["ptm", "iptm", "ligand_iptm", "protein_iptm", "complex_plddt", "complex_iplddt"]:
        pred[key] = torch.rand(S, generator=g)
    for key in ["complex_pde", "complex_ipde"]:
        pred[key] = torch.rand(S, generator=g) * 20
    # one exact tie-free ranking with sample 1 first (the writer ranks by confidence_score)
    pred["complex_plddt"][1] = pred["complex_plddt"][0] + 0.125
    pred["confidence_score"] = (4 * pred["complex_plddt"] + pred["iptm"]) / 5
    n_chains = len(s.chains)
    pred["pair_chains_iptm"] = {
        i: {j: torch.rand(S, generator=g) for j in range(n_chains)} for i in range(n_chains)
    }
    return pred


def to_list(t: torch.Tensor):
    return t.detach().float().numpy().astype(np.float32).tolist()


def describe(structure, record, pred) -> dict:
    """The writer's view of the structure (after remove_invalid_chains) and the numbers."""
    s = structure.remove_invalid_chains()
    chains = [{"name": str(c["name"]), "mol_type": int(c["mol_type"]), "entity_id": int(c["entity_id"]),
               "res_idx": int(c["res_idx"]), "res_num": int(c["res_num"])} for c in s.chains]
    residues = [{"name": str(r["name"]), "res_idx": int(r["res_idx"]), "atom_idx": int(r["atom_idx"]),
                 "atom_num": int(r["atom_num"])} for r in s.residues]
    atoms = [str(a["name"]) for a in s.atoms]
    bonds = [[int(b["atom_1"]), int(b["atom_2"])] for b in s.bonds]
    if hasattr(s, "connections"):
        bonds += [[int(b["atom_1"]), int(b["atom_2"])] for b in s.connections]
    n_atoms = len(atoms)
    samples = []
    for k in range(NUM_SAMPLES):
        smp = {"coords": to_list(pred["coords"][k, :n_atoms]), "plddt": to_list(pred["plddt"][k]),
               "pae": to_list(pred["pae"][k]), "pde": to_list(pred["pde"][k])}
        for key in ["confidence_score", "ptm", "iptm", "ligand_iptm", "protein_iptm", "complex_plddt",
                    "complex_iplddt", "complex_pde", "complex_ipde"]:
            smp[key] = pred[key][k].item()
        smp["pair_chains_iptm"] = [[pred["pair_chains_iptm"][i][j][k].item()
                                    for j in pred["pair_chains_iptm"][i]] for i in pred["pair_chains_iptm"]]
        samples.append(smp)
    return {"name": record.id, "chains": chains, "residues": residues, "atoms": atoms, "bonds": bonds,
            "samples": samples}


def main() -> None:
    from boltz.data.write.writer import BoltzWriter

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(HERE.parent.parent / "tests/fixtures/boltz2_tiny/outputs"))
    ap.add_argument("--mols", default=str(HERE.parent.parent / "tests/fixtures/boltz2_tiny/mols"))
    args = ap.parse_args()
    out = Path(args.out)
    for seed, (case, yaml_text) in enumerate(CASES.items()):
        with tempfile.TemporaryDirectory() as td:
            struct_dir, record, structure = process(case, yaml_text, Path(td), Path(args.mols))
            pred = prediction(structure, seed=100 + seed)
            case_out = out / case
            if case_out.exists():
                shutil.rmtree(case_out)
            case_out.mkdir(parents=True)
            for fmt, sub in (("mmcif", "mmcif"), ("pdb", "pdb")):
                w = BoltzWriter(data_dir=str(struct_dir), output_dir=str(case_out / sub / "predictions"),
                                output_format=fmt, boltz2=True)
                w.write_on_batch_end(None, None, pred, None, {"record": [record]}, 0, 0)
                for npz in (case_out / sub).rglob("*.npz"):
                    data = np.load(npz)
                    key = npz.name.split("_")[0]
                    assert list(data.keys()) == [key] and data[key].dtype == np.float32, npz
                    npz.unlink()
            (case_out / "input.json").write_text(json.dumps(describe(structure, record, pred)))
            print(case, sorted(str(p.relative_to(case_out)) for p in case_out.rglob("*") if p.is_file()))


if __name__ == "__main__":
    main()
