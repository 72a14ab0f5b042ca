"""Fixture part `affinity`: the tiny affinity model's two affinity modules (AffinityModule) on the
protein-ligand case with chain B as the binder, called directly on seeded inputs: the input
embedding s_inputs, the trunk pair z masked to the binder's pairs as boltz2.py masks it, and atom
coordinates at protein-like distances (scaled so no representative-atom distance lies within
1e-3 A of a distance bin's boundary, where torch.cdist's rounding would decide the bin).
Names (module k = 1, 2):
  affinity.token_mask            (N,) the binder's tokens (affinity_token_mask)
  affinity.s_inputs (N, token_s), affinity.z (N, N, token_z), affinity.coords (A, 3)
  affinity.m<k>.z_in             z after z_linear(z_norm(z)) and the s_inputs terms
  affinity.m<k>.z_cond           ... plus the pairwise conditioning on the distance embedding
  affinity.m<k>.z_stack          the masked pairformer stack's output
  affinity.m<k>.g                the pair mean over binder-receptor and binder-binder pairs
  affinity.m<k>.value, .logit    affinity_pred_value, affinity_logits_binary (1, 1)
  affinity.crop.*                boltz's AffinityCropper on a synthetic token table (crop_case):
                                 the table's columns and the kept token indices
"""
from __future__ import annotations

import torch

import boltz2_tiny as bt

CASE = "protein_ligand"
BINDER_ASYM = 1  # chain B


def dump(model, feats: dict, case: str) -> dict:
    if case != CASE:
        return {}
    aff = bt.build_affinity_model()
    f = dict(feats)
    mask_tok = (f["asym_id"] == BINDER_ASYM).float()
    f["affinity_token_mask"] = mask_tok
    N = f["res_type"].shape[1]
    A = f["ref_pos"].shape[1]
    g = torch.Generator().manual_seed(11)
    s_inputs = torch.randn(1, N, aff.affinity_module1.s_to_z_prod_in1.in_features, generator=g)
    tz = aff.affinity_module1.z_linear.in_features
    z = torch.randn(1, N, N, tz, generator=g)
    pad = f["token_pad_mask"][0]
    rec = (f["mol_type"][0] == 0).float() * pad
    lig = mask_tok[0] * pad
    cross = lig[:, None] * rec[None, :] + rec[:, None] * lig[None, :] + lig[:, None] * lig[None, :]
    z = z * cross[None, :, :, None]
    bounds = aff.affinity_module1.boundaries
    t2r = f["token_to_rep_atom"].float()
    x = None
    for k in range(100):  # scale away from bin boundaries
        cand = torch.randn(1, A, 3, generator=g) * 8.0
        rep = torch.bmm(t2r, cand)
        d = torch.cdist(rep, rep)[0]
        if (d[..., None] - bounds).abs().min() > 1e-3:
            x = cand
            break
    assert x is not None, "no coordinates off the bin boundaries"
    out = {"affinity.token_mask": mask_tok[0], "affinity.s_inputs": s_inputs[0],
           "affinity.z": z[0], "affinity.coords": x[0]}
    for k in (1, 2):
        m = getattr(aff, f"affinity_module{k}")
        seen = {}
        hooks = [
            m.pairwise_conditioner.register_forward_hook(
                lambda mod, a, kw, r: seen.__setitem__("cond", r.detach().clone()),
                with_kwargs=True),
            m.pairformer_stack.register_forward_hook(
                lambda mod, a, kw, r: seen.__setitem__("stack", r.detach().clone()),
                with_kwargs=True),
        ]
        try:
            with torch.no_grad():
                res = m(s_inputs, z, x[:, None], f, multiplicity=1)
                z_in = (m.z_linear(m.z_norm(z)) + m.s_to_z_prod_in1(s_inputs)[:, :, None, :]
                        + m.s_to_z_prod_in2(s_inputs)[:, None, :, :])
        finally:
            for h in hooks:
                h.remove()
        w = cross * (1 - torch.eye(N))
        gm = (seen["stack"][0] * w[:, :, None]).sum((0, 1)) / (w.sum() + 1e-7)
        p = f"affinity.m{k}."
        out[p + "z_in"] = z_in[0]
        out[p + "z_cond"] = (z_in + seen["cond"])[0]
        out[p + "z_stack"] = seen["stack"][0]
        out[p + "g"] = gm[None]
        out[p + "value"] = res["affinity_pred_value"].reshape(1, 1)
        out[p + "logit"] = res["affinity_logits_binary"].reshape(1, 1)
    out.update(crop_case())
    return out


