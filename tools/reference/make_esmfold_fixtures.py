#!/usr/bin/env python3
"""Builds a tiny random-weight ESMFold with Hugging Face transformers (EsmForProteinFolding: a
small ESM-2 stem run in fp32, 2 trunk blocks, small dims, the full 8-block structure module),
runs it, and writes the parity fixture the C++ tests read (tests/fixtures/esmfold_tiny/).

The folder is a real model directory (config.json, model.safetensors, vocab.txt) plus
reference.safetensors (per case: the model inputs, the stem's combined features, every trunk
block's s and z in the first and last recycling pass, the recycled distogram bins, the
structure module's frames and atom positions per block, and the heads) and cases.json.
Multimer cases are encoded as fair-esm does: chains joined by 25 glycines, +512 residue index
per chain.

    .venv-reference/bin/python tools/reference/make_esmfold_fixtures.py [--out tests/fixtures]
"""
import argparse
import json
import os
import shutil

import torch
from transformers import EsmConfig, EsmForProteinFolding
from transformers.models.esm import modeling_esmfold
from transformers.models.esm.openfold_utils import residue_constants as rc

from fixture_util import ESM2_ALPHABET, randomize, save_reference

NAME = "esmfold_tiny"
# (id, sequence, store the big per-block taps)
CASES = [
    ("mini", "MKTAYIAKQRQISFVKSHFSRQ", True),
    ("unk", "GSHMXLAGKDWYCP", False),
    ("dimer", "MKVLAAGIVG:KTELLKRAG", False),
]
LINKER, OFFSET = "G" * 25, 512


def config():
    trunk = dict(num_blocks=2, sequence_state_dim=64, pairwise_state_dim=16, sequence_head_width=16,
                 pairwise_head_width=8, position_bins=32, dropout=0.0, max_recycles=4,
                 chunk_size=None,
                 structure_module=dict(sequence_dim=48, pairwise_dim=16, ipa_dim=8, resnet_dim=16,
                                       num_heads_ipa=4, num_qk_points=4, num_v_points=8,
                                       dropout_rate=0.0, num_blocks=8, num_transition_layers=1,
                                       num_resnet_blocks=2, num_angles=7, trans_scale_factor=10,
                                       epsilon=1e-8, inf=1e5))
    cfg = EsmConfig(vocab_size=33, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=64, hidden_act="gelu", hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0, max_position_embeddings=1026,
                    position_embedding_type="rotary", layer_norm_eps=1e-5,
                    emb_layer_norm_before=False, token_dropout=True, mask_token_id=32,
                    pad_token_id=1, is_folding_model=True, vocab_list=ESM2_ALPHABET,
                    esmfold_config=dict(fp16_esm=False, embed_aa=True, bypass_lm=False,
                                        lddt_head_hid_dim=16, trunk=trunk),
                    architectures=["EsmForProteinFolding"])
    cfg._attn_implementation = "eager"
    return cfg


def encode(seq):
    """fair-esm's encode_sequence: aatype, residue index, linker mask, chain index."""
    chains = seq.split(":")
    joined = LINKER.join(chains)
    aatype = torch.tensor([rc.restype_order_with_x.get(a, rc.restype_num) for a in joined])
    residx = torch.arange(len(joined))
    start = 0
    linker_mask = torch.ones(len(joined))
    chain = []
    for i, c in enumerate(chains):
        residx[start:start + len(c) + len(LINKER)] += i * OFFSET
        start += len(c) + len(LINKER)
        if i > 0:
            chain += [i - 1] * len(LINKER)
        chain += [i] * len(c)
    off = 0
    for c in chains:
        off += len(c)
        linker_mask[off:off + len(LINKER)] = 0
        off += len(LINKER)
    return aatype, residx, linker_mask, torch.tensor(chain)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    cfg = config()
    model = EsmForProteinFolding(cfg).eval()
    norms = {f"{mn}.{pn}" for mn, m in model.named_modules() if isinstance(m, torch.nn.LayerNorm)
             for pn, _ in m.named_parameters(recurse=False)}
    randomize(model, 5, lambda n: n in norms)
    out = os.path.join(os.path.abspath(args.out), NAME)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    model.save_pretrained(out, safe_serialization=True)
    with open(os.path.join(out, "vocab.txt"), "w") as f:
        f.write("\n".join(ESM2_ALPHABET) + "\n")

    trunk = model.trunk
    ref = {}
    for cid, seq, big in CASES:
        aatype, residx, linker_mask, chain = encode(seq)
        taps = {"blocks": [], "bins": [], "esm_s": None}
        hooks = [b.register_forward_hook(lambda m, i, o: taps["blocks"].append(o)) for b in trunk.blocks]
        hooks.append(model.esm_s_mlp.register_forward_hook(lambda m, i, o: taps.__setitem__("esm_s", i[0])))
        dist = modeling_esmfold.EsmFoldingTrunk.distogram

        def record(coords, *a):
            bins = dist(coords, *a)
            taps["bins"].append(bins)
            return bins
        modeling_esmfold.EsmFoldingTrunk.distogram = staticmethod(record)
        with torch.no_grad():
            o = model(input_ids=aatype[None], attention_mask=torch.ones_like(aatype)[None],
                      position_ids=residx[None])
        modeling_esmfold.EsmFoldingTrunk.distogram = staticmethod(dist)
        for h in hooks:
            h.remove()
        p = f"{cid}."
        ref[p + "aatype"] = aatype.float()
        ref[p + "residue_index"] = residx.float()
        ref[p + "linker_mask"] = linker_mask
        ref[p + "chain_index"] = chain.float()
        ref[p + "esm_s_combined"] = taps["esm_s"][0]
        nb = len(trunk.blocks)
        if big:
            for r, name in ((0, "first"), (len(taps["blocks"]) // nb - 1, "last")):
                for b in range(nb):
                    s, z = taps["blocks"][r * nb + b]
                    ref[p + f"trunk.{name}.block{b}.s"] = s[0]
                    ref[p + f"trunk.{name}.block{b}.z"] = z[0]
            ref[p + "distogram_logits"] = o.distogram_logits[0]
        for r, bins in enumerate(taps["bins"]):
            ref[p + f"recycle_bins.{r}"] = bins[0].float()
        ref[p + "s_s"] = o.s_s[0]
        ref[p + "s_z"] = o.s_z[0]
        ref[p + "frames"] = o.frames[:, 0]          # (blocks, L, 7)
        ref[p + "positions"] = o.positions[:, 0]    # (blocks, L, 14, 3)
        ref[p + "angles"] = o.angles[:, 0]          # (blocks, L, 7, 2)
        ref[p + "states"] = o.states[:, 0]          # (blocks, L, C)
        ref[p + "plddt"] = o.plddt[0]               # (L, 37), 0..1
        ref[p + "ptm"] = o.ptm.reshape(1)
        ref[p + "pae"] = o.predicted_aligned_error[0]
        ref[p + "lm_logits"] = o.lm_logits[0]
        ref[p + "atom37_exists"] = o.atom37_atom_exists[0]
        ref[p + "atom37"] = modeling_esmfold.atom14_to_atom37(o.positions[-1], o)[0]
    save_reference(ref, os.path.join(out, "reference.safetensors"),
                   f"transformers {__import__('transformers').__version__}, torch {torch.__version__}")
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump({"model": NAME, "cases": [{"id": c, "sequence": s} for c, s, _ in CASES]}, f, indent=2)
        f.write("\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
