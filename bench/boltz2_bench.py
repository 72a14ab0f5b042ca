#!/usr/bin/env python3
"""Boltz-2 structure prediction on the CPU: bioinfer predict vs the boltz package's own model, same
machine, same run, same threads, fp32 on both sides, random weights at the released shapes of
boltz2_conf.ckpt (tools/reference/boltz2_tiny.RELEASED: 64 pairformer blocks, token_s 384,
token_z 128, a 24-layer token transformer, an 8-block confidence pairformer).

    .venv-reference/bin/python bench/boltz2_bench.py [--cases protein128,complex2x128]
        [--threads 2] [--recycling 3] [--steps 200] [--bioinfer-only 1000] [--quick]
        [--workdir DIR] [--out bench/results/boltz2_cpu.json]

One checkpoint (a Lightning .ckpt as boltz's released ones are laid out, about 2 GB) is written
once to --workdir; both sides read that file. Inputs are boltz YAML files with random (seeded)
protein sequences and `msa: empty` (single sequence): protein128 is one 128-residue chain,
complex2x128 two 128-residue chains (256 tokens). Each (side, case) runs in its own process, so
peak RSS (VmHWM) is its own: model load, one prediction of a 16-residue warm-up target, then the
timed prediction of the case's target, with the same options (recycling steps, sampling steps,
one diffusion sample) for both targets.

boltz: its own pipeline in Python, as `boltz predict` runs it: process_inputs and
Boltz2InferenceDataModule featurize the YAML (timed apart), Boltz2.load_from_checkpoint with
predict's overrides (pairformer / MSA args, diffusion and steering parameters, predict_args),
then predict_step under torch.inference_mode in fp32 with torch.set_num_threads(threads).
Stage times wrap its modules: input embedder, trunk (template + MSA module + pairformer over all
recycling passes), diffusion conditioning, structure_module.sample, confidence module.

bioinfer: `bioinfer predict` on a folder holding the warm-up and the target YAML, with the same
options; the target's own runtime (model loaded and warm) and stage times come from its outputs,
end to end is the whole process.

--bioinfer-only N predicts an N-token complex (4 chains of N/4 residues) with bioinfer alone
and records its peak RSS (the memory probe). --quick is a smoke test of the script (a 32-residue
target, no recycling, 5 sampling steps; writes to the work folder unless --out is given).
"""
import argparse
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "reference"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
AA = "ACDEFGHIKLMNPQRSTVWY"
WARMUP_RESIDUES = 16
from lm_bench import machine_info, peak_rss_mb, time_calls, write_json  # noqa: E402

WARMUP, TARGET = "a_warmup", "b_target"  # file stems: bioinfer predicts a folder in name order


# ---- inputs --------------------------------------------------------------------------------------

def sequence(n, seed):
    rng = random.Random(seed)
    return "".join(rng.choice(AA) for _ in range(n))


def case_chains(name):
    """Chain lengths of a case: protein<L> is one chain, complex<K>x<L> K chains of L residues."""
    if name.startswith("protein"):
        return [int(name[len("protein"):])]
    if name.startswith("complex"):
        k, n = name[len("complex"):].split("x")
        return [int(n)] * int(k)
    raise ValueError(f"case '{name}': expected protein<L> or complex<K>x<L>")


def yaml_text(chains, seed):
    lines = ["version: 1", "sequences:"]
    for i, n in enumerate(chains):
        lines += ["  - protein:", f"      id: {chr(ord('A') + i)}",
                  f"      sequence: {sequence(n, seed * 100 + i)}", "      msa: empty"]
    return "\n".join(lines) + "\n"


def write_inputs(workdir, case):
    """<workdir>/inputs/<case>/{warmup,target}.yaml; returns the folder."""
    d = os.path.join(workdir, "inputs", case)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    chains = case_chains(case)
    for stem, text in ((WARMUP, yaml_text([WARMUP_RESIDUES], 99)),
                       (TARGET, yaml_text(chains, sum(chains)))):
        with open(os.path.join(d, stem + ".yaml"), "w") as f:
            f.write(text)
    return d


