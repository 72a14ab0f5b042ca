#!/usr/bin/env python3
"""Variant-effect scoring fixtures: the scores `bioinfer score` must reproduce, computed with
transformers on the tiny ESM-2 and ESM C fixture models the way the esm repository's
variant-prediction script (examples/variant-prediction/predict.py) and ProteinGym's ESM scoring
script (proteingym/baselines/esm/compute_fitness.py) do: log_softmax over the whole vocabulary,
mutant minus wild-type log-probability summed over a multi-mutant's substitutions.

A wild type longer than the scoring window W (in tokens, <cls> and <eos> included) runs by one of
two rules:
  - "proteingym", ProteinGym's with its default --scoring-window optimal: the tokens
    <cls> residues <eos> (T = L + 2) are masked at each token index t in turn and sliced to the
    window get_optimal_window(t, T, W) picks (proteingym/utils/scoring_utils.py; token_window
    below follows it), so a window in the middle holds neither <cls> nor <eos>; the row t - start
    of that pass is token t's, and label_row reads residue idx at token 1 + idx. Wild-type
    marginals are one unwindowed pass over all T tokens. W defaults to the checkpoint's context
    (context_of below).
  - "centred", bioinfer's earlier rule: the window of W - 2 residues centred on the position,
    clamped to the ends, with <cls> and <eos> added to every pass; wild-type marginals one pass
    per distinct window.

Pseudo-ppl follows the ESM-1v paper's definition, sum over every position i of
log p(x_i | x with i masked), scored as the mutant's minus the wild type's, each masked pass in
the masked-marginal window of its rule. (ProteinGym's compute_pppl, like the esm script's, runs
every masked pass unwindowed, reads the residue one to the right of each masked token and skips
the last two positions; its order of mutants is the same up to that slip.)

The "long" case runs each model with a smaller max_position_embeddings (checkpoint_config in the
case; the positions are rotary, so the logits do not change), which makes the checkpoint's
context, and so the default window, shorter than its 100 residues.

Writes tests/fixtures/score/: a mutations CSV and a FASTA per case (with a random "DMS_score"
column) and expected.json: the cases (rule, window, null for the checkpoint's), and per model and
case the window used, the scores in the CSV's row order and their Spearman's rho against
DMS_score (pandas), and the wild type's pseudo-log-likelihood; the "short" case also holds every
single substitution's marginal scores (a DMS).

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
BOS, EOS, MASK = 0, 2, 32


def token_window(t, T, W):
    """ProteinGym's get_optimal_window as compute_fitness.py calls it: t a token index of
    <cls> residues <eos>, T = L + 2 tokens (its argument seq_len_wo_special receives
    len(sequence) + 2), W the model window in tokens. Middle windows span 2 * (W // 2)."""
    h = W // 2
    if T <= W:
        return 0, T
    if t < h:
        return 0, W
    if t >= T - h:
        return T - W, T
    return max(0, t - h), min(T, t + h)


def centred_window(i, L, R):
    """The centred rule: the residues [s, e) that score residue i with a window of R residues."""
    if L <= R:
        return 0, L
    h = R // 2
    if i < h:
        return 0, R
    if i >= L - h:
        return L - R, L
    return max(0, i - h), min(L, i + h)


def context_of(model):
    """Tokens per sequence the checkpoint's positions cover: transformers' ESM numbers positions
    from padding_idx + 1 (create_position_ids_from_input_ids), so 1026 hold 1024 tokens; ESM C's
    rotary positions start at 0 and reserve none."""
    c = model.config
    if c.model_type == "esm":
        return c.max_position_embeddings - c.pad_token_id - 1
    return c.max_position_embeddings


def ids(seq):
    return [ESM2_ALPHABET.index(c) for c in seq]


def forward_log_probs(model, tokens):
    out = model(input_ids=torch.tensor([tokens])).logits
    return torch.log_softmax(out[0].double(), dim=-1)


@torch.no_grad()
def log_probs(model, seq, masked, rule, window):
    """(L, V) log-probabilities per residue: masked one at a time (one forward each, as the
    scripts do), or unmasked."""
    L = len(seq)
    toks = [BOS] + ids(seq) + [EOS]
    T = len(toks)
    if rule == "proteingym":
        if not masked:  # wt-marginals: one pass over every token, whatever its length
            return forward_log_probs(model, toks)[1:-1]
        rows = []
        for t in range(T):  # every token index, <cls> and <eos> too, as ProteinGym's loop
            m = list(toks)
            m[t] = MASK
            a, b = token_window(t, T, window)
            rows.append(forward_log_probs(model, m[a:b])[t - a])
        return torch.stack(rows)[1:-1]  # label_row reads residue idx at token 1 + idx
    rows = []
    for i in range(L):
        s, e = centred_window(i, L, window - 2)
        t = [BOS] + toks[1 + s:1 + e] + [EOS]
        if masked:
            t[i - s + 1] = MASK
        rows.append(forward_log_probs(model, t)[i - s + 1])
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


def pll(model, seq, rule, window):
    lp = log_probs(model, seq, True, rule, window)
    return sum(float(lp[i, ESM2_ALPHABET.index(c)]) for i, c in enumerate(seq))


def pseudo_ppl(model, wt, mutants, offset, rule, window):
    base = pll(model, wt, rule, window)
    out = []
    for m in mutants:
        s = list(wt)
        for _, i, mt in parse(m, offset):
            s[i] = mt
        out.append(pll(model, "".join(s), rule, window) - base)
    return out


def write_case(name, c, rng):
    with open(os.path.join(OUT, f"{name}.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["mutant", "DMS_score", "note"])
        for m in c["mutants"]:
            w.writerow([m, f"{rng.uniform(-3, 1):.4f}", "multi, quoted" if ":" in m else ""])
    with open(os.path.join(OUT, f"{name}.fasta"), "w") as f:
        f.write(f">{name}\n{c['wild_type']}\n")


def substitution(wt, i, off, rng):
    return f"{wt[i]}{i + off}{rng.choice([a for a in AA if a != wt[i]])}"


def multi_mutants(wt, off, rng, n=4):
    out = []
    for _ in range(n):
        pos = sorted(rng.sample(range(len(wt)), rng.choice([2, 3])))
        out.append(":".join(substitution(wt, i, off, rng) for i in pos))
    return out


def main():
    rng = random.Random(5)
    os.makedirs(OUT, exist_ok=True)
    # "short" and "window" draw from one generator in this order, as they always have, so that
    # their files stay as they were.
    cases = {
        "short": {"wild_type": "".join(rng.choice(AA) for _ in range(40)), "offset": 1,
                  "rule": "proteingym", "window": None},
        "window": {"wild_type": "".join(rng.choice(AA) for _ in range(70)), "offset": 101,
                   "rule": "centred", "window": 32},
    }
    for name, c in cases.items():
        wt, off = c["wild_type"], c["offset"]
        L = len(wt)
        picks = [0, 1, L // 2, L - 2, L - 1] + rng.sample(range(L), 6)
        c["mutants"] = [substitution(wt, i, off, rng) for i in picks] + multi_mutants(wt, off, rng)
        write_case(name, c, rng)
    # "long": 100 residues (102 tokens) past contexts of 64 (ESM-2) and 63 (ESM C, an odd window
    # whose middle windows span 62): singles at both ends, the middle, and either side of each
    # window's switch from the clamped ends to the sliding middle (token t = h - 1 | h and
    # T - h - 1 | T - h for h = 31, 32).
    rng = random.Random(11)
    wt = "".join(rng.choice(AA) for _ in range(100))
    L, T = len(wt), len(wt) + 2
    c = {"wild_type": wt, "offset": 1, "rule": "proteingym", "window": None,
         "checkpoint_config": {"esm2_tiny": {"max_position_embeddings": 66},
                               "esmc_tiny": {"max_position_embeddings": 63}}}
    picks = [0, 1, L // 2, L - 2, L - 1]
    for h in (31, 32):
        picks += [h - 2, h - 1, T - h - 2, T - h - 1]  # residue idx = token - 1
    picks = sorted(set(picks)) + rng.sample(range(L), 4)
    c["mutants"] = [substitution(wt, i, 1, rng) for i in picks] + multi_mutants(wt, 1, rng)
    write_case("long", c, rng)
    cases["long"] = c

    expected = {"generator": f"tools/reference/make_score_fixtures.py (transformers "
                             f"{__import__('transformers').__version__}, torch {torch.__version__})",
                "cases": cases, "models": {}}
    for model_name, cls in (("esm2_tiny", EsmForMaskedLM), ("esmc_tiny", EsmcForMaskedLM)):
        res = {}
        for name, c in cases.items():
            overrides = c.get("checkpoint_config", {}).get(model_name, {})
            model = cls.from_pretrained(os.path.join(FIX, model_name), **overrides).eval()
            model.float()
            wt, off, rule = c["wild_type"], c["offset"], c["rule"]
            win = c["window"] if c["window"] is not None else context_of(model)
            mm = log_probs(model, wt, True, rule, win)
            wm = log_probs(model, wt, False, rule, win)
            r = {"window": win,
                 "masked_marginals": marginal(mm, c["mutants"], off),
                 "wt_marginals": marginal(wm, c["mutants"], off),
                 "pseudo_ppl": pseudo_ppl(model, wt, c["mutants"], off, rule, win),
                 "pll_wild_type": pll(model, wt, rule, win)}
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
