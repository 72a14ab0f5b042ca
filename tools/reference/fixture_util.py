"""Helpers shared by the fixture scripts: random weights at scales where every term matters,
sharded safetensors in the Hugging Face layout, and the reference/cases files the C++ tests read."""
import json
import os

import torch
from safetensors.torch import save_file


# The ESM alphabet (fair-esm "ESM-1b"); ESM C puts its chain break '|' at 31 instead of <null_1>.
ESM2_ALPHABET = ["<cls>", "<pad>", "<eos>", "<unk>", "L", "A", "G", "V", "S", "E", "R", "T", "I",
                 "D", "P", "K", "Q", "N", "F", "Y", "M", "H", "W", "C", "X", "B", "U", "Z", "O", ".",
                 "-", "<null_1>", "<mask>"]
ESMC_ALPHABET = ESM2_ALPHABET[:31] + ["|"] + ESM2_ALPHABET[32:]

# Padding in one batch, <mask> tokens, the rare letters X/B/U/Z/O, lower case, and lengths from
# 3 to 76 (ubiquitin, 1UBQ).
PROTEIN_CASES = [
    ("ubq", "MQIFVKTLTGKTITLEVEPSDTIENVKAKIQDKEGIPPDQQRLIFAGKQLEDGRTLSDYNIQKESTLHLVLRLRGG"),
    ("rare", "GSHMXBUZOLAGKD"),
    ("masked", "MKT<mask>LLVA<mask>GSW"),
    ("short", "MKV"),
    ("trpcage", "nlyiqwlkdggpssgrppps"),
]


def randomize(model, seed, is_norm):
    """Every parameter redrawn: norms near 1 (weights) / 0 (biases), biases small, matrices with
    unit-variance outputs. is_norm(name) tells a normalisation parameter."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if is_norm(name):
                base = 1.0 if name.endswith("weight") else 0.0
                p.copy_(base + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                fan_in = p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=g) / fan_in ** 0.5)


def save_two_shards(sd, out, cast):
    """sd split by sorted name into two safetensors shards plus model.safetensors.index.json;
    cast(tensor) gives the stored tensor."""
    names = sorted(sd)
    shards = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    weight_map = {}
    for fname, keys in shards.items():
        save_file({k: cast(sd[k]) for k in keys}, os.path.join(out, fname), metadata={"format": "pt"})
        weight_map.update({k: fname for k in keys})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=2, sort_keys=True)


def save_reference(ref, path, generator):
    # one metadata key: safetensors writes metadata in hash order, so several keys would make
    # regenerated files differ byte-wise from run to run
    ref = {k: v.detach().float().contiguous().clone() for k, v in ref.items()}
    save_file(ref, path, metadata={"generator": generator})


def write_cases(out, name, num_layers, cases):
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump({"model": name, "num_layers": num_layers,
                   "cases": [{"id": c, "sequence": s} for c, s in cases]}, f, indent=2)
        f.write("\n")
