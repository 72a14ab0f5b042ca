#!/usr/bin/env python3
"""Before/after a change: two bioinfer binaries on the same machine, in one run, alternating.

    .venv-reference/bin/python bench/ab_bench.py --before OLD/bioinfer [--after build/bioinfer]
        [--rounds 2] [--jobs outputs,embed,fold] [--models esm2_650M,esmc_600M]
        [--fold-lengths 64,128] [--threads 2] [--out bench/results/ab.json]

outputs: embed (ESM-2 and ESM C fixtures; npz and h5; every array) and predict (the ESMFold
fixture; PDB with PAE and plot, mmCIF) with each binary, every output file compared: byte for
byte, JSON files with their run times removed. No torch needed for this part.
embed: `bioinfer bench embed` on 8 random sequences of 256 residues (fp32, the warm pass excluded,
the fastest of --repeat passes) with random weights at the real shapes (lm_bench.make_model).
fold: `bioinfer bench fold` at ESMFold's shapes (ESM-2 3B stem, 48 trunk blocks;
fold_bench.make_checkpoint) on one random target per length.
The two binaries alternate within each round (the order flips every round) and the best of the
rounds counts; the ratio is after / before (above 1: the change is faster).
"""
import argparse
import filecmp
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tools", "reference"))
from lm_bench import write_json  # noqa: E402
FIX = os.path.join(ROOT, "tests", "fixtures")
EXAMPLE = os.path.join(ROOT, "examples", "proteins.fasta")


def machine(threads):
    info = {}
    for line in open("/proc/cpuinfo"):
        k, _, v = line.partition(":")
        k = k.strip()
        if k in ("model name", "flags") and k not in info:
            info[k] = v.strip()
    flags = info.get("flags", "").split()
    isa = [f for f in flags if f.startswith(("avx", "amx", "fma", "f16c"))]
    return {"cpu_model": info.get("model name", platform.machine()), "isa_flags": sorted(isa),
            "cores": os.cpu_count(), "threads": threads}


# --- outputs ---

def output_commands(binary, out):
    cmds = []
    for m in ("esm2_tiny", "esm2_tiny_hd12"):
        cmds.append([binary, "embed", EXAMPLE, "--weights", os.path.join(FIX, m), "--out-dir",
                     os.path.join(out, m), "--include", "mean,per_tok,bos,contacts,logits",
                     "--repr-layers", "0,1,-1"])
    for m in ("esmc_tiny", "esmc_tiny_hd10", "esmc_tiny_pth"):
        cmds.append([binary, "embed", EXAMPLE, "--weights", os.path.join(FIX, m), "--out-dir",
                     os.path.join(out, m), "--include", "mean,per_tok,logits"])
    cmds.append([binary, "embed", EXAMPLE, "--weights", os.path.join(FIX, "esm2_tiny"), "--out-dir",
                 os.path.join(out, "esm2_h5"), "--format", "h5", "--include", "mean,per_tok"])
    cmds.append([binary, "predict", EXAMPLE, "--weights", os.path.join(FIX, "esmfold_tiny"),
                 "--out-dir", os.path.join(out, "fold_pdb"), "--write-pae"])
    cmds.append([binary, "predict", EXAMPLE, "--weights", os.path.join(FIX, "esmfold_tiny"),
                 "--out-dir", os.path.join(out, "fold_cif"), "--output-format", "cif",
                 "--num-recycles", "1"])
    return cmds


def strip_times(x):
    if isinstance(x, dict):
        return {k: strip_times(v) for k, v in x.items()
                if "runtime" not in k and "seconds" not in k and not k.endswith("_s")}
    if isinstance(x, list):
        return [strip_times(v) for v in x]
    return x


def same_file(a, b):
    if a.endswith(".json"):
        return strip_times(json.load(open(a))) == strip_times(json.load(open(b)))
    if a.endswith(".jsonl"):
        return [strip_times(json.loads(l)) for l in open(a)] == [strip_times(json.loads(l)) for l in open(b)]
    return filecmp.cmp(a, b, shallow=False)


