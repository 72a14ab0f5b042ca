#!/usr/bin/env python3
"""Boltz-2 affinity screening on the CPU: 20 ligands against one protein, bioinfer vs the boltz
package, same machine, same run, same threads, fp32 on both sides, random weights at the released
shapes (boltz2_conf.ckpt as tools/reference/boltz2_tiny.RELEASED, boltz2_aff.ckpt the same with
two affinity modules of boltz2_tiny.AFFINITY_RELEASED).

    .venv-reference/bin/python bench/boltz2_screen_bench.py [--ligands 20] [--residues 48]
        [--steps 10] [--affinity-steps 10] [--threads 2] [--workdir DIR]
        [--out bench/results/boltz2_screen_cpu.json] [--quick]

Both sides read one boltz cache folder written once to --workdir (boltz2_conf.ckpt,
boltz2_aff.ckpt, mols/ with the canonical residues, and the mols.tar boltz checks for), and the
same inputs: a receptor YAML (one random protein, `msa: empty`) and SCREEN's ligands as SMILES.

boltz, as a user scripts a screen with it: one `boltz predict <ligand>.yaml --cache CACHE
--accelerator cpu` process per ligand, each YAML the receptor plus the ligand with
`properties: - affinity: binder: L`, run through boltz's own CLI (boltz.main.cli) in a wrapper
that only makes it comparable: Lightning's precision fp32 instead of boltz's bf16-mixed,
torch.set_num_threads(threads), and the random-weight checkpoints admitted (torch.load told of
their options' dataclass, training_args given attribute access for boltz's lr bookkeeping).

bioinfer: one `bioinfer predict receptor.yaml --ligands ligands.smi --affinity` job.

Both with the same options: --recycling_steps 3 (boltz's default), --sampling_steps STEPS,
--sampling_steps_affinity AFFINITY_STEPS, --diffusion_samples_affinity 5 (boltz's default), one
structure sample. The sampler steps are cut from boltz's 200 so that 20 ligands run in under an
hour on 2 cores (docs/performance.md discusses what that does to the ratio). Times: bioinfer's is
its one process (load, every ligand, outputs), boltz's the sum of its per-ligand processes.
"""
import argparse
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "reference"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from boltz2_bench import machine_info, portable, versions  # noqa: E402
from lm_bench import write_json  # noqa: E402

AA = "ACDEFGHIKLMNPQRSTVWY"
# Drug-like ligands of 9 to 29 heavy atoms (name, SMILES).
SCREEN = [
    ("aspirin", "CC(=O)Oc1ccccc1C(=O)O"),
    ("ibuprofen", "CC(C)Cc1ccc(cc1)C(C)C(=O)O"),
    ("caffeine", "Cn1cnc2c1c(=O)n(C)c(=O)n2C"),
    ("paracetamol", "CC(=O)Nc1ccc(O)cc1"),
    ("naproxen", "COc1ccc2cc(ccc2c1)C(C)C(=O)O"),
    ("diclofenac", "OC(=O)Cc1ccccc1Nc1c(Cl)cccc1Cl"),
    ("metformin", "CN(C)C(=N)NC(=N)N"),
    ("nicotine", "CN1CCCC1c1cccnc1"),
    ("salbutamol", "CC(C)(C)NCC(O)c1ccc(O)c(CO)c1"),
    ("propranolol", "CC(C)NCC(O)COc1cccc2ccccc12"),
    ("warfarin", "CC(=O)CC(c1ccccc1)c1c(O)c2ccccc2oc1=O"),
    ("imatinib_core", "Cc1ccc(NC(=O)c2ccccc2)cc1Nc1nccc(n1)-c1cccnc1"),
    ("sildenafil_core", "CCCc1nn(C)c2c1nc([nH]c2=O)-c1ccccc1OCC"),
    ("celecoxib", "Cc1ccc(cc1)-c1cc(nn1-c1ccc(cc1)S(N)(=O)=O)C(F)(F)F"),
    ("fluoxetine", "CNCCC(Oc1ccc(cc1)C(F)(F)F)c1ccccc1"),
    ("atenolol", "CC(C)NCC(O)COc1ccc(CC(N)=O)cc1"),
    ("lidocaine", "CCN(CC)CC(=O)Nc1c(C)cccc1C"),
    ("theophylline", "Cn1c2nc[nH]c2c(=O)n(C)c1=O"),
    ("benzocaine", "CCOC(=O)c1ccc(N)cc1"),
    ("indomethacin", "COc1ccc2n(C(=O)c3ccc(Cl)cc3)c(C)c(CC(=O)O)c2c1"),
]
def sequence(n, seed):
    rng = random.Random(seed)
    return "".join(rng.choice(AA) for _ in range(n))


