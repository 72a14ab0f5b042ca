"""Boltz-2 fixture part `atoms`: the atom-level modules' inputs and outputs, captured with forward
hooks during the reference's own forward pass (1 recycle, 2 sampling steps, 2 diffusion samples):

  atoms.embedder.c                InputEmbedder's AtomEncoder (structure_prediction=False):
                                  c (A, atom_s) (its q is c itself)
  atoms.embedder.a                its AtomAttentionEncoder's output (N, token_s)
  atoms.cond.z                    DiffusionConditioning's pairwise conditioner output (N, N, token_z)
  atoms.enc.r                     the score model's first call: the atom encoder's r input,
                                  c_in(sigma) * x_noisy (S, A, 3), S = diffusion samples
  atoms.enc.{a, q_skip}           its outputs: (S, N, 2 token_s), (S, A, atom_s)
  atoms.dec.a                     the decoder's token input of that call (S, N, 2 token_s)
  atoms.dec.r_update              its output (S, A, 3)

Stored once elsewhere, not here (the tests read those copies): the InputEmbedder's output
(trunk.s_inputs); DiffusionConditioning's inputs s_trunk, z_trunk, relpos (trunk.s, trunk.z,
trunk.relpos) and its q, c and token_trans_bias (diffusion.cond.*); the encoder's c_skip, c
repeated per sample (diffusion.call.enc.in_c).
Not stored, as the largest tensors of a case and covered by the outputs they feed: the input
embedder's pair representation p (K, 32, 128, atom_z), checked through atoms.embedder.a; the
conditioning's atom_enc_bias / atom_dec_bias (K, 32, 128, depth * heads), which the tests compute
from the conditioning on the trunk's outputs and check through the encoder and decoder outputs.

The encoder's q, c and bias inputs are the conditioning's q, c and atom_enc_bias; the decoder's
q, c and bias inputs are the encoder's q_skip, c_skip and atom_dec_bias (checked here).
Batch dimensions of 1 are dropped.
"""
from __future__ import annotations

import torch


def _first(store: dict, key: str):
    def hook(module, args, kwargs, output):
        if key not in store:
            store[key] = (args, kwargs, output)
    return hook


def dump(model, feats: dict, case: str) -> dict:
    store: dict = {}
    handles = []
    sm = model.structure_module.score_model
    for key, mod in [
        ("emb_atom_encoder", model.input_embedder.atom_encoder),
        ("emb_attention_encoder", model.input_embedder.atom_attention_encoder),
        ("embedder", model.input_embedder),
        ("cond", model.diffusion_conditioning),
        ("cond_pairwise", model.diffusion_conditioning.pairwise_conditioner),
        ("cond_atom_encoder", model.diffusion_conditioning.atom_encoder),
        ("enc", sm.atom_attention_encoder),
        ("dec", sm.atom_attention_decoder),
    ]:
        handles.append(mod.register_forward_hook(_first(store, key), with_kwargs=True))
    try:
        torch.manual_seed(0)
        model(feats, recycling_steps=1, num_sampling_steps=2, diffusion_samples=2)
    finally:
        for h in handles:
            h.remove()

    def b0(t):
        assert t.shape[0] == 1, t.shape
        return t[0]

    out = {}
    q, c, p, _ = store["emb_atom_encoder"][2]
    assert q is c
    out["atoms.embedder.c"] = b0(c)
    out["atoms.embedder.a"] = b0(store["emb_attention_encoder"][2][0])

    _, kw, (cq, cc, _, enc_bias, dec_bias, tok_bias) = store["cond"]
    out["atoms.cond.z"] = b0(store["cond_pairwise"][2])

    _, ekw, (ea, eq, ec, _) = store["enc"]
    assert torch.equal(ekw["q"], cq) and torch.equal(ekw["c"], cc)
    assert torch.equal(ekw["atom_enc_bias"], enc_bias)
    assert ekw["multiplicity"] == 2
    out["atoms.enc.r"] = ekw["r"]
    out["atoms.enc.a"] = ea
    out["atoms.enc.q_skip"] = eq
    assert torch.equal(ec, cc.repeat_interleave(2, 0)), "c_skip is c repeated per sample"

    _, dkw, r_update = store["dec"]
    assert torch.equal(dkw["q"], eq) and torch.equal(dkw["c"], ec)
    assert torch.equal(dkw["atom_dec_bias"], dec_bias)
    out["atoms.dec.a"] = dkw["a"]
    out["atoms.dec.r_update"] = r_update
    return {k: v.detach().float().contiguous() for k, v in out.items()}
