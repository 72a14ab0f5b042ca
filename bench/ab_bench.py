#!/usr/bin/env python3
"""Before/after a change: two bioinfer binaries on the same machine, in one run, alternating.

    .venv-reference/bin/python bench/ab_bench.py --before OLD/bioinfer [--after build/bioinfer]
        [--rounds 2] [--jobs outputs,embed,fold,structure] [--outputs NAME,...] [--models esm2_650M,esmc_600M]
        [--fold-lengths 64,128] [--threads 2] [--out bench/results/ab.json]

outputs: every output file of each binary compared, byte for byte (JSON files without their run
times; for an .npz file that differs, which arrays), per output (bench/ab_bench.py output_runs):
embed (ESM-2 and ESM C fixtures; npz and h5; every array); predict with ESMFold (PDB with PAE
and plot, mmCIF), with Boltz-2 (the tiny fixture: examples/boltz2's complex, ligands, affinity
and PDB template; mmCIF templates; bond, pocket and contact constraints; affinity with the
weight correction; --use-potentials) and with ESMFold2 (a3m MSAs from --msa-dir, samples, PAE;
the legacy checkpoint); score (every strategy, windows, a DMS; embed's PLL); `weights`; and the
Python API (bench/ab_python.py, run with the Python module beside each binary:
BUILD/python, with the interpreter of BUILD/CMakeCache.txt). Every input is the repository's.
A command that fails with one binary and not the other is a difference. --outputs NAME,...
runs some of them. No torch needed for this part.
embed: `bioinfer bench embed` on 8 random sequences of 256 residues (fp32, the warm pass excluded,
the fastest of --repeat passes) with random weights at the real shapes (lm_bench.make_model).
fold: `bioinfer bench fold` at ESMFold's shapes (ESM-2 3B stem, 48 trunk blocks;
fold_bench.make_checkpoint) on one random target per length.
structure: one fold with each structure model at its released shapes, random weights, as
`bioinfer predict` runs it (the model loaded, a warm-up target, then the timed target; the
target's runtime_s from results.json): Boltz-2 (boltz2_bench.make_assets: 64 pairformer blocks)
on one 64-residue protein, 0 recycling steps, 10 sampling steps; ESMFold2 (esmfold2_bench's
600M tower) on one 64-residue protein, 1 loop, 10 sampling steps.
The two binaries alternate within each round (the order flips every round) and the best of the
rounds counts; the ratio is after / before (above 1: the change is faster).
"""
import argparse
import filecmp
import json
import os
import platform
import shlex
import shutil
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

BOLTZ2 = os.path.join(FIX, "boltz2_tiny")
BOLTZ2_IN = os.path.join(BOLTZ2, "inputs")
# Boltz-2's quick settings: the numbers mean nothing with the tiny random weights, the code paths
# and the bytes they write do.
BOLTZ2_FAST = ["--weights", BOLTZ2, "--sampling_steps", "3", "--recycling_steps", "0"]
BOLTZ2_AFFINITY = ["--sampling_steps_affinity", "2", "--diffusion_samples_affinity", "2"]
ESMFOLD2 = ["--weights", os.path.join(FIX, "esmfold2_tiny"), "--sampling-steps", "8",
            "--num-recycles", "1"]
SCORE = os.path.join(FIX, "score")


