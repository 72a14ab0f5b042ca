"""Fixture part `potentials`: boltz's steering potentials (potentials.py get_potentials with
fk_steering, physical_guidance_update and contact_guidance_update on, as --use_potentials sets
them) evaluated on seeded coordinates: each potential's energy (compute) and gradient
(compute_gradient) at two steering times. The residue and chain constraint features they read
(rdkit_*, chiral_*, stereo_*, planar_*, connected_*, symmetric_*) are stored with the other
features (feat.<name>).

Names:
  potentials.coords                      (2, A, 3) the seeded coordinates (2 samples)
  potentials.t<T>.<Potential>.energy     (2,) at steering time T (0.9 and 0.3, as t90 / t30)
  potentials.t<T>.<Potential>.gradient   (2, A, 3)
Inputs without homomers or tetrasubstituted double bonds leave two potentials idle, so on cases
with two chains or more they also run on variants of the features (at T = 0.3):
  potentials.variant.symmetric_chain_index   (2, 1): chains 0 and 1 as copies
  potentials.variant.planar_bond_index       (6, 1): six atoms of the first chain as a planar bond
  potentials.variant.<Potential>.energy / .gradient
"""
from __future__ import annotations

import torch

from boltz.model.potentials.potentials import get_potentials

TIMES = (0.9, 0.3)


def dump(model, feats: dict, case: str) -> dict:
    out = {}
    steering = dict(fk_steering=True, physical_guidance_update=True,
                    contact_guidance_update=True, num_particles=3, fk_lambda=4.0,
                    fk_resampling_interval=3, num_gd_steps=20)
    potentials = get_potentials(steering, boltz2=True)
    A = feats["atom_pad_mask"].shape[1]
    g = torch.Generator().manual_seed(11)
    coords = torch.randn(2, A, 3, generator=g) * 4.0
    out["potentials.coords"] = coords
    for t in TIMES:
        tag = f"t{round(t * 100)}"
        for p in potentials:
            params = p.compute_parameters(t)
            name = type(p).__name__
            with torch.no_grad():
                energy = p.compute(coords.clone(), feats, params)
                grad = p.compute_gradient(coords.clone(), feats, params)
            out[f"potentials.{tag}.{name}.energy"] = energy.reshape(-1).float()
            out[f"potentials.{tag}.{name}.gradient"] = grad.reshape(2, A, 3).float()
    if int(feats["asym_id"].max()) < 1:
        return out
    variant = dict(feats)
    variant["symmetric_chain_index"] = torch.tensor([[0], [1]])[None]
    variant["planar_bond_index"] = torch.tensor([[0], [1], [2], [3], [4], [5]])[None]
    out["potentials.variant.symmetric_chain_index"] = variant["symmetric_chain_index"][0].float()
    out["potentials.variant.planar_bond_index"] = variant["planar_bond_index"][0].float()
    for p in potentials:
        name = type(p).__name__
        if name not in ("SymmetricChainCOMPotential", "PlanarBondPotential"):
            continue
        params = p.compute_parameters(0.3)
        with torch.no_grad():
            energy = p.compute(coords.clone(), variant, params)
            grad = p.compute_gradient(coords.clone(), variant, params)
        out[f"potentials.variant.{name}.energy"] = energy.reshape(-1).float()
        out[f"potentials.variant.{name}.gradient"] = grad.reshape(2, A, 3).float()
    return out