def make_assets(workdir):
    """A boltz cache folder as `boltz predict` fills it, which both sides read:
    workdir/boltz2_released/boltz2_conf.ckpt (the released shapes, random weights) and mols/ (the
    canonical residue molecules, made with RDKit as the fixtures' are)."""
    from pathlib import Path
    import boltz2_tiny as bt

    ckpt_dir = os.path.join(workdir, "boltz2_released")
    ckpt = Path(ckpt_dir) / "boltz2_conf.ckpt"
    if not ckpt.exists():
        os.makedirs(ckpt_dir, exist_ok=True)
        bt.write_checkpoint(bt.build_model(0, bt.RELEASED), ckpt, bt.RELEASED)
    mols = Path(ckpt_dir) / "mols"
    if not (mols / "ALA.pkl").exists():
        bt.make_mols_dir(mols)
    return ckpt_dir, str(mols)


# ---- the boltz side (its own process) ------------------------------------------------------------

def ref_worker(args):
    import torch
    from dataclasses import asdict
    from pathlib import Path
    import boltz2_tiny as bt
    from boltz.main import Boltz2DiffusionParams, BoltzSteeringParams, MSAModuleArgs, PairformerArgsV2
    from boltz.model.models.boltz2 import Boltz2

    t_start = time.perf_counter()
    torch.set_num_threads(args.threads)
    ckpt_dir = os.path.join(args.workdir, "boltz2_released")
    mol_dir = Path(ckpt_dir) / "mols"
    in_dir = os.path.join(args.workdir, "inputs", args.ref_worker)
    feats, featurize_s = {}, {}
    for stem in (WARMUP, TARGET):
        bt.CASES[f"{args.ref_worker}_{stem}"] = (open(os.path.join(in_dir, stem + ".yaml")).read(), {})
        t0 = time.perf_counter()
        feats[stem] = bt.featurize(f"{args.ref_worker}_{stem}", Path(args.workdir) / "ref_work", mol_dir,
                                   seed=args.seed)
        featurize_s[stem] = time.perf_counter() - t0

    # As boltz predict loads it (main.py: predict), with its default options.
    steering = BoltzSteeringParams()
    steering.fk_steering = False              # --use_potentials off
    steering.physical_guidance_update = False
    t0 = time.perf_counter()
    # The file's hyper-parameters hold a BoltzSteeringParams (as released ones can), which
    # torch.load's weights-only unpickler admits only when named.
    # Its training_args are a plain dict; on_load_checkpoint reads .max_lr / .weight_decay as the
    # released files' attribute dicts have them. They play no part in inference.
    from lightning_fabric.utilities.data import AttributeDict
    training_args = AttributeDict(bt.hyper_parameters(bt.RELEASED)["training_args"], max_lr=0.0,
                                  weight_decay=0.0)
    with torch.serialization.safe_globals([BoltzSteeringParams]):
        model = Boltz2.load_from_checkpoint(
            os.path.join(ckpt_dir, "boltz2_conf.ckpt"), strict=True, map_location="cpu",
            predict_args={"recycling_steps": args.recycling, "sampling_steps": args.steps,
                          "diffusion_samples": args.samples, "max_parallel_samples": 5,
                          "write_confidence_summary": True, "write_full_pae": False,
                          "write_full_pde": False},
            training_args=training_args,
            diffusion_process_args=asdict(Boltz2DiffusionParams()), ema=False, use_kernels=False,
            pairformer_args=asdict(PairformerArgsV2()), msa_args=asdict(MSAModuleArgs()),
            steering_args=asdict(steering))
    model.eval()
    model.use_kernels = False  # what Boltz2.setup("predict") decides without a CUDA device
    load_s = time.perf_counter() - t0
    assert all(p.dtype == torch.float32 for p in model.parameters())

    stages = {}
    time_calls(stages, model.input_embedder, "forward", "input_embedder")
    time_calls(stages, model.template_module, "forward", "trunk_template")
    time_calls(stages, model.msa_module, "forward", "trunk_msa")
    time_calls(stages, model.pairformer_module, "forward", "trunk_pairformer")
    time_calls(stages, model.diffusion_conditioning, "forward", "diffusion_conditioning")
    time_calls(stages, model.structure_module, "sample", "diffusion_sample")
    time_calls(stages, model.confidence_module, "forward", "confidence")

    def predict(batch):
        stages.clear()
        torch.manual_seed(args.seed)
        t = time.perf_counter()
        with torch.inference_mode():
            out = model.predict_step(batch, 0)
        total = time.perf_counter() - t
        assert not out.get("exception"), "boltz's predict_step skipped the batch"
        s = dict(stages)
        # the groups bioinfer reports: trunk (embedder and passes), diffusion (conditioning and
        # sampler), confidence; other = the rest (z_init, distogram, b-factor, score summaries)
        s["trunk"] = s["input_embedder"] + s["trunk_template"] + s["trunk_msa"] + s["trunk_pairformer"]
        s["diffusion"] = s["diffusion_conditioning"] + s["diffusion_sample"]
        s["other"] = total - s["trunk"] - s["diffusion"] - s["confidence"]
        return total, s

    warm_s, _ = predict(feats[WARMUP])
    predict_s, stages_s = predict(feats[TARGET])
    tokens = int(feats[TARGET]["token_pad_mask"].shape[1])
    atoms = int(feats[TARGET]["atom_pad_mask"].shape[1])
    print(json.dumps({"impl": "boltz", "case": args.ref_worker, "tokens": tokens, "atoms_padded": atoms,
                      "predict_s": predict_s, "stages_s": stages_s,
                      "featurize_s": featurize_s[TARGET], "load_s": load_s, "warmup_s": warm_s,
                      "process_s": time.perf_counter() - t_start,
                      "peak_rss_mb": peak_rss_mb(), "threads": torch.get_num_threads()}))


