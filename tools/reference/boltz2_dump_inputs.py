"""Boltz-2 fixture part `inputs`: the random per-residue motions boltz's featurizer applied to the
reference conformers (center_random_augmentation in process_atom_features), so the C++ featurizer
can be tested with them injected and every other number compared exactly.

  inputs.aug_rot    (U, 3, 3)  rotation R of residue uid u (x' = (x - mean) @ R + t)
  inputs.aug_trans  (U, 3)     translation t
  inputs.ref_pos_centred (A, 3) ref_pos before the motion (unpadded): each augmented residue's
                               conformer centred on its mean; the last residue's raw conformer

They are recovered by featurising the case again with the same seed while recording the
rotations boltz draws; the re-made ref_pos must equal the batch's bit for bit.

With the heterodimer case (once), boltz's features of the committed input
inputs/paired_msa/paired_msa.yaml (CSV MSAs with pairing keys, a query row with an insertion, a
query row that differs from the input at an X, and an RNA chain without MSA):

  inputs.paired_msa.<name>     msa, msa_paired, has_deletion, deletion_value, deletion_mean,
                               profile, msa_mask, res_type (batch dim dropped)
"""
from __future__ import annotations

import random
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import boltz2_tiny as bt  # noqa: E402


PAIRED_DIR = HERE.parent.parent / "tests/fixtures/boltz2_tiny/inputs/paired_msa"
PAIRED_FEATURES = ("msa", "msa_paired", "has_deletion", "deletion_value", "deletion_mean",
                   "profile", "msa_mask", "res_type")


def featurize_dir(src: Path, name: str, workdir: Path, mol_dir: Path) -> dict:
    """boltz's batch for src/<name>.yaml, as boltz2_tiny.featurize makes it for the cases."""
    import os
    import shutil

    from boltz.data.module.inferencev2 import Boltz2InferenceDataModule
    from boltz.data.types import Manifest
    from boltz.main import process_inputs

    inp = workdir / "input"
    shutil.copytree(src, inp)
    out_dir = workdir / "processed_root"
    cwd = os.getcwd()
    os.chdir(inp)
    try:
        process_inputs(data=[inp / f"{name}.yaml"], out_dir=out_dir, ccd_path=mol_dir.parent / "ccd.pkl",
                       mol_dir=mol_dir, msa_server_url="", msa_pairing_strategy="greedy",
                       boltz2=True)
    finally:
        os.chdir(cwd)
    processed = out_dir / "processed"
    dm = Boltz2InferenceDataModule(
        manifest=Manifest.load(processed / "manifest.json"), target_dir=processed / "structures",
        msa_dir=processed / "msa", mol_dir=mol_dir, num_workers=0, constraints_dir=None,
        template_dir=None, extra_mols_dir=processed / "mols", override_method=None)
    torch.manual_seed(0)
    return next(iter(dm.predict_dataloader()))


def dump(model, feats: dict, case: str) -> dict:
    # Keep the global generators as the other parts find them.
    states = (random.getstate(), np.random.get_state(), torch.get_rng_state())
    paired = {}
    try:
        with tempfile.TemporaryDirectory() as td:
            td = Path(td)
            bt.make_mols_dir(td / "mols")
            with bt.recorded_motions() as (rots, trans):
                again = bt.featurize(case, td / "work", td / "mols", seed=0)
            if case == "heterodimer":
                batch = featurize_dir(PAIRED_DIR, "paired_msa", td / "paired", td / "mols")
                paired = {f"inputs.paired_msa.{k}": batch[k][0].float() for k in PAIRED_FEATURES}
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])
    assert torch.equal(again["ref_pos"], feats["ref_pos"]), "featurisation is not reproducible"

    # ref_pos before the motion: undo each residue's (the last residue was never touched).
    pos = feats["ref_pos"][0].clone()
    uid = feats["ref_space_uid"][0]
    n_real = int(feats["atom_pad_mask"][0].sum())
    for u, (r, t) in enumerate(zip(rots, trans)):
        sel = uid[:n_real] == u
        pos[:n_real][sel] = (pos[:n_real][sel] - t) @ r.T
    return {
        "inputs.aug_rot": torch.stack(rots).float(),
        "inputs.aug_trans": torch.stack(trans).float(),
        "inputs.ref_pos_centred": pos[:n_real].float(),
        **paired,
    }
