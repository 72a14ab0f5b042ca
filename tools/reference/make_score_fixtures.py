#!/usr/bin/env python3
"""Variant-effect scoring fixtures: the scores `bioinfer score` must reproduce, computed with
transformers on the tiny ESM-2 and ESM C fixture models the way the esm repository's
variant-prediction script does (examples/variant-prediction/predict.py): one forward per masked
position, log_softmax over the whole vocabulary, mutant minus wild-type log-probability summed
over a multi-mutant's substitutions; and, for proteins longer than the scoring window,
ProteinGym's window rule (the window of `window` residues centred on the scored position,
clamped to the ends).

Pseudo-ppl follows the ESM-1v paper's definition, sum over every position i of
log p(x_i | x with i masked), scored as the mutant's minus the wild type's. (The esm script's
compute_pppl reads the residue one to the right of each masked token and skips the last two
positions; its order of mutants is the same up to that slip.)

Writes tests/fixtures/score/: a mutations CSV per case (with a random "DMS_score" column) and
expected.json: per model, case and strategy, the scores in the CSV's row order and their
Spearman's rho against DMS_score (pandas), and the wild type's pseudo-log-likelihood; the "short"
case also holds every single substitution's marginal scores (a DMS).

    .venv-reference/bin/python tools/reference/make_score_fixtures.py
"""
import csv
import json
import os
import random

import pandas as pd
import torch
from transformers import EsmcForMaskedLM, EsmForMaskedLM

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "..", "tests", "fixtures")
OUT = os.path.join(FIX, "score")
ESM2_ALPHABET = ["<cls>", "<pad>", "<eos>", "<unk>", "L", "A", "G", "V", "S", "E", "R", "T", "I",
                 "D", "P", "K", "Q", "N", "F", "Y", "M", "H", "W", "C", "X", "B", "U", "Z", "O",
                 ".", "-", "<null_1>", "<mask>"]
AA = "ACDEFGHIKLMNPQRSTVWY"
MASK = 32


def window_of(i, length, window):
    if window <= 0 or length <= window:
        return 0, length
    half = window // 2
    if i < half:
        return 0, window
    if i >= length - half:
        return length - window, length
    return max(0, i - half), min(length, i + half)


def ids(seq):
    return [ESM2_ALPHABET.index(c) for c in seq]


@torch.no_grad()
def log_probs(model, seq, masked, window):
    """(L, V) log-probabilities per position: masked one at a time (one forward each, as the
    esm script), or unmasked (one forward per window)."""
    L = len(seq)
    toks = ids(seq)
    rows = []
    for i in range(L):
        s, e = window_of(i, L, window)
        t = [0] + toks[s:e] + [2]
        if masked:
            t[i - s + 1] = MASK
        out = model(input_ids=torch.tensor([t])).logits
        rows.append(torch.log_softmax(out[0].double(), dim=-1)[i - s + 1])
    return torch.stack(rows)


def parse(mutant, offset):
    subs = []
    for part in mutant.split(":"):
        subs.append((part[0], int(part[1:-1]) - offset, part[-1]))
    return subs


def marginal(lp, mutants, offset):
    out = []
    for m in mutants:
        out.append(sum(float(lp[i, ESM2_ALPHABET.index(mt)] - lp[i, ESM2_ALPHABET.index(wt)])
                       for wt, i, mt in parse(m, offset)))
    return out


def pll(model, seq, window):
    lp = log_probs(model, seq, True, window)
    return sum(float(lp[i, ESM2_ALPHABET.index(c)]) for i, c in enumerate(seq))


def pseudo_ppl(model, wt, mutants, offset, window):
    base = pll(model, wt, window)
    out = []
    for m in mutants:
        s = list(wt)
        for _, i, mt in parse(m, offset):
            s[i] = mt
        out.append(pll(model, "".join(s), window) - base)
    return out


def main():
    rng = random.Random(5)
    os.makedirs(OUT, exist_ok=True)
    cases = {
        "short": {"wild_type": "".join(rng.choice(AA) for _ in range(40)), "offset": 1, "window": 0},
        "window": {"wild_type": "".join(rng.choice(AA) for _ in range(70)), "offset": 101,
                   "window": 30},
    }
    for name, c in cases.items():
        wt, off = c["wild_type"], c["offset"]
        L = len(wt)
        picks = [0, 1, L // 2, L - 2, L - 1] + rng.sample(range(L), 6)
        muts = []
        for i in picks:
            muts.append(f"{wt[i]}{i + off}{rng.choice([a for a in AA if a != wt[i]])}")
        for _ in range(4):  # multi-mutants
            pos = sorted(rng.sample(range(L), rng.choice([2, 3])))
            muts.append(":".join(f"{wt[i]}{i + off}{rng.choice([a for a in AA if a != wt[i]])}"
                                 for i in pos))
        c["mutants"] = muts
        with open(os.path.join(OUT, f"{name}.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["mutant", "DMS_score", "note"])
            for k, m in enumerate(muts):
                w.writerow([m, f"{rng.uniform(-3, 1):.4f}", "multi, quoted" if ":" in m else ""])
        with open(os.path.join(OUT, f"{name}.fasta"), "w") as f:
            f.write(f">{name}\n{wt}\n")
    expected = {"generator": f"tools/reference/make_score_fixtures.py (transformers "
                             f"{__import__('transformers').__version__}, torch {torch.__version__})",
                "cases": {k: {kk: vv for kk, vv in v.items()} for k, v in cases.items()},
                "models": {}}
    for model_name, cls in (("esm2_tiny", EsmForMaskedLM), ("esmc_tiny", EsmcForMaskedLM)):
        model = cls.from_pretrained(os.path.join(FIX, model_name)).eval()
        model.float()
        res = {}
        for name, c in cases.items():
            wt, off, win = c["wild_type"], c["offset"], c["window"]
            mm = log_probs(model, wt, True, win)
            wm = log_probs(model, wt, False, win)
            r = {"masked_marginals": marginal(mm, c["mutants"], off),
                 "wt_marginals": marginal(wm, c["mutants"], off),
                 "pseudo_ppl": pseudo_ppl(model, wt, c["mutants"], off, win),
                 "pll_wild_type": pll(model, wt, win)}
            measured = pd.read_csv(os.path.join(OUT, f"{name}.csv"))["DMS_score"]
            r["spearman_vs_DMS_score"] = {
                k: float(pd.Series(r[k]).corr(measured, method="spearman"))
                for k in ("masked_marginals", "wt_marginals", "pseudo_ppl")}
            if name == "short":
                dms = [f"{a}{i + off}{b}" for i, a in enumerate(wt) for b in AA if b != a]
                r["dms_mutants"] = dms
                r["dms_masked_marginals"] = marginal(mm, dms, off)
                r["dms_wt_marginals"] = marginal(wm, dms, off)
            res[name] = r
        expected["models"][model_name] = res
        print(model_name, "done")
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