def run_ref(args, case):
    cmd = [sys.executable, os.path.abspath(__file__), "--ref-worker", case, "--workdir", args.workdir,
           "--threads", str(args.threads), "--recycling", str(args.recycling), "--steps",
           str(args.steps), "--samples", str(args.samples), "--seed", str(args.seed)]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"boltz worker failed on {case}:\n{p.stderr[-3000:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["end_to_end_s"] = wall  # the whole process: interpreter start and imports included
    return r


# ---- the bioinfer side ---------------------------------------------------------------------------

class PeakPoller:
    """A child's VmHWM, read every 50 ms until it exits (the last read is its peak but for
    whatever it allocates in its final 50 ms)."""

    def __init__(self, pid):
        self.pid, self.peak_mb, self._stop = pid, 0.0, False
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop:
            try:
                with open(f"/proc/{self.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            self.peak_mb = max(self.peak_mb, int(line.split()[1]) / 1024.0)
            except (FileNotFoundError, ProcessLookupError, ValueError):
                pass
            time.sleep(0.05)

    def stop(self):
        self._stop = True
        self._t.join()


def bioinfer_cmd(args, in_dir, out_dir, ckpt_dir):
    """bioinfer predict on the folder (warm-up, then target: files go in name order) with boltz's
    options; the checkpoint folder holds mols/ beside boltz2_conf.ckpt, as boltz's cache does."""
    return [args.bin, "predict", in_dir, "--weights", ckpt_dir, "--out-dir", out_dir,
            "--threads", str(args.threads), "--recycling_steps", str(args.recycling),
            "--sampling_steps", str(args.steps), "--diffusion_samples", str(args.samples),
            "--seed", str(args.seed), "--override", "--quiet"]


def run_bioinfer(args, case, in_dir, ckpt_dir):
    out_dir = os.path.join(args.workdir, "bioinfer_out", case)
    log = os.path.join(args.workdir, "bioinfer_out", case + ".log.jsonl")
    if os.path.exists(log):
        os.remove(log)
    cmd = bioinfer_cmd(args, in_dir, out_dir, ckpt_dir) + ["--log", log]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    poll = PeakPoller(p.pid)
    _, stderr = p.communicate()
    wall = time.perf_counter() - t0
    poll.stop()
    if p.returncode != 0:
        raise RuntimeError(f"bioinfer failed on {case} (exit {p.returncode}): {shlex.join(cmd)}\n"
                           f"{stderr[-3000:]}")
    results = [os.path.join(d, "results.json") for d, _, files in os.walk(out_dir)
               if "results.json" in files]
    res = json.load(open(results[0]))
    row = {"impl": "bioinfer", "case": case, "command": portable(cmd, args), "end_to_end_s": wall, "peak_rss_mb": poll.peak_mb,
           "threads": args.threads, "results_runtime_s": res.get("runtime_s")}
    for t in res.get("targets", []):
        if t.get("status") != "ok":
            raise RuntimeError(f"bioinfer: target {t.get('id')}: {t.get('status')} {t.get('error', '')}")
        row[t["id"] + "_s"] = t.get("runtime_s")
    row["predict_s"] = row.pop(f"{TARGET}_s", None)
    row["warmup_s"] = row.pop(f"{WARMUP}_s", None)
    row.update(stages_from_log(log, TARGET))
    return row


def portable(cmd, args):
    """The command as it reads from the repository root, the work folder as $WORKDIR."""
    out = []
    for a in cmd:
        a = a.replace(os.path.abspath(args.workdir), "$WORKDIR")
        out.append(os.path.relpath(a, ROOT) if a.startswith(ROOT + os.sep) else a)
    return " ".join(out)


def stages_from_log(path, target):
    """The target's stage times from bioinfer's progress events (--log): each stage lasts until
    the next event of that target. Groups: featurize, trunk (input embedder, trunk passes),
    diffusion (conditioning, sampling steps), confidence, writing; and the model load."""
    events = [json.loads(l) for l in open(path) if l.strip()]
    out, stages, prev = {}, {}, None
    for e in events:
        if e.get("event") == "note" and str(e.get("text", "")).startswith("loaded "):
            out["load_s"] = e["elapsed_s"]
        mine = str(e.get("target", "")).split(" (")[0] == target
        if prev is not None and (e.get("event") in ("stage", "done")) and (mine or e.get("event") == "done"):
            name = prev["stage"]
            group = ("trunk" if name == "input embedder" or name.startswith("trunk pass") else
                     "diffusion_conditioning" if name == "diffusion conditioning" else
                     "diffusion_sample" if name.startswith("diffusion step") else name)
            stages[group] = stages.get(group, 0.0) + e["elapsed_s"] - prev["elapsed_s"]
            prev = None
        if mine and e.get("event") == "stage":
            prev = e
    stages["diffusion"] = stages.get("diffusion_conditioning", 0.0) + stages.get("diffusion_sample", 0.0)
    out["stages_s"] = stages
    return out


def at_default_steps(row, steps, default=200):
    """The target's time had the sampler taken `default` steps: the measured time plus the
    sampler's mean step time for the steps not run (every step does the same work)."""
    sample = row.get("stages_s", {}).get("diffusion_sample")
    if not row.get("predict_s") or sample is None or steps == default:
        return None
    return row["predict_s"] + sample / steps * (default - steps)


# ---- driver --------------------------------------------------------------------------------------

def versions(bin_path):
    out = {}
    for pkg in ("torch", "boltz"):
        try:
            from importlib.metadata import version
            out[pkg] = version(pkg)
        except Exception:  # noqa: BLE001
            out[pkg] = None
    try:
        out["bioinfer"] = subprocess.run([bin_path, "--version"], capture_output=True, text=True,
                                         timeout=30).stdout.strip() or None
    except OSError:
        out["bioinfer"] = None
    try:
        out["bioinfer_commit"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                                capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    return out


def write_doc(args, machine, rows, cases):
    doc = {"bench": "boltz2_memory" if args.bioinfer_only and not cases else "boltz2_cpu",
           "command": shlex.join([os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)] + sys.argv[1:]),
           "date": time.strftime("%Y-%m-%d"),
           "machine": dict(machine, load_average_now=os.getloadavg()),
           "model": {"shapes": "boltz2_conf.ckpt as released (tools/reference/boltz2_tiny.py RELEASED)",
                     "weights": "random (seed 0), one Lightning .ckpt read by both sides",
                     "compute": "fp32 on both sides"},
           "options": {"recycling_steps": args.recycling, "sampling_steps": args.steps,
                       "diffusion_samples": args.samples, "seed": args.seed, "msa": "empty",
                       "warmup_target_residues": WARMUP_RESIDUES},
           "timing": {"predict_s": "the target alone, model loaded, after the warm-up target "
                                   "(boltz: predict_step; bioinfer: the target's runtime_s.total)",
                      "end_to_end_s": "the whole process: start, load, featurize both targets, "
                                      "warm-up, target (bioinfer also writes its outputs)",
                      "ratio": "boltz / bioinfer"},
           "versions": versions(args.bin), "rows": rows}
    write_json(args.out, doc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="protein128,complex2x128",
                    help="comma-separated: protein<L> (one chain) or complex<K>x<L> (K chains)")
    ap.add_argument("--bioinfer-only", type=int, default=0,
                    help="tokens of a 4-chain complex predicted by bioinfer alone (memory probe)")
    ap.add_argument("--sides", default="bioinfer,boltz")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--recycling", type=int, default=3)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--samples", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true",
                    help="smoke test: protein32, no recycling, 5 sampling steps")
    ap.add_argument("--workdir", default="/tmp/bioinfer_boltz2_bench")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bioinfer"))
    ap.add_argument("--out", default=None,
                    help="default bench/results/boltz2_cpu.json (with --quick: in the work folder)")
    ap.add_argument("--ref-worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ref_worker:
        ref_worker(args)
        return
    if args.quick:
        args.cases, args.recycling, args.steps = "protein32", 0, 5
    if args.out is None:
        args.out = (os.path.join(args.workdir, "boltz2_quick.json") if args.quick else
                    os.path.join(ROOT, "bench", "results", "boltz2_cpu.json"))
    sides = args.sides.split(",")
    cases = [c for c in args.cases.split(",") if c]
    machine = machine_info(args.threads)
    t0 = time.time()
    ckpt_dir, mol_dir = make_assets(args.workdir)
    print(f"checkpoint ready in {time.time() - t0:.0f} s: {ckpt_dir}", file=sys.stderr)
    rows = []
    for case in cases:
        in_dir = write_inputs(args.workdir, case)
        b = run_bioinfer(args, case, in_dir, ckpt_dir) if "bioinfer" in sides else None
        if b:
            b["load_average_after"] = os.getloadavg()  # 1, 5, 15 min: how shared the machine was
            print(json.dumps(b), file=sys.stderr)
            rows.append(b)
            write_doc(args, machine, rows, cases)
        r = run_ref(args, case) if "boltz" in sides else None
        if r:
            r["load_average_after"] = os.getloadavg()
            print(json.dumps(r), file=sys.stderr)
            rows.append(r)
        for row in (b, r):
            if row and at_default_steps(row, args.steps) is not None:
                row["predict_s_at_200_steps_estimate"] = at_default_steps(row, args.steps)
        if b and r:
            if b.get("predict_s_at_200_steps_estimate") and r.get("predict_s_at_200_steps_estimate"):
                b["ratio_predict_at_200_steps_estimate"] = (r["predict_s_at_200_steps_estimate"] /
                                                            b["predict_s_at_200_steps_estimate"])
            if b.get("predict_s"):
                b["ratio_predict"] = r["predict_s"] / b["predict_s"]
            b["ratio_end_to_end"] = r["end_to_end_s"] / b["end_to_end_s"]
            b["ratio_peak_rss"] = r["peak_rss_mb"] / b["peak_rss_mb"]
        write_doc(args, machine, rows, cases)
    if args.bioinfer_only:
        n = args.bioinfer_only
        case = f"complex4x{n // 4}"
        b = run_bioinfer(args, case, write_inputs(args.workdir, case), ckpt_dir)
        b["memory_probe"] = True
        b["load_average_after"] = os.getloadavg()
        print(json.dumps(b), file=sys.stderr)
        rows.append(b)
        write_doc(args, machine, rows, cases)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
