"""Embed a few proteins with bioinfer from Python and look at what comes back.

    python examples/python/embed.py MODEL      # a model directory or a registry name

With the tiny test model (tests/fixtures/esm2_tiny) the numbers mean nothing, but every step is
the one a real model takes."""
import sys

import numpy as np

import bioinfer

proteins = {
    "ubiquitin": "MQIFVKTLTGKTITLEVEPSDTIENVKAKIQDKEGIPPDQQRLIFAGKQLEDGRTLSDYNIQKESTLHLVLRLRGG",
    "trp_cage": "NLYIQWLKDGGPSSGRPPPS",
    "villin_hp35": "LSDEDFKAVFGMTRSAFANLPLWKQQNLKKEKGLF",
}

model = bioinfer.load(sys.argv[1] if len(sys.argv) > 1 else "esm2_t6_8M_UR50D", threads=2)
print(model)
include = ["mean", "per_tok"] + (["contacts"] if model.architecture == "esm2" else [])
results = model.embed(proteins, layers=(-1,), include=include)
last = model.num_layers
for r in results:
    print(f"{r.id:12s} {r.length:3d} residues  mean {r.mean_representations[last].shape}  "
          f"per-residue {r.representations[last].shape}")

# cosine similarity of the mean embeddings
means = np.stack([r.mean_representations[last] for r in results])
unit = means / np.linalg.norm(means, axis=1, keepdims=True)
print("cosine similarity of the mean embeddings:")
print(np.round(unit @ unit.T, 3))
if "contacts" in include:
    c = results[0].contacts
    print(f"{results[0].id}: {int((c > 0.5).sum())} of {c.size} contact probabilities above 0.5")