def compare_outputs(before, after, work):
    outs = {}
    for side, binary in (("before", before), ("after", after)):
        outs[side] = os.path.join(work, "outputs_" + side)
        for cmd in output_commands(binary, outs[side]):
            subprocess.run(cmd + ["--quiet"], check=True, capture_output=True)
    files, differ = 0, []
    for root, _, names in os.walk(outs["before"]):
        for n in sorted(names):
            a = os.path.join(root, n)
            rel = os.path.relpath(a, outs["before"])
            b = os.path.join(outs["after"], rel)
            files += 1
            if not os.path.exists(b) or not same_file(a, b):
                differ.append(rel)
    after_files = sum(len(n) for _, _, n in os.walk(outs["after"]))
    return {"commands": [shlex.join(["bioinfer"] + c[1:]).replace(ROOT + "/", "")
                         for c in output_commands("bioinfer", "OUT")],
            "files": files, "files_after": after_files, "differ": differ,
            "identical": not differ and files == after_files}


# --- speed ---

def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{shlex.join(cmd)} failed: {p.stderr.strip()[-500:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def alternate(rounds, sides, run):
    """Runs run(side) for each side, the order flipped every round; all results per side."""
    res = {s: [] for s in sides}
    for r in range(rounds):
        for s in (sides if r % 2 == 0 else sides[::-1]):
            res[s].append(run(s))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True, help="the binary before the change")
    ap.add_argument("--after", default=os.path.join(ROOT, "build", "bioinfer"))
    ap.add_argument("--jobs", default="outputs,embed,fold")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--models", default="esm2_650M,esmc_600M")
    ap.add_argument("--fold-lengths", default="64,128")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "bioinfer_ab"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "ab.json"))
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    bins = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    sides = ["before", "after"]
    # The command as typed in a checkout: the before binary and the scratch folder are this
    # machine's paths, so the first is named generically and the second left out.
    argv = list(sys.argv[1:])
    for flag, generic in (("--before", "BEFORE/build/bioinfer"), ("--workdir", None)):
        if flag in argv and argv.index(flag) + 1 < len(argv):
            i = argv.index(flag)
            if generic:
                argv[i + 1] = generic
            else:
                del argv[i:i + 2]
    doc = {"bench": "ab", "command": shlex.join([".venv-reference/bin/python", "bench/ab_bench.py"] + argv),
           "machine": machine(args.threads), "date": time.strftime("%Y-%m-%d"),
           "rounds": args.rounds, "rows": []}
    jobs = args.jobs.split(",")

    def save():
        write_json(args.out, doc)

    if "outputs" in jobs:
        doc["outputs"] = compare_outputs(bins["before"], bins["after"], args.workdir)
        print(f"outputs: {doc['outputs']['files']} files, {len(doc['outputs']['differ'])} differ", flush=True)
        save()
    if "embed" in jobs:
        import lm_bench
        seqs = lm_bench.make_sets()["uniform_8x256"]
        fasta = os.path.join(args.workdir, "uniform_8x256.fasta")
        with open(fasta, "w") as f:
            f.writelines(f">s{i}\n{s}\n" for i, s in enumerate(seqs))
        for model in args.models.split(","):
            mdir = os.path.join(args.workdir, model)
            if not os.path.exists(os.path.join(mdir, "config.json")):
                lm_bench.make_model(model, mdir)
            res = alternate(args.rounds, sides, lambda s: run_json(
                [bins[s], "bench", "embed", fasta, "--weights", mdir, "--threads", str(args.threads),
                 "--repeat", str(args.repeat), "--warmup-records", "8"]))
            best = {s: max(r["tokens_per_s"] for r in res[s]) for s in sides}
            row = {"job": "embed", "model": model, "set": "uniform_8x256", "precision": "fp32",
                   "tokens_per_s": best, "ratio_after_over_before": best["after"] / best["before"],
                   "by_round": {s: [r["tokens_per_s"] for r in res[s]] for s in sides}}
            print(json.dumps(row), flush=True)
            doc["rows"].append(row)
            save()
    if "fold" in jobs:
        import fold_bench
        mdir = fold_bench.make_checkpoint(os.path.join(args.workdir, "esmfold_3B"))
        for length in [int(x) for x in args.fold_lengths.split(",")]:
            res = alternate(args.rounds, sides, lambda s: fold_bench.bioinfer_run(
                bins[s], mdir, length, args.threads, 1, -1, args.workdir))
            best = {s: min(r["seconds"] for r in res[s]) for s in sides}
            row = {"job": "fold", "model": "esmfold (3B stem, 48 blocks)", "length": length,
                   "seconds": best, "ratio_after_over_before": best["before"] / best["after"],
                   "stages_s": {s: min(res[s], key=lambda r: r["seconds"]).get("stages_s") for s in sides},
                   "by_round": {s: [r["seconds"] for r in res[s]] for s in sides}}
            print(json.dumps(row), flush=True)
            doc["rows"].append(row)
            save()
    save()


if __name__ == "__main__":
    main()
