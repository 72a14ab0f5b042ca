#!/usr/bin/env python3
"""Variant-effect scoring speed: a full deep mutational scan (every single substitution, masked
marginals) of one protein, bioinfer `score --dms` against the esm repository's variant-prediction
approach on transformers (one forward per masked position, batch of one, log_softmax, then a
lookup per substitution), same machine, same run, same threads, random weights at ESM-2 650M's
shapes.

    .venv-reference/bin/python bench/score_bench.py [--length 300] [--threads 2]
        [--precisions fp32,bf16,int8] [--out bench/results/score_cpu.json]

Each side runs in its own process; the time counted is the scoring (model load excluded, as
bioinfer's summary reports it). Every bioinfer precision's scores are held against bioinfer's
fp32 scores (Spearman's rho, the bar for "the fastest precision that keeps rho >= 0.99") and
bioinfer's fp32 against transformers' (max-abs difference).
"""
import argparse
import csv
import json
import os
import random
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lm_bench import MODELS, machine_info, make_model, peak_rss_mb, write_json  # noqa: E402

AA = "ACDEFGHIKLMNPQRSTVWY"


def hf_worker(model_dir, fasta, threads, out_csv):
    """The esm script's masked marginals: for each position, one masked forward (batch of one)."""
    import torch
    from transformers import EsmForMaskedLM

    torch.set_num_threads(threads)
    seq = [l.strip() for l in open(fasta) if l.strip() and not l.startswith(">")][0]
    alphabet = ["<cls>", "<pad>", "<eos>", "<unk>", "L", "A", "G", "V", "S", "E", "R", "T", "I",
                "D", "P", "K", "Q", "N", "F", "Y", "M", "H", "W", "C", "X", "B", "U", "Z", "O",
                ".", "-", "<null_1>", "<mask>"]
    model = EsmForMaskedLM.from_pretrained(model_dir).eval()
    tokens = torch.tensor([[0] + [alphabet.index(c) for c in seq] + [2]])
    t0 = time.perf_counter()
    rows = []
    with torch.inference_mode():
        for i in range(1, tokens.shape[1] - 1):
            masked = tokens.clone()
            masked[0, i] = 32
            rows.append(torch.log_softmax(model(input_ids=masked).logits, dim=-1)[0, i])
        lp = torch.stack(rows)
        scores = []
        for i, wt in enumerate(seq):
            for mt in AA:
                if mt != wt:
                    scores.append((f"{wt}{i + 1}{mt}",
                                   float(lp[i, alphabet.index(mt)] - lp[i, alphabet.index(wt)])))
    seconds = time.perf_counter() - t0
    with open(out_csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["mutant", "masked_marginals"])
        w.writerows(scores)
    print(json.dumps({"impl": "transformers", "approach": "esm variant-prediction script "
                      "(one masked forward per position, batch of one)", "precision": "fp32",
                      "threads": torch.get_num_threads(), "passes": len(seq),
                      "seconds": seconds, "peak_rss_mb": peak_rss_mb()}))


def read_scores(path):
    with open(path) as f:
        r = csv.DictReader(f)
        return {row["mutant"]: float(row["masked_marginals"]) for row in r}


def spearman(a, b):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(v):
            j = i
            while j + 1 < len(v) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2 + 1
            i = j + 1
        return r
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    return cov / (va * vb) ** 0.5


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--length", type=int, default=300)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precisions", default="fp32,bf16,int8")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bioinfer"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "score_cpu.json"))
    ap.add_argument("--hf-worker", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.hf_worker:
        w = args.hf_worker
        hf_worker(w[0], w[1], int(w[2]), w[3])
        return
    rng = random.Random(0)
    seq = "".join(rng.choice(AA) for _ in range(args.length))
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        fasta = os.path.join(tmp, "wt.fasta")
        with open(fasta, "w") as f:
            f.write(f">wt\n{seq}\n")
        mdir = os.path.join(tmp, "esm2_650M")
        make_model("esm2_650M", mdir)
        hf_csv = os.path.join(tmp, "hf.csv")
        p = subprocess.run([sys.executable, __file__, "--hf-worker", mdir, fasta, str(args.threads),
                            hf_csv], capture_output=True, text=True, check=True)
        rows["transformers"] = json.loads(p.stdout.strip().splitlines()[-1])
        print(f"transformers fp32: {rows['transformers']['seconds']:.1f} s", flush=True)
        hf = read_scores(hf_csv)
        scores = {}
        for precision in args.precisions.split(","):
            out = os.path.join(tmp, f"{precision}.csv")
            t0 = time.perf_counter()
            subprocess.run([args.bin, "score", fasta, "--weights", mdir, "--dms", "--out", out,
                            "--precision", precision, "--threads", str(args.threads), "--quiet"],
                           check=True)
            wall = time.perf_counter() - t0
            summary = json.load(open(out + ".json"))
            scores[precision] = read_scores(out)
            rows[f"bioinfer_{precision}"] = {"impl": "bioinfer", "precision": precision,
                                             "threads": args.threads,
                                             "seconds": summary["seconds_scoring"],
                                             "seconds_with_load": wall,
                                             "passes": summary["passes"]}
            print(f"bioinfer {precision}: {summary['seconds_scoring']:.1f} s", flush=True)
    keys = sorted(hf)
    fp32 = [scores["fp32"][k] for k in keys] if "fp32" in scores else None
    for precision, sc in scores.items():
        row = rows[f"bioinfer_{precision}"]
        row["speedup_vs_transformers"] = rows["transformers"]["seconds"] / row["seconds"]
        if fp32:
            row["spearman_vs_bioinfer_fp32"] = spearman([sc[k] for k in keys], fp32)
        row["max_abs_vs_transformers"] = max(abs(sc[k] - hf[k]) for k in keys)
        print(f"{precision}: {row['speedup_vs_transformers']:.2f}x, rho vs fp32 "
              f"{row.get('spearman_vs_bioinfer_fp32', float('nan')):.4f}, max-abs vs transformers "
              f"{row['max_abs_vs_transformers']:.3g}", flush=True)
    write_json(args.out, {
        "benchmark": "deep mutational scan, masked marginals, ESM-2 650M shapes (random weights)",
        "command": "bench/score_bench.py " + " ".join(sys.argv[1:]),
        "machine": machine_info(args.threads),
        "date": time.strftime("%Y-%m-%d"),
        "length": args.length, "mutants": len(keys),
        "rows": rows,
    })
    print("wrote", args.out)


if __name__ == "__main__":
    main()
