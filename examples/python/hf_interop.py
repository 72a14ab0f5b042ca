"""The same numbers as transformers: bioinfer's embeddings next to EsmModel's last_hidden_state
(or EsmcModel's) for one checkpoint. Needs transformers and torch (tools/reference).

    python examples/python/hf_interop.py MODEL_DIR      # e.g. tests/fixtures/esm2_tiny

transformers' last_hidden_state[0] for one sequence is (L + 2, D): <cls>, the residues, <eos>.
bioinfer gives the residues' rows as representations[num_layers] and the <cls> row as
bos_representations[num_layers] (include "per_tok" and "bos"); fair-esm's mean embedding is the
mean over the residues' rows, bioinfer's mean_representations[num_layers]."""
import json
import os
import sys

import numpy as np
import torch

import bioinfer

model_dir = sys.argv[1]
seqs = {"ubq": "MQIFVKTLTGKTITLEVEPSDTIENVKAKIQDKEGIPPDQQRLIFAGKQLEDGRTLSDYNIQKESTLHLVLRLRGG",
        "trp_cage": "NLYIQWLKDGGPSSGRPPPS"}

ours = bioinfer.load(model_dir, threads=2)
n = ours.num_layers
results = ours.embed(seqs, include=("per_tok", "bos", "mean"))

with open(os.path.join(model_dir, "config.json")) as f:
    esmc = json.load(f).get("model_type") == "esmc"
if esmc:
    from transformers import EsmcModel, EsmcTokenizer
    tok, hf = EsmcTokenizer(), EsmcModel.from_pretrained(model_dir).eval()
else:
    from transformers import EsmModel, EsmTokenizer
    tok = EsmTokenizer(os.path.join(model_dir, "vocab.txt"))
    hf = EsmModel.from_pretrained(model_dir, add_pooling_layer=False).eval()

for r in results:
    with torch.inference_mode():
        enc = tok([seqs[r.id]], return_tensors="pt")
        h = hf(**enc).last_hidden_state[0].numpy()  # (L + 2, D)
    checks = {"residues": (r.representations[n], h[1:-1]),
              "<cls>": (r.bos_representations[n], h[0]),
              "mean": (r.mean_representations[n], h[1:-1].mean(axis=0))}
    for what, (a, b) in checks.items():
        print(f"{r.id:9s} {what:9s} max |bioinfer - transformers| = {np.abs(a - b).max():.2e}")