def receptor_yaml(residues):
    return ("version: 1\nsequences:\n  - protein:\n      id: A\n"
            f"      sequence: {sequence(residues, 7)}\n      msa: empty\n")


def make_cache(workdir):
    """workdir/boltz2_cache as `boltz predict --cache` expects it, with random weights."""
    from pathlib import Path

    import boltz2_tiny as bt

    cache = Path(workdir) / "boltz2_cache"
    cache.mkdir(parents=True, exist_ok=True)
    conf = cache / "boltz2_conf.ckpt"
    if not conf.exists():
        bt.write_checkpoint(bt.build_model(0, bt.RELEASED), conf, bt.RELEASED)
    aff = cache / "boltz2_aff.ckpt"
    if not aff.exists():
        bt.write_checkpoint(bt.make_affinity_model(1, bt.RELEASED, bt.AFFINITY_RELEASED), aff,
                            bt.RELEASED,
                            hp=bt.affinity_hyper_parameters(bt.RELEASED, bt.AFFINITY_RELEASED))
    if not (cache / "mols" / "ALA.pkl").exists():
        bt.make_mols_dir(cache / "mols")
    # boltz's download_boltz2 fetches mols.tar unless the file exists (mols/ is what it reads)
    (cache / "mols.tar").touch()
    return str(cache)


def write_inputs(workdir, n_ligands, residues):
    d = os.path.join(workdir, "inputs")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "boltz"))
    rec = receptor_yaml(residues)
    with open(os.path.join(d, "receptor.yaml"), "w") as f:
        f.write(rec)
    with open(os.path.join(d, "ligands.smi"), "w") as f:
        for name, smi in SCREEN[:n_ligands]:
            f.write(f"{smi} {name}\n")
    for name, smi in SCREEN[:n_ligands]:
        with open(os.path.join(d, "boltz", name + ".yaml"), "w") as f:
            f.write(rec + f"  - ligand:\n      id: L\n      smiles: '{smi}'\n"
                    "properties:\n  - affinity:\n      binder: L\n")
    return d


# ---- the boltz side: its CLI, one process per ligand ----------------------------------------------

def boltz_cli(argv, threads):
    """boltz predict in this process, fp32, `threads` threads, random-weight checkpoints allowed."""
    import torch

    torch.set_num_threads(threads)
    import boltz.main as bm
    from boltz.main import BoltzSteeringParams
    from lightning_fabric.utilities.data import AttributeDict

    torch.serialization.add_safe_globals([BoltzSteeringParams])
    # Boltz2.on_load_checkpoint reads training_args.max_lr as an attribute (lr bookkeeping for
    # training); these files hold a plain dict there
    from boltz.model.models.boltz2 import Boltz2

    real_on_load = Boltz2.on_load_checkpoint

    def on_load(self, checkpoint):
        self.training_args = AttributeDict(self.training_args, max_lr=0.0, weight_decay=0.0)
        return real_on_load(self, checkpoint)

    Boltz2.on_load_checkpoint = on_load
    real_trainer = bm.Trainer

    def fp32_trainer(*args, **kwargs):
        kwargs["precision"] = 32
        return real_trainer(*args, **kwargs)

    bm.Trainer = fp32_trainer
    # boltz 2.2.1 reads AllChem.Descriptors, which newer RDKit releases no longer import
    from rdkit.Chem import AllChem, Descriptors

    if not hasattr(AllChem, "Descriptors"):
        AllChem.Descriptors = Descriptors
    sys.argv = ["boltz"] + argv
    bm.cli(standalone_mode=False)