def crop_case() -> dict:
    """boltz's AffinityCropper (256 tokens, 2048 atoms, at most 200 receptor tokens, windows of 10
    residues) on a synthetic token table: a 300-residue protein (a random walk of 3.8 A steps),
    a 20-atom binder ligand beside residue 150, an ion beside residue 60 and a second protein
    chain of 40 residues crossing the binder; tokens carry 5 to 14 atoms (ligand atoms 1)."""
    import dataclasses

    import numpy as np
    from boltz.data import const
    from boltz.data.crop.affinity import AffinityCropper
    from boltz.data.types import TokenBondV2, TokenV2

    rng = np.random.default_rng(5)

    def walk(n, start):
        steps = rng.normal(size=(n, 3))
        steps *= 3.8 / np.linalg.norm(steps, axis=1, keepdims=True)
        return start + np.cumsum(steps, axis=0)

    chains = []  # (mol_type, coords (n, 3), res_idx (n), atom_num (n), affinity)
    a = walk(300, np.zeros(3))
    chains.append((const.chain_type_ids["PROTEIN"], a, np.arange(300), rng.integers(5, 15, 300), False))
    lig = a[150] + rng.normal(size=(20, 3)) * 2.0 + 4.0
    chains.append((const.chain_type_ids["NONPOLYMER"], lig, np.zeros(20, int), np.ones(20, int), True))
    ion = a[60][None] + 3.0
    chains.append((const.chain_type_ids["NONPOLYMER"], ion, np.zeros(1, int), np.ones(1, int), False))
    d = walk(40, lig[0] - 40.0)
    chains.append((const.chain_type_ids["PROTEIN"], d, np.arange(40), rng.integers(5, 15, 40), False))
    n = sum(len(c[1]) for c in chains)
    tokens = np.zeros(n, dtype=TokenV2)
    t = 0
    for asym, (mol, xyz, res, atoms, aff) in enumerate(chains):
        for k in range(len(xyz)):
            tokens[t]["token_idx"] = t
            tokens[t]["asym_id"] = asym
            tokens[t]["mol_type"] = mol
            tokens[t]["res_idx"] = res[k]
            tokens[t]["atom_num"] = atoms[k]
            tokens[t]["center_coords"] = xyz[k]
            tokens[t]["resolved_mask"] = True
            tokens[t]["affinity_mask"] = aff
            t += 1

    @dataclasses.dataclass(frozen=True)
    class Data:
        tokens: np.ndarray
        bonds: np.ndarray

    out = AffinityCropper().crop(Data(tokens, np.zeros(0, dtype=TokenBondV2)), max_tokens=256,
                                 max_atoms=2048)
    return {
        "affinity.crop.asym_id": torch.tensor(tokens["asym_id"]).float(),
        "affinity.crop.mol_type": torch.tensor(tokens["mol_type"].astype(np.int32)).float(),
        "affinity.crop.res_idx": torch.tensor(tokens["res_idx"]).float(),
        "affinity.crop.atom_num": torch.tensor(tokens["atom_num"]).float(),
        "affinity.crop.affinity": torch.tensor(tokens["affinity_mask"]).float(),
        "affinity.crop.center": torch.tensor(tokens["center_coords"]),
        "affinity.crop.kept": torch.tensor(np.array(sorted(out.tokens["token_idx"]))).float(),
    }