def output_runs():
    """Every output the job compares: (name, commands). A command is an argv list in which BIN
    stands for the binary under test and OUT/... for a path in the output's folder; a command
    given as (argv, FILE) has its standard output written to OUT/FILE. PYTHON runs
    bench/ab_python.py with the build's Python module."""
    runs = []
    for m in ("esm2_tiny", "esm2_tiny_hd12"):
        runs.append((m, [["BIN", "embed", EXAMPLE, "--weights", os.path.join(FIX, m), "--out-dir",
                          "OUT", "--include", "mean,per_tok,bos,contacts,logits",
                          "--repr-layers", "0,1,-1"]]))
    for m in ("esmc_tiny", "esmc_tiny_hd10", "esmc_tiny_pth"):
        runs.append((m, [["BIN", "embed", EXAMPLE, "--weights", os.path.join(FIX, m), "--out-dir",
                          "OUT", "--include", "mean,per_tok,logits"]]))
    runs.append(("esm2_h5", [["BIN", "embed", EXAMPLE, "--weights", os.path.join(FIX, "esm2_tiny"),
                              "--out-dir", "OUT", "--format", "h5", "--include", "mean,per_tok"]]))
    runs.append(("fold_pdb", [["BIN", "predict", EXAMPLE, "--weights", os.path.join(FIX, "esmfold_tiny"),
                               "--out-dir", "OUT", "--write-pae"]]))
    runs.append(("fold_cif", [["BIN", "predict", EXAMPLE, "--weights", os.path.join(FIX, "esmfold_tiny"),
                               "--out-dir", "OUT", "--output-format", "cif", "--num-recycles", "1"]]))
    # Boltz-2. examples/boltz2: a protein-RNA complex with an a3m MSA, a protein with a modified
    # residue, a SMILES and a CCD ligand, a pocket and an affinity binder, and a protein templated
    # by a PDB file (force); two samples each, PDB files.
    runs.append(("boltz2_examples", [["BIN", "predict", os.path.join(ROOT, "examples", "boltz2")]
                                     + BOLTZ2_FAST + BOLTZ2_AFFINITY
                                     + ["--diffusion_samples", "2", "--output_format", "pdb",
                                        "--out_dir", "OUT"]]))
    # mmCIF templates: two files, chain ids mapped, force and threshold
    runs.append(("boltz2_templates", [["BIN", "predict", os.path.join(BOLTZ2_IN, "template", "template.yaml")]
                                      + BOLTZ2_FAST + ["--out_dir", "OUT"]]))
    # bond, pocket and contact constraints (forced), a modified residue, a SMILES ligand
    runs.append(("boltz2_constraints", [["BIN", "predict", os.path.join(BOLTZ2_IN, "constrained", "constrained.yaml")]
                                        + BOLTZ2_FAST + ["--out_dir", "OUT"]]))
    # the affinity stage with the molecular-weight correction (examples/boltz2 runs it without)
    runs.append(("boltz2_affinity", [["BIN", "predict", os.path.join(ROOT, "examples", "boltz2", "protein_ligand.yaml")]
                                     + BOLTZ2_FAST + BOLTZ2_AFFINITY
                                     + ["--affinity_mw_correction", "--seed", "5", "--out_dir", "OUT"]]))
    # the steering potentials: ligand geometry, and the constraints' potentials
    runs.append(("boltz2_potentials", [
        ["BIN", "predict", os.path.join(BOLTZ2_IN, "protein_ligand", "protein_ligand.yaml"), "--weights", BOLTZ2,
         "--sampling_steps", "10", "--recycling_steps", "0", "--use-potentials", "--output_format", "pdb",
         "--out_dir", "OUT/ligand"],
        ["BIN", "predict", os.path.join(BOLTZ2_IN, "constrained", "constrained.yaml"), "--weights", BOLTZ2,
         "--sampling_steps", "10", "--recycling_steps", "0", "--use_potentials", "--out_dir", "OUT/constrained"]]))
    # ESMFold2: a3m MSAs from --msa-dir (one chain; the second chain of a dimer, rows paired by
    # key=N; a record without a file), two samples ranked, PAE and PDE; the legacy checkpoint
    msa = os.path.join(FIX, "esmfold2_msa")
    runs.append(("esmfold2_msa", [["BIN", "predict", os.path.join(msa, "targets.fasta")] + ESMFOLD2
                                  + ["--msa-dir", msa, "--diffusion-samples", "2", "--seed", "3",
                                     "--write-pae", "--out-dir", "OUT"]]))
    runs.append(("esmfold2_legacy_cif", [["BIN", "predict", os.path.join(msa, "targets.fasta"),
                                          "--weights", os.path.join(FIX, "esmfold2_tiny_legacy"),
                                          "--sampling-steps", "8", "--num-recycles", "1",
                                          "--output-format", "cif", "--out-dir", "OUT"]]))
    # score: every strategy on the three cases (ProteinGym's rule; the centred rule with a
    # window; a protein past the window), a deep mutational scan, embed's PLL
    for m in ("esm2_tiny", "esmc_tiny"):
        w = os.path.join(FIX, m)
        every = ["--strategy", "masked-marginals,wt-marginals,pseudo-ppl", "--score-column", "DMS_score"]
        runs.append(("score_" + m, [
            ["BIN", "score", os.path.join(SCORE, "short.fasta"), "--offset", "1", "--weights", w,
             "--mutations", os.path.join(SCORE, "short.csv")] + every + ["--out", "OUT/short.csv"],
            ["BIN", "score", os.path.join(SCORE, "window.fasta"), "--offset", "101", "--window-rule",
             "centred", "--scoring-window", "32", "--weights", w, "--mutations",
             os.path.join(SCORE, "window.csv")] + every + ["--out", "OUT/window.csv"],
            ["BIN", "score", os.path.join(SCORE, "long.fasta"), "--offset", "1", "--scoring-window", "48",
             "--weights", w, "--mutations", os.path.join(SCORE, "long.csv"), "--strategy",
             "masked-marginals,wt-marginals", "--out", "OUT/long.csv"],
            ["BIN", "score", os.path.join(SCORE, "short.fasta"), "--offset", "1", "--weights", w, "--dms",
             "--strategy", "masked-marginals,wt-marginals", "--out", "OUT/dms.csv"],
            ["BIN", "embed", os.path.join(SCORE, "short.fasta"), "--weights", w, "--include", "mean,pll",
             "--out-dir", "OUT/pll"]]))
    # the model registry as `weights` lists it (no cache: nothing found, nothing fetched)
    runs.append(("weights", [(["BIN", "weights", "--json", "--offline", "--cache-dir", "OUT/hub"], "weights.json")]))
    # the Python API: load, embed (and its PLL), fold, compare (bench/ab_python.py)
    runs.append(("python_api", [["PYTHON", os.path.join(ROOT, "bench", "ab_python.py"), "OUT"]]))
    return runs