def run_boltz(args, in_dir, cache):
    rows = []
    for name, _ in SCREEN[:args.ligands]:
        out = os.path.join(args.workdir, "boltz_out")
        y = os.path.join(in_dir, "boltz", name + ".yaml")
        cmd = [sys.executable, os.path.abspath(__file__), "--boltz-cli", "--threads", str(args.threads),
               "--", "predict", y, "--cache", cache, "--out_dir", out, "--accelerator", "cpu",
               "--recycling_steps", "3", "--sampling_steps", str(args.steps),
               "--sampling_steps_affinity", str(args.affinity_steps),
               "--diffusion_samples_affinity", "5", "--num_workers", "0", "--override",
               "--seed", "0"]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        aff = os.path.join(out, f"boltz_results_{name}", "predictions", name, f"affinity_{name}.json")
        if p.returncode != 0 or not os.path.exists(aff):
            raise RuntimeError(f"boltz on {name} (exit {p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
        rows.append({"ligand": name, "seconds": wall, "affinity": json.load(open(aff))})
        print(f"boltz {name}: {wall:.1f} s", flush=True)
    return rows, portable(cmd, args)


# ---- the bioinfer side: one job --------------------------------------------------------------------

def run_bioinfer(args, in_dir, cache):
    out = os.path.join(args.workdir, "bioinfer_out")
    shutil.rmtree(out, ignore_errors=True)
    cmd = [args.bin, "predict", os.path.join(in_dir, "receptor.yaml"), "--ligands",
           os.path.join(in_dir, "ligands.smi"), "--affinity", "--weights", cache, "--out-dir", out,
           "--threads", str(args.threads), "--recycling_steps", "3", "--sampling_steps",
           str(args.steps), "--sampling_steps_affinity", str(args.affinity_steps),
           "--diffusion_samples_affinity", "5", "--seed", "0", "--quiet"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"bioinfer (exit {p.returncode}): {shlex.join(cmd)}\n{p.stderr[-3000:]}")
    res = json.load(open(os.path.join(out, "boltz_results_receptor", "results.json")))
    rows = []
    for t in res["targets"]:
        if t.get("status") != "ok":
            raise RuntimeError(f"bioinfer: {t.get('id')}: {t.get('status')} {t.get('error', '')}")
        aff = os.path.join(out, "boltz_results_receptor", t["files"]["affinity"])
        rows.append({"ligand": t["id"], "seconds": t.get("runtime_s"), "affinity": json.load(open(aff))})
    return {"end_to_end_s": wall, "results_runtime_s": res.get("runtime_s"), "ligands": rows,
            "command": portable(cmd, args)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ligands", type=int, default=20)
    ap.add_argument("--residues", type=int, default=48)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--affinity-steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sides", default="bioinfer,boltz")
    ap.add_argument("--quick", action="store_true", help="smoke test: 2 ligands, 2 + 2 steps")
    ap.add_argument("--workdir", default="/tmp/bioinfer_boltz2_screen")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bioinfer"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--boltz-cli", action="store_true", help=argparse.SUPPRESS)
    args, rest = ap.parse_known_args()
    if args.boltz_cli:
        boltz_cli([a for a in rest if a != "--"], args.threads)
        return
    if args.quick:
        args.ligands, args.steps, args.affinity_steps = 2, 2, 2
    if args.out is None:
        args.out = (os.path.join(args.workdir, "screen_quick.json") if args.quick else
                    os.path.join(ROOT, "bench", "results", "boltz2_screen_cpu.json"))
    os.makedirs(args.workdir, exist_ok=True)
    machine = machine_info(args.threads)
    t0 = time.perf_counter()
    cache = make_cache(args.workdir)
    print(f"assets ready in {time.perf_counter() - t0:.0f} s", flush=True)
    in_dir = write_inputs(args.workdir, args.ligands, args.residues)
    sides = args.sides.split(",")
    doc = {"bench": "boltz2_screen_cpu",
           "command": shlex.join([os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)] + sys.argv[1:]),
           "date": time.strftime("%Y-%m-%d"), "machine": machine,
           "model": {"shapes": "boltz2_conf.ckpt as released (boltz2_tiny.RELEASED); boltz2_aff.ckpt "
                               "the same with two affinity modules (boltz2_tiny.AFFINITY_RELEASED, 8 "
                               "pairformer blocks each: assumed, see there)",
                     "weights": "random, one boltz cache folder read by both sides",
                     "compute": "fp32 on both sides (boltz's Lightning precision set to 32)"},
           "inputs": {"receptor_residues": args.residues, "ligands": [n for n, _ in SCREEN[:args.ligands]],
                      "msa": "empty"},
           "options": {"recycling_steps": 3, "sampling_steps": args.steps,
                       "sampling_steps_affinity": args.affinity_steps, "diffusion_samples": 1,
                       "diffusion_samples_affinity": 5, "seed": 0, "threads": args.threads},
           "versions": versions(args.bin)}
    if "bioinfer" in sides:
        b = run_bioinfer(args, in_dir, cache)
        doc["bioinfer"] = b
        print(f"bioinfer: {b['end_to_end_s']:.1f} s for {args.ligands} ligands", flush=True)
    if "boltz" in sides:
        rows, cmd = run_boltz(args, in_dir, cache)
        doc["boltz"] = {"end_to_end_s": sum(r["seconds"] for r in rows), "ligands": rows,
                        "command_per_ligand": cmd}
    if "bioinfer" in doc and "boltz" in doc:
        bi, bo = doc["bioinfer"]["end_to_end_s"], doc["boltz"]["end_to_end_s"]
        doc["summary"] = {"ligands": args.ligands,
                          "bioinfer_ligands_per_hour": args.ligands * 3600 / bi,
                          "boltz_ligands_per_hour": args.ligands * 3600 / bo,
                          "ratio": bo / bi}
        print(json.dumps(doc["summary"]), flush=True)
    doc["machine"]["load_average_now"] = os.getloadavg()
    write_json(args.out, doc)


if __name__ == "__main__":
    main()
