#!/usr/bin/env python3
"""Scaling over processes: one `bioinfer embed` on every core against N MPI ranks (mpirun -n N,
each rank one shard with cores/N threads), then `bioinfer merge`, on random ESM-2 650M weights in
the real layout (mpirun --bind-to none: OpenMPI otherwise pins each rank to one core, and a rank's
threads then share it). Records wall time (weights loading included: every rank loads its own copy),
the merged output's identity to the single run, and the shards' balance.

    .venv-reference/bin/python bench/scale_bench.py [--threads 2] [--ranks 1,2] [--records 96]

Writes bench/results/scale_cpu.json.
"""
import argparse
import filecmp
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import workers_bench  # noqa: E402  (the same random sequences and checkpoint)


def same_tree(a, b):
    c = filecmp.dircmp(a, b)
    if c.left_only or c.right_only or c.diff_files:
        return False
    return all(same_tree(os.path.join(a, d), os.path.join(b, d)) for d in c.common_dirs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--records", type=int, default=96)
    workers_bench.add_common_args(ap, "scale_cpu.json")
    args = ap.parse_args()
    import lm_bench
    model = os.path.join(args.model_dir, "esm2_650M")
    if not os.path.exists(os.path.join(model, "model.safetensors")):
        lm_bench.make_model("esm2_650M", model)
    work = tempfile.mkdtemp(prefix="bioinfer_scale_")
    fasta = workers_bench.fasta(os.path.join(work, "in.fa"), args.records, 40, 160, 1)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    rows, merged = [], {}
    for n in [int(r) for r in args.ranks.split(",")]:
        out = os.path.join(work, f"out{n}")
        cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-n", str(n), args.bin, "embed", fasta, "--weights", model,
               "--include", "mean", "--threads", str(max(1, args.threads // n)), "--quiet", "--out-dir", out]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, env=env)
        wall = time.perf_counter() - t0
        merged[n] = os.path.join(work, f"merged{n}")
        subprocess.run([args.bin, "merge", out, "--out-dir", merged[n], "--quiet"], check=True)
        shards = []
        for d in sorted(os.listdir(out)) if n > 1 else ["."]:
            res = json.load(open(os.path.join(out, d, "results.json")))
            shards.append({"records": res["counts"]["total"], "job_s": res["runtime_s"]})
        rows.append({"ranks": n, "threads_per_rank": max(1, args.threads // n), "wall_s": wall, "shards": shards})
        print(json.dumps(rows[-1]), flush=True)
    base = rows[0]["wall_s"]
    for r in rows:
        r["speedup_vs_first"] = base / r["wall_s"]
        r["merged_identical_to_first"] = same_tree(merged[rows[0]["ranks"]], merged[r["ranks"]])
    doc = {"bench": "scale_cpu",
           "command": shlex.join([".venv-reference/bin/python", "bench/scale_bench.py"] + sys.argv[1:]),
           "inputs": f"{args.records} sequences of 40-160 aa, ESM-2 650M shapes, fp32, mean embeddings",
           "cores": os.cpu_count(), "date": time.strftime("%Y-%m-%d"), "rows": rows}
    workers_bench.save(doc, args.out)
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