def build_python(binary):
    """The Python interpreter and module folder of the build holding `binary`: the module is
    built into <build>/python, for the interpreter CMake found (its cache's Python_EXECUTABLE)."""
    build = os.path.dirname(os.path.abspath(binary))
    python = sys.executable
    try:
        for line in open(os.path.join(build, "CMakeCache.txt")):
            if line.startswith("Python_EXECUTABLE:"):
                python = line.split("=", 1)[1].strip()
    except OSError:
        pass
    return python, os.path.join(build, "python")


def generic(cmd, out="OUT"):
    """A command as a reader of the report sees it: the binary `bioinfer`, paths from the
    repository root, the output folder `out`."""
    argv, stdout = cmd if isinstance(cmd, tuple) else (cmd, None)
    words = []
    for w in argv:
        w = {"BIN": "bioinfer", "PYTHON": "PYTHONPATH=BUILD/python python"}.get(w, w)
        if w == "OUT" or w.startswith("OUT/"):
            w = out + w[3:]
        words.append(w.replace(ROOT + "/", ""))
    return " ".join(words[:1] + [shlex.quote(w) for w in words[1:]]) + (f" > {out}/{stdout}" if stdout else "")


def run_output(commands, binary, python, out, env):
    """Runs one output's commands into `out`; per command its exit status (or "timeout") and the
    end of its standard error."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    res = []
    for cmd in commands:
        argv, stdout = cmd if isinstance(cmd, tuple) else (cmd, None)
        argv = [a.replace("OUT", out, 1) if a == "OUT" or a.startswith("OUT/") else a for a in argv]
        e = dict(env)
        if argv[0] == "BIN":
            argv = [binary] + argv[1:] + ["--quiet"]
        elif argv[0] == "PYTHON":
            interpreter, module = python
            argv = [interpreter] + argv[1:]
            e["PYTHONPATH"] = module
        t0 = time.time()
        try:
            p = subprocess.run(argv, capture_output=True, env=e, cwd=out, timeout=3600)
            rc, err = p.returncode, p.stderr.decode(errors="replace")
            if stdout:
                with open(os.path.join(out, stdout), "wb") as f:
                    f.write(p.stdout)
        except subprocess.TimeoutExpired as x:
            rc, err = "timeout", (x.stderr or b"").decode(errors="replace")
        res.append({"rc": rc, "stderr": err.strip()[-1000:], "wall_s": round(time.time() - t0, 2)})
    return res


def strip_times(x):
    if isinstance(x, dict):
        return {k: strip_times(v) for k, v in x.items()
                if "runtime" not in k and "seconds" not in k and not k.endswith("_s")}
    if isinstance(x, list):
        return [strip_times(v) for v in x]
    return x


def json_differences(a, b, path="", limit=10):
    """Where two JSON values differ: up to `limit` paths with the two values."""
    out = []
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            p = f"{path}.{k}" if path else k
            if k not in a or k not in b:
                out.append({"path": p, "before": a.get(k, "<absent>"), "after": b.get(k, "<absent>")})
            else:
                out += json_differences(a[k], b[k], p, limit - len(out))
            if len(out) >= limit:
                break
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            out += json_differences(x, y, f"{path}[{i}]", limit - len(out))
            if len(out) >= limit:
                break
    elif a != b or type(a) is not type(b):
        out.append({"path": path, "before": a, "after": b})
    return out[:limit]


def read_json(path):
    if path.endswith(".jsonl"):
        return [strip_times(json.loads(l)) for l in open(path)]
    return strip_times(json.load(open(path)))


def load_arrays(path):
    """The arrays of an .npz file by name, or of an .npy file as one array named ""."""
    import numpy as np
    if path.endswith(".npy"):
        return {"": np.load(path, allow_pickle=False)}
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def array_differences(a, b):
    """The arrays of two .npz (or .npy) files that differ (name, and why), in the first file's
    order."""
    import numpy as np
    x, y = load_arrays(a), load_arrays(b)
    out = []
    for k, u in x.items():
        if k not in y:
            out.append({"array": k, "why": "missing after"})
            continue
        v = y[k]
        if u.dtype != v.dtype or u.shape != v.shape:
            out.append({"array": k, "why": f"{u.dtype}{list(u.shape)} before, {v.dtype}{list(v.shape)} after"})
        elif u.tobytes() != v.tobytes():
            why = "values differ"
            if u.dtype.kind in "fiub":
                d = np.abs(u.astype(np.float64) - v.astype(np.float64))
                why += (f": {int(np.count_nonzero(u != v))} of {u.size} elements, "
                        f"max |difference| {float(np.nanmax(d)):.3g}")
            out.append({"array": k, "why": why})
    out += [{"array": k, "why": "only after"} for k in y if k not in x]
    if not out:
        out.append({"array": None, "why": "the same arrays, the files' bytes differ"})
    return out


def file_difference(a, b):
    """None when the files are the same (JSON: without run times), else what differs."""
    try:
        if a.endswith((".json", ".jsonl")):
            x, y = read_json(a), read_json(b)
            return None if x == y else {"json": json_differences(x, y)}
    except ValueError:  # not JSON after all (a failed write): compared as bytes
        pass
    if filecmp.cmp(a, b, shallow=False):
        return None
    if a.endswith((".npz", ".npy")):
        try:
            return {a[-3:]: array_differences(a, b)}
        except Exception as e:  # unreadable: the bytes differ, that is the finding
            return {"bytes": f"differ ({type(e).__name__} reading the arrays: {e})"}
    with open(a, "rb") as f, open(b, "rb") as g:
        x, y = f.read(), g.read()
    i = next((i for i, (u, v) in enumerate(zip(x, y)) if u != v), min(len(x), len(y)))
    diff = {"bytes": f"differ from byte {i} ({len(x)} bytes before, {len(y)} after)"}
    if b"\0" not in x[:4096] and b"\0" not in y[:4096]:
        line = x[:i].count(b"\n")
        lx, ly = x.split(b"\n"), y.split(b"\n")
        diff["line"] = line + 1
        diff["before"] = lx[line].decode(errors="replace")[:300] if line < len(lx) else ""
        diff["after"] = ly[line].decode(errors="replace")[:300] if line < len(ly) else ""
    return diff


def compare_trees(a, b):
    """Every file of either folder: (files before, files after, [(path, difference)])."""
    def files(d):
        return sorted(os.path.relpath(os.path.join(r, n), d) for r, _, ns in os.walk(d) for n in ns)
    fa, fb = files(a), files(b)
    differ = []
    for rel in sorted(set(fa) | set(fb)):
        if rel not in fb:
            differ.append((rel, {"missing": "after"}))
        elif rel not in fa:
            differ.append((rel, {"missing": "before"}))
        else:
            d = file_difference(os.path.join(a, rel), os.path.join(b, rel))
            if d:
                differ.append((rel, d))
    return len(fa), len(fb), differ


def compare_outputs(before, after, work, only=None):
    """Runs every output with each binary and compares the files. Both sides write to the same
    path (WORK/out/<name>), moved aside afterwards, so that a path recorded in a file is the same
    on both."""
    runs = [r for r in output_runs() if not only or r[0] in only]
    unknown = set(only or ()) - {n for n, _ in output_runs()}
    if unknown:
        raise SystemExit(f"--outputs: no output named {', '.join(sorted(unknown))}")
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HOME", "HF_HUB_CACHE", "HF_TOKEN", "XDG_CACHE_HOME", "BOLTZ_CACHE",
                        "PYTHONPATH")}
    # never the hub, never a cache outside the scratch folder
    env.update({"HOME": os.path.join(work, "home"), "HF_HUB_OFFLINE": "1",
                "HF_ENDPOINT": "http://127.0.0.1:1"})
    scratch = os.path.join(work, "out")
    outs, status, wall = {}, {}, {}
    for side, binary in (("before", before), ("after", after)):
        outs[side] = os.path.join(work, "outputs_" + side)
        shutil.rmtree(outs[side], ignore_errors=True)
        os.makedirs(outs[side])
        py = build_python(binary)
        t0 = time.time()
        for name, cmds in runs:
            print(f"outputs: {side} {name}", flush=True)
            status[side, name] = run_output(cmds, binary, py, os.path.join(scratch, name), env)
            os.replace(os.path.join(scratch, name), os.path.join(outs[side], name))
        wall[side] = round(time.time() - t0, 1)
    report, all_differ, files, files_after = [], [], 0, 0
    for name, cmds in runs:
        nb, na, differ = compare_trees(os.path.join(outs["before"], name), os.path.join(outs["after"], name))
        rb = [s["rc"] for s in status["before", name]]
        ra = [s["rc"] for s in status["after", name]]
        row = {"output": name, "commands": [generic(c) for c in cmds],
               "exit_status": {"before": rb, "after": ra}, "files": nb, "files_after": na}
        failed = [(i, s) for i, s in enumerate(zip(status["before", name], status["after", name]))
                  if s[0]["rc"] != 0 or s[1]["rc"] != 0]
        if rb != ra:
            i, (sb, sa) = next((i, s) for i, s in failed if s[0]["rc"] != s[1]["rc"])
            row["status"] = "different"
            row["first_difference"] = {"command": i, "exit_status": {"before": sb["rc"], "after": sa["rc"]},
                                       "stderr": {"before": sb["stderr"], "after": sa["stderr"]}}
        elif differ:
            row["status"] = "different"
            row["first_difference"] = {"file": differ[0][0], **differ[0][1]}
        elif failed:  # the same exit status on both sides; their messages may differ
            i, (sb, sa) = next(((i, s) for i, s in failed if s[0]["stderr"] != s[1]["stderr"]), failed[0])
            same = sb["stderr"] == sa["stderr"]
            row["status"] = "failed" if same else "different"
            row["failure" if same else "first_difference"] = {
                "command": i, "exit_status": sb["rc"],
                "stderr": {"before": sb["stderr"], "after": sa["stderr"]}}
        else:
            row["status"] = "identical"
        row["identical"] = row["status"] == "identical"
        if differ:
            row["differ"] = [{"file": f, **d} for f, d in differ]
        row["wall_s"] = {s: round(sum(x["wall_s"] for x in status[s, name]), 1) for s in ("before", "after")}
        report.append(row)
        all_differ += [os.path.join(name, f) for f, _ in differ]
        files += nb
        files_after += na
        what = row.get("first_difference") or row.get("failure")
        print(f"outputs: {name}: {row['status']} ({nb} files)"
              + (f": {json.dumps(what)[:300]}" if what else ""),
              flush=True)
    return {"commands": [generic(c, "OUT/" + name) for name, cmds in runs for c in cmds],
            "files": files, "files_after": files_after, "differ": all_differ,
            "identical": all(r["identical"] for r in report), "outputs": report, "wall_s": wall}


# --- speed ---

def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{shlex.join(cmd)} failed: {p.stderr.strip()[-500:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def predict_target_seconds(binary, in_path, weights, options, out_dir, threads):
    """`bioinfer predict` on a folder or file of targets; the runtime_s results.json records for
    the last target (the earlier ones warm the model up)."""
    shutil.rmtree(out_dir, ignore_errors=True)
    cmd = [binary, "predict", in_path, "--weights", weights, "--out-dir", out_dir, "--threads",
           str(threads), "--quiet"] + options
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} failed ({p.returncode}): {p.stderr[-2000:]}")
    results = [os.path.join(d, "results.json") for d, _, files in os.walk(out_dir)
               if "results.json" in files]
    targets = json.load(open(results[0]))["targets"]
    return {"seconds": targets[-1]["runtime_s"], "target": targets[-1]["id"]}


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
    ap.add_argument("--jobs", default="outputs,embed,fold,structure")
    ap.add_argument("--outputs", default="",
                    help="the outputs job's outputs to run, by name (default: every one)")
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
        only = [o for o in args.outputs.split(",") if o]
        doc["outputs"] = compare_outputs(bins["before"], bins["after"], args.workdir, only)
        o = doc["outputs"]
        print(f"outputs: {sum(r['identical'] for r in o['outputs'])} of {len(o['outputs'])} identical, "
              f"{o['files']} files, {len(o['differ'])} differ", flush=True)
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
    if "structure" in jobs:
        import boltz2_bench
        import esmfold2_bench
        ckpt_dir, _ = boltz2_bench.make_assets(args.workdir)
        boltz_in = boltz2_bench.write_inputs(args.workdir, "protein64")
        ef2_dir = esmfold2_bench.make_checkpoint(os.path.join(args.workdir, "esmfold2_600m_1_10"),
                                                 "600m", 1, 10)
        ef2_in = os.path.join(args.workdir, "esmfold2_targets.fasta")
        with open(ef2_in, "w") as f:
            f.write(f">a_warmup\n{boltz2_bench.sequence(16, 99)}\n"
                    f">b_target\n{boltz2_bench.sequence(64, 64)}\n")
        folds = [("boltz2 (released shapes, 64 pairformer blocks)", boltz_in, ckpt_dir,
                  ["--recycling_steps", "0", "--sampling_steps", "10", "--diffusion_samples", "1",
                   "--seed", "0", "--override"]),
                 ("esmfold2 (600M tower, 1 loop)", ef2_in, ef2_dir,
                  ["--sampling-steps", "10", "--seed", "0"])]
        for name, in_path, weights, options in folds:
            res = alternate(args.rounds, sides, lambda s: predict_target_seconds(
                bins[s], in_path, weights, options, os.path.join(args.workdir, "structure_" + s),
                args.threads))
            best = {s: min(r["seconds"] for r in res[s]) for s in sides}
            row = {"job": "structure", "model": name, "length": 64, "seconds": best,
                   "ratio_after_over_before": best["before"] / best["after"],
                   "by_round": {s: [r["seconds"] for r in res[s]] for s in sides}}
            print(json.dumps(row), flush=True)
            doc["rows"].append(row)
            save()
    save()


if __name__ == "__main__":
    main()
