"""Fixture part `confidence`: Boltz-2's confidence module on the inputs the reference's own forward
hands it (recycling_steps=1, 2 sampling steps, 2 samples), captured with a hook: the re-embedded s
and z the pairformer stack starts from, the stack's output, every head's logits and every
aggregate. Two sampling steps leave the samples thousands of Angstrom wide (every distance in the
last bin), so the module is called again on the captured inputs with the sampled coordinates
scaled to protein-like distances (median 12.05 A, off the bins' boundaries) (the call on the unscaled ones is checked to reproduce the
forward's outputs exactly); what is stored is that call's.

Names:
  confidence.x_pred (samples, atoms, 3)    the scaled samples; the module's other inputs
                                           are part `trunk`'s s_inputs, s, z and pdistogram
  confidence.s_embed, .z_embed             (samples, N, ...) into the pairformer stack
  confidence.s_stack, .z_stack             the stack's outputs
  confidence.<key>                         the module's outputs: plddt_logits, resolved_logits,
      pae, pde, plddt, complex_plddt, complex_iplddt, complex_pde, complex_ipde, ptm, iptm,
      ligand_iptm, protein_iptm (not pae_logits and pde_logits (samples, N, N, 64), the largest:
      pae and pde are their softmax expectations, checked instead)
  confidence.pair_chains_iptm              (n_chain, n_chain, samples): [a][b] = the reference's
                                           pair_chains_iptm[a][b], chains in ascending asym_id
"""
from __future__ import annotations

import torch

from boltz2_dump_trunk import run_forward

OUTPUT_KEYS = ("pae_logits", "pde_logits", "plddt_logits", "resolved_logits", "pae", "pde",
               "plddt", "complex_plddt", "complex_iplddt", "complex_pde", "complex_ipde", "ptm",
               "iptm", "ligand_iptm", "protein_iptm")


def dump(model, feats: dict, case: str) -> dict:
    out: dict[str, torch.Tensor] = {}
    cm = model.confidence_module

    def put(name, t):
        out["confidence." + name] = t.detach().clone()

    seen = {}

    forward_out = {}

    def cm_pre(mod, args, kwargs):
        seen.update(kwargs)
        assert kwargs["multiplicity"] == 2

    def cm_post(mod, args, kwargs, result):
        forward_out.update({k: result[k].detach().clone() for k in OUTPUT_KEYS})

    trunk = {}

    def keep(name):
        def fn(mod, args, kwargs, result):
            trunk[name] = result.detach().clone()
        return fn

    res = run_forward(model, feats, [(cm, "pre", cm_pre), (cm, "post", cm_post),
                                     (model.input_embedder, "post", keep("s_inputs"))])
    # The inputs part `trunk` stores, bit for bit.
    assert torch.equal(seen["s_inputs"], trunk["s_inputs"])
    assert torch.equal(seen["s"], res["s"]) and torch.equal(seen["z"], res["z"])
    assert torch.equal(seen["pred_distogram_logits"], res["pdistogram"][:, :, :, 0])

    # The direct call reproduces the forward's outputs.
    with torch.no_grad():
        again = cm(**seen)
    for k in OUTPUT_KEYS:
        assert torch.equal(again[k], forward_out[k]), k

    # Samples scaled so the median representative-atom distance of sample 0 is 12.05 A: not 12,
    # which is a boundary of the distance bins (linspace(2, 22, 63)), where that pair's bin
    # would hang on the last bit of how its distance is rounded.
    x = seen["x_pred"]
    rep = torch.bmm(feats["token_to_rep_atom"].float(), x[:1])
    d = torch.cdist(rep, rep)[0]
    n = d.shape[0]
    scale = 12.05 / d[~torch.eye(n, dtype=torch.bool)].median()
    x_scaled = (x * scale).contiguous()
    put("x_pred", x_scaled)

    def stack_pre(mod, args, kwargs):
        put("s_embed", args[0])
        put("z_embed", args[1])

    def stack_post(mod, args, kwargs, result):
        put("s_stack", result[0])
        put("z_stack", result[1])

    h1 = cm.pairformer_stack.register_forward_pre_hook(stack_pre, with_kwargs=True)
    h2 = cm.pairformer_stack.register_forward_hook(stack_post, with_kwargs=True)
    try:
        with torch.no_grad():
            result = cm(**dict(seen, x_pred=x_scaled))
    finally:
        h1.remove()
        h2.remove()
    for k in OUTPUT_KEYS:
        if k not in ("pae_logits", "pde_logits"):  # see the module docstring
            put(k, result[k])
    pci = result["pair_chains_iptm"]
    chains = sorted(pci.keys())
    put("pair_chains_iptm",
        torch.stack([torch.stack([pci[a][b] for b in chains]) for a in chains]))
    return out
