#!/usr/bin/env python3
"""The Python package against the CLI and against transformers: embedding 64 mixed-length
sequences (lm_bench's mixed_64_lognormal300 set) at ESM-2 650M's shapes (random weights), fp32,
same machine, same threads.

    PYTHONPATH=build/python .venv-reference/bin/python bench/python_bench.py [--threads 2]
        [--repeat 2] [--out bench/results/python_cpu.json]

Sides: `bioinfer bench embed` (the CLI's compute time: forward passes only, its own process),
then one Python process that loads `bioinfer.load(...)` and transformers' `EsmModel` side by
side and alternates their passes (bioinfer's `model.embed(seqs)` returning the mean embeddings as
NumPy arrays; transformers in length-sorted batches of up to 4096 padded tokens, its best). Each
side warms up on the first 4 records; the fastest of --repeat passes counts. Reported: the
Python call's time over the CLI's compute time (the API's overhead), and bioinfer's speedup over
transformers from Python and from the CLI.

--overhead-rounds N (with --out) runs only the overhead: N rounds of one CLI pass then one Python
pass (bioinfer alone in the Python process), each round's ratio and their median.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "reference"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lm_bench import (hf_batches, machine_info, make_model, make_sets, peak_rss_mb,  # noqa: E402
                      write_json)

SET = "mixed_64_lognormal300"


def python_worker(model_dir, fasta, threads, repeat, with_transformers=True):
    """bioinfer from Python and transformers' EsmModel in this one process, passes alternating;
    without transformers, torch is not imported (its OpenMP runtime stays out of the process)."""
    import bioinfer

    seqs = [l.strip() for l in open(fasta) if l.strip() and not l.startswith(">")]
    tokens = sum(len(s) + 2 for s in seqs)
    model = bioinfer.load(model_dir, threads=threads)

    def run_bioinfer(part):
        t0 = time.perf_counter()
        results = model.embed(part, include=("mean",))
        assert len(results) == len(part)
        return time.perf_counter() - t0

    if with_transformers:
        import torch
        from transformers import EsmModel, EsmTokenizer

        torch.set_num_threads(threads)
        tok = EsmTokenizer(os.path.join(model_dir, "vocab.txt"))
        hf = EsmModel.from_pretrained(model_dir, add_pooling_layer=False, dtype=torch.float32).eval()
        encoded = []
        for batch in hf_batches(seqs, "sorted"):
            enc = tok([seqs[i] for i in batch], padding=True, return_tensors="pt")
            encoded.append((enc["input_ids"], enc["attention_mask"]))

        def run_hf(batches):
            t0 = time.perf_counter()
            with torch.inference_mode():
                for ids, am in batches:
                    hf(input_ids=ids, attention_mask=am).last_hidden_state
            return time.perf_counter() - t0

    run_bioinfer(seqs[:4])
    if with_transformers:
        run_hf([encoded[-1]])
    py, ref = [], []
    for _ in range(repeat):
        py.append(run_bioinfer(seqs))
        if with_transformers:
            ref.append(run_hf(encoded))
    print(json.dumps({"python_seconds": min(py), "python_runs": py,
                      "transformers_seconds": min(ref) if ref else None, "transformers_runs": ref,
                      "tokens": tokens, "sequences": len(seqs), "threads": threads,
                      "peak_rss_mb": peak_rss_mb()}))


def make_inputs(tmp):
    """The benchmark's FASTA and random 650M checkpoint under `tmp`: (fasta, model_dir)."""
    fasta = os.path.join(tmp, SET + ".fasta")
    with open(fasta, "w") as f:
        for i, s in enumerate(make_sets()[SET]):
            f.write(f">s{i}\n{s}\n")
    mdir = os.path.join(tmp, "esm2_650M")
    make_model("esm2_650M", mdir)
    return fasta, mdir


def last_json(cmd):
    """The last stdout line of a command, as JSON."""
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def cli_pass(args, fasta, mdir, repeat):
    return last_json([args.bin, "bench", "embed", fasta, "--weights", mdir, "--threads",
                      str(args.threads), "--repeat", str(repeat), "--warmup-records", "4"])


def python_pass(args, fasta, mdir, repeat, transformers=True):
    return last_json([sys.executable, __file__, "--python-worker", mdir, fasta, "--threads",
                      str(args.threads), "--repeat", str(repeat)]
                     + ([] if transformers else ["--no-transformers"]))


def overhead(args):
    """One CLI pass, then one Python pass, args.overhead_rounds times: each round's ratio and the
    median (a slow spell of a shared machine hits both sides of a round alike)."""
    rounds = []
    with tempfile.TemporaryDirectory() as tmp:
        fasta, mdir = make_inputs(tmp)
        for _ in range(args.overhead_rounds):
            c = cli_pass(args, fasta, mdir, 1)
            p = python_pass(args, fasta, mdir, 1, transformers=False)
            rounds.append({"cli_seconds": c["seconds"], "python_seconds": p["python_seconds"],
                           "ratio": p["python_seconds"] / c["seconds"]})
            print(json.dumps(rounds[-1]), file=sys.stderr)
    ratios = sorted(r["ratio"] for r in rounds)
    n = len(ratios)
    write_json(args.out, {
        "bench": "python_overhead_cpu",
        "command": "PYTHONPATH=build/python .venv-reference/bin/python " +
                   " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
        "machine": machine_info(args.threads),
        "model": "ESM-2 650M shapes, random weights, fp32", "set": SET, "rounds": rounds,
        "python_over_cli_time_median": ratios[n // 2] if n % 2 else 0.5 * (ratios[n // 2 - 1] + ratios[n // 2])})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bioinfer"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "python_cpu.json"))
    ap.add_argument("--overhead-rounds", type=int, default=0,
                    help="instead: N rounds of one CLI pass then one Python pass (bioinfer only), "
                         "their ratios and median (the Python call's overhead on a noisy machine)")
    ap.add_argument("--python-worker", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--no-transformers", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.python_worker:
        python_worker(args.python_worker[0], args.python_worker[1], args.threads, args.repeat,
                      not args.no_transformers)
        return
    if args.overhead_rounds:
        overhead(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        fasta, mdir = make_inputs(tmp)
        cli = cli_pass(args, fasta, mdir, args.repeat)
        print(json.dumps(cli), file=sys.stderr)
        py = python_pass(args, fasta, mdir, args.repeat)
        print(json.dumps(py), file=sys.stderr)
    cli_seconds = cli["tokens"] / cli["tokens_per_s"]
    import torch
    import transformers
    doc = {"bench": "python_cpu",
           "command": "PYTHONPATH=build/python .venv-reference/bin/python " +
                      " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
           "machine": machine_info(args.threads),
           "model": "ESM-2 650M shapes, random weights, fp32",
           "set": SET,
           "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
           "cli": cli, "python": py,
           "python_over_cli_time": py["python_seconds"] / cli_seconds,
           "speedup_vs_transformers_python": py["transformers_seconds"] / py["python_seconds"],
           "speedup_vs_transformers_cli": py["transformers_seconds"] / cli_seconds}
    write_json(args.out, doc)
    print(json.dumps({k: doc[k] for k in ("python_over_cli_time", "speedup_vs_transformers_python",
                                          "speedup_vs_transformers_cli")}), file=sys.stderr)


if __name__ == "__main__":
    main()
