"""Fixture part `e2e`: the reference's whole predict forward (recycling 1, 6 sampling steps, 2
samples in one batch, torch seed 1234: the same call, so the same random draws, as the `diffusion`
part records) and what it returns: sampled coordinates and every confidence output."""
import torch

PREFIX = "e2e."


def dump(model, feats, case):
    torch.manual_seed(1234)
    res = model(feats, recycling_steps=1, num_sampling_steps=6, diffusion_samples=2,
                max_parallel_samples=2)
    out = {}
    for k in ("sample_atom_coords", "plddt", "pae", "pde", "complex_plddt", "complex_iplddt",
              "complex_pde", "complex_ipde", "ptm", "iptm", "ligand_iptm", "protein_iptm"):
        out[PREFIX + k] = res[k].detach().float().clone()
    pci = res["pair_chains_iptm"]
    chains = sorted(pci)
    out[PREFIX + "pair_chains_iptm"] = torch.stack(
        [torch.stack([pci[a][b].float() for b in chains]) for a in chains])  # (C, C, S)
    return out
