#!/usr/bin/env python3
"""The Python API's outputs for bench/ab_bench.py: run with one build's module on the path
(PYTHONPATH=BUILD/python), it loads every fixture model and writes what load, embed (with the
pseudo-log-likelihood, the API's scoring), fold and compare return under OUT: arrays in .npz
files (written with fixed zip timestamps, so the same arrays give the same bytes), scalars and
names in .json, structure text as .pdb / .cif. Every input comes from the repository.

    PYTHONPATH=BUILD/python python bench/ab_python.py OUT
"""
import json
import os
import sys
import time
import zipfile

import numpy as np

import bioinfer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
FIX = os.path.join(ROOT, "tests", "fixtures")
EXAMPLES = os.path.join(ROOT, "examples")
LM_FIXTURES = ["esm2_tiny", "esm2_tiny_hd12", "esmc_tiny", "esmc_tiny_hd10", "esmc_tiny_pth"]


T0 = time.time()


def log(what):
    print(f"ab_python: {time.time() - T0:6.1f} s {what}", file=sys.stderr, flush=True)


def save_npz(path, arrays):
    """np.savez's layout (one .npy member per array, stored) with a fixed date on every member."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name in sorted(arrays):
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            with z.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asarray(arrays[name]), allow_pickle=False)


def save_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")


def embed_arrays(results, prefix=""):
    """Every array of every EmbedResult, named <id>/<array>; lengths and PLLs as scalars."""
    arrays, meta = {}, {}
    for r in results:
        for k, v in r.arrays.items():
            arrays[f"{prefix}{r.id}/{k}"] = v
        meta[f"{prefix}{r.id}"] = {"length": r.length, "original_length": r.original_length,
                                   "pll": r.pll}
    return arrays, meta


def language_models(out):
    fasta = os.path.join(EXAMPLES, "proteins.fasta")
    short = os.path.join(FIX, "score", "short.fasta")
    long_ = os.path.join(FIX, "score", "long.fasta")
    for name in LM_FIXTURES:
        model = bioinfer.load(os.path.join(FIX, name))
        include = ["mean", "per_tok", "bos", "logits"] + (
            ["contacts"] if model.architecture == "esm2" else [])
        arrays, meta = embed_arrays(model.embed(fasta, layers=(0, 1, -1), include=include))
        # one bare sequence, a dict and a list: the inputs the API takes besides a FASTA path
        for tag, seqs, ids in (("bare", "MKTAYIAKQRQISFVKSHF", None),
                               ("dict", {"a": "MKTAYIAK", "b": "GSHMEKLV"}, None),
                               ("list", ["MKV", "MKTAYIAKQR"], ["x", "y"])):
            a, m = embed_arrays(model.embed(seqs, ids=ids, include=("mean", "logits")), tag + ":")
            arrays.update(a)
            meta.update(m)
        # the pseudo-log-likelihood: the wild types of the score fixtures (the long one windowed)
        if name in ("esm2_tiny", "esmc_tiny"):
            for f, include in ((short, ("mean", "pll")), (long_, ("pll",))):
                a, m = embed_arrays(model.embed(f, include=include), "pll:")
                arrays.update(a)
                meta.update(m)
        for i, lg in enumerate(model.logits({"ubq": "MQIFVKTLTGKTITLEVEPS"})):
            arrays[f"logits_helper/{i}"] = lg
        if model.architecture == "esm2":
            for i, c in enumerate(model.contacts(["MQIFVKTLTGKTITLEVEPS"])):
                arrays[f"contacts_helper/{i}"] = c
        meta["model"] = {"architecture": model.architecture, "num_layers": model.num_layers,
                         "hidden_size": model.hidden_size, "precision": model.precision,
                         "repr": repr(model)}
        save_npz(os.path.join(out, f"lm_{name}.npz"), arrays)
        save_json(os.path.join(out, f"lm_{name}.json"), meta)
        log(name)
    # the reduced precisions
    for name in ("esm2_tiny", "esmc_tiny"):
        for precision in ("bf16", "int8"):
            model = bioinfer.load(os.path.join(FIX, name), precision=precision)
            arrays, meta = embed_arrays(model.embed(fasta, layers=(-1,), include=("mean", "logits")))
            save_npz(os.path.join(out, f"lm_{name}_{precision}.npz"), arrays)
            save_json(os.path.join(out, f"lm_{name}_{precision}.json"), meta)
            log(f"{name} {precision}")


def fold_outputs(out, tag, preds, truth=None):
    """Every sample's arrays, scores, names and structure text of a fold() call."""
    arrays, meta = {}, {}
    for p in preds:
        meta[p.id] = {"num_samples": p.num_samples, "num_recycles": p.num_recycles,
                      "chains": p.chains, "tokens": p.tokens, "atoms": p.atoms, "samples": []}
        for k, s in enumerate(p.samples()):
            for what in ("coords", "plddt", "token_plddt", "pae", "pde"):
                v = getattr(s, what)
                if v is not None:
                    arrays[f"{p.id}/{k}/{what}"] = v
            meta[p.id]["samples"].append({"scores": s.scores, "ptm": s.ptm})
            for fmt, text in (("pdb", s.to_pdb()), ("cif", s.to_mmcif())):
                with open(os.path.join(out, f"{tag}_{p.id}_{k}.{fmt}"), "w") as f:
                    f.write(text)
        if truth:
            meta[p.id]["compare"] = bioinfer.compare(p, truth)
    save_npz(os.path.join(out, f"{tag}.npz"), arrays)
    save_json(os.path.join(out, f"{tag}.json"), meta)
    log(tag)


