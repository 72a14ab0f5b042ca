"""Boltz-2 fixture part `inputs`: the random per-residue motions boltz's featurizer applied to the
reference conformers (center_random_augmentation in process_atom_features), so the C++ featurizer
can be tested with them injected and every other number compared exactly.

  inputs.aug_rot    (U, 3, 3)  rotation R of residue uid u (x' = (x - mean) @ R + t)
  inputs.aug_trans  (U, 3)     translation t
  inputs.ref_pos_centred (A, 3) ref_pos before the motion (unpadded): each augmented residue's
                               conformer centred on its mean; the last residue's raw conformer

They are recovered by featurising the case again with the same seed while recording the
rotations boltz draws; the re-made ref_pos must equal the batch's bit for bit.
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


def dump(model, feats: dict, case: str) -> dict:
    import boltz.data.feature.featurizerv2 as fz
    import boltz.model.modules.utils as mu

    rots, trans = [], []
    orig_aug, orig_rot = fz.center_random_augmentation, mu.random_rotations

    def aug(atom_coords, atom_mask, **kw):
        got = []

        def rot(n, dtype=None, device=None):
            r = orig_rot(n, dtype, device)
            got.append(r)
            return r

        mu.random_rotations = rot
        try:
            out = orig_aug(atom_coords, atom_mask, **kw)
        finally:
            mu.random_rotations = orig_rot
        m = atom_mask[:, :, None].float()
        centred = atom_coords - (atom_coords * m).sum(1, keepdim=True) / m.sum(1, keepdim=True)
        r = got[0][0]
        rots.append(r)
        trans.append((out[0] - centred[0] @ r).mean(0))
        return out

    # Keep the global generators as the other parts find them.
    states = (random.getstate(), np.random.get_state(), torch.get_rng_state())
    fz.center_random_augmentation = aug
    try:
        with tempfile.TemporaryDirectory() as td:
            td = Path(td)
            bt.make_mols_dir(td / "mols")
            again = bt.featurize(case, td / "work", td / "mols", seed=0)
    finally:
        fz.center_random_augmentation = orig_aug
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
    }
