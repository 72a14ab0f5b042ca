#!/usr/bin/env python3
"""--workers on many small inputs: one worker on every core against N workers splitting them,
for `bioinfer embed` (ESM-2 650M shapes) and `bioinfer predict` (ESMFold's shapes), random
weights in the real checkpoint layouts, same machine, same run, same total threads.

    .venv-reference/bin/python bench/workers_bench.py [--threads 2] [--workers 1,2] [--rounds 2]
        [--jobs embed,predict] [--model-dir DIR]

Each run is the real command on a FASTA file of short sequences (embed: --embed-records records
of 40-160 residues; predict: 4 targets of 48 residues, the default 4 trunk passes). The job time is
results.json's runtime_s (weights loading excluded: it is paid once either way); the worker
counts alternate for --rounds rounds and the fastest run of each counts. Writes
bench/results/workers_cpu.json.
"""
import argparse
import json
import os
import platform
import random
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tools", "reference"))
from lm_bench import write_json  # noqa: E402
AA = "LAGVSERTIDPKQNFYMHWC"


def fasta(path, n, lo, hi, seed):
    rng = random.Random(seed)
    with open(path, "w") as f:
        for i in range(n):
            f.write(f">r{i}\n{''.join(rng.choice(AA) for _ in range(rng.randint(lo, hi)))}\n")
    return path


def add_common_args(ap, out_name):
    """--model-dir (the random checkpoints, kept between runs), --bin and --out."""
    ap.add_argument("--model-dir", default=os.path.join(tempfile.gettempdir(), "bioinfer_bench_models"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bioinfer"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", out_name))


def save(doc, path):
    """Writes the results JSON under a temporary name, then renames it into place."""
    write_json(path, doc)


def run(cmd, out_dir):
    t0 = time.perf_counter()
    subprocess.run(cmd + ["--out-dir", out_dir, "--override", "--quiet"], check=True)
    wall = time.perf_counter() - t0
    res = json.load(open(os.path.join(out_dir, "results.json")))
    assert res["counts"]["failed"] == 0, res
    return {"job_s": res["runtime_s"], "wall_s": wall}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--jobs", default="embed,predict")
    ap.add_argument("--embed-records", type=int, default=96)
    add_common_args(ap, "workers_cpu.json")
    args = ap.parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    work = tempfile.mkdtemp(prefix="bioinfer_workers_")
    jobs = {}
    if "embed" in args.jobs:
        import lm_bench
        m = os.path.join(args.model_dir, "esm2_650M")
        if not os.path.exists(os.path.join(m, "model.safetensors")):
            lm_bench.make_model("esm2_650M", m)
        n = args.embed_records
        jobs["embed"] = ([args.bin, "embed", fasta(os.path.join(work, "embed.fa"), n, 40, 160, 1), "--weights", m,
                          "--include", "mean"], f"{n} sequences of 40-160 aa, ESM-2 650M shapes, fp32")
    if "predict" in args.jobs:
        import fold_bench
        m = fold_bench.make_checkpoint(os.path.join(args.model_dir, "esmfold_3B"))
        jobs["predict"] = ([args.bin, "predict", fasta(os.path.join(work, "fold.fa"), 4, 48, 48, 2), "--weights", m],
                           "4 targets of 48 aa, ESMFold shapes (3B stem), 4 trunk passes, fp32")
    rows = []
    for name, (cmd, what) in jobs.items():
        best = {}
        for r in range(args.rounds):
            for w in (workers if r % 2 == 0 else workers[::-1]):
                t = run(cmd + ["--threads", str(args.threads), "--workers", str(w)], os.path.join(work, f"{name}_{w}"))
                print(f"{name} workers={w} round={r}: job {t['job_s']:.1f} s, wall {t['wall_s']:.1f} s", flush=True)
                if w not in best or t["job_s"] < best[w]["job_s"]:
                    best[w] = t
        base = best[workers[0]]["job_s"]
        for w in workers:
            rows.append({"job": name, "inputs": what, "threads": args.threads, "workers": w,
                         "threads_per_worker": max(1, args.threads // w), **best[w],
                         "speedup_vs_1_worker": base / best[w]["job_s"]})
    doc = {"bench": "workers_cpu",
           "command": shlex.join([".venv-reference/bin/python", "bench/workers_bench.py"] + sys.argv[1:]),
           "machine": {"cpu_model": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                                          if l.startswith("model name")), platform.machine()),
                       "cores": os.cpu_count()},
           "date": time.strftime("%Y-%m-%d"), "rounds": args.rounds, "rows": rows}
    save(doc, args.out)
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