def structure_models(out):
    ubq = os.path.join(EXAMPLES, "ubiquitin.pdb")
    esmfold = bioinfer.load(os.path.join(FIX, "esmfold_tiny"))
    fold_outputs(out, "esmfold", esmfold.fold(
        {"ubq": "MQIFVKTLTGKTITLEVEPSDTIENVKAKIQDKEGIPPDQQRLIFAGKQLEDGRTLSDYNIQKESTLHLVLRLRGG",
         "dimer": "MKTAYIAK:GSHMLEDP"}), truth=ubq)
    fold_outputs(out, "esmfold_recycles1", [esmfold.fold("MKTAYIAKQRQISFVKSHF", num_recycles=1)])
    esmfold2 = bioinfer.load(os.path.join(FIX, "esmfold2_tiny"))
    fold_outputs(out, "esmfold2", esmfold2.fold(
        os.path.join(FIX, "esmfold2_msa", "targets.fasta"), num_recycles=1, num_samples=2,
        sampling_steps=8, seed=3))
    boltz2 = bioinfer.load(os.path.join(FIX, "boltz2_tiny"))
    inputs = [os.path.join(EXAMPLES, "boltz2", "complex.yaml"),
              os.path.join(EXAMPLES, "boltz2", "templated.yaml"),
              os.path.join(FIX, "boltz2_tiny", "inputs", "constrained", "constrained.yaml"),
              os.path.join(FIX, "boltz2_tiny", "inputs", "template", "template.yaml")]
    fold_outputs(out, "boltz2", boltz2.fold(inputs, num_recycles=0, num_samples=2,
                                            sampling_steps=3, seed=1))
    # a structure file against another: compare() without a fold
    save_json(os.path.join(out, "compare_files.json"), {
        "ubq_vs_ubq": bioinfer.compare(ubq, os.path.join(EXAMPLES, "boltz2", "1ubq.pdb"))})


def registry(out):
    """What the module says about names and folders (the model registry)."""
    names = ["esm2_t6_8M_UR50D", "esm2_t33_650M_UR50D", "esm2_t48_15B_UR50D", "esmc-300m",
             "esmc-600m", "esmc-6b", "esmfold", "esmfold2", "esmfold2-fast", "boltz2",
             "boltz2-affinity", "facebook/esm2_t6_8M_UR50D", "no_such_model"]
    doc = {"known_model": {n: bioinfer._bioinfer.known_model(n) for n in names},
           "folders": {}}
    for name in LM_FIXTURES + ["esmfold_tiny", "esmfold2_tiny", "esmfold2_tiny_legacy",
                               "boltz2_tiny", "score"]:
        d = os.path.join(FIX, name)
        row = {}
        for what, fn in (("model_kind", bioinfer._bioinfer.model_kind),
                         ("architecture", bioinfer._bioinfer.architecture)):
            try:
                row[what] = fn(d)
            except Exception as e:  # the message is part of the output
                row[what] = f"{type(e).__name__}: {e}"
        doc["folders"][name] = row
    save_json(os.path.join(out, "registry.json"), doc)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    registry(out)
    language_models(out)
    structure_models(out)


if __name__ == "__main__":
    main()
