"""Boltz-2 parity fixtures: a tiny random-weight Boltz-2 built from the boltz package's modules,
saved as a Lightning checkpoint laid out as the released boltz2_conf.ckpt, and for each input case
its features and the reference's intermediate tensors.

    .venv-reference/bin/python tools/reference/make_boltz2_fixtures.py [--out tests/fixtures/boltz2_tiny]

Writes into --out:
  boltz2_conf.ckpt          the tiny model (state_dict + hyper_parameters)
  boltz2_aff.ckpt           the tiny affinity model (boltz2_aff.ckpt's layout: the structure model
                            with two affinity modules)
  inputs/<case>/...         the case's YAML and MSA files, as a user would write them
  mols/<RES>.pkl            the canonical residue molecules both sides read (RDKit, pickled),
                            and the CCD ligands the cases use (boltz2_tiny.CCD_MOLECULES)
  inputs/<case>/ligand_mols/LIG<k>.pkl
                            the molecules boltz made for the case's SMILES ligands (its conformer
                            depends on RDKit's version, so the other side can be given this one)
  affinity.safetensors, inputs/affinity/...
                            the affinity stage (make_boltz2_affinity_fixture.py; skipped with
                            --cases)
  <case>.safetensors        `feat.<name>`: the batch boltz's data pipeline hands the model (fp32
                            values; integer-valued ones stored as F16, which holds them exactly);
                            every other tensor comes from a part, named `<part>.<...>`

A part is a module tools/reference/boltz2_dump_<part>.py with
    dump(model, feats: dict, case: str) -> dict[str, torch.Tensor]
whose names all start with `<part>.`; parts are found by that file name pattern.
"""
from __future__ import annotations

import argparse
import importlib
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import boltz2_tiny as bt  # noqa: E402

# Features the parity tests never read (training targets).
DROPPED_FEATURES = ("disto_target", "disto_coords_ensemble", "coords", "bfactor", "plddt")


def feature_tensors(feats: dict) -> dict:
    out = {}
    for k, v in bt.tensor_feats(feats).items():
        if k in DROPPED_FEATURES:
            continue
        t = v.detach().float().contiguous()
        # Integer-valued features (one-hots, ids, masks) within fp16's exact range are stored as
        # F16, losslessly: readers widen them back to the same fp32 values.
        if t.numel() and torch.equal(t, t.round()) and t.abs().max() <= 2048:
            t = t.half()
        out[f"feat.{k}"] = t
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(HERE.parent.parent / "tests/fixtures/boltz2_tiny"))
    ap.add_argument("--cases", nargs="*", default=None)
    ap.add_argument("--parts", nargs="*", default=None, help="only these parts (default: all)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    parts = sorted(p.stem[len("boltz2_dump_"):] for p in HERE.glob("boltz2_dump_*.py"))
    if args.parts is not None:
        parts = [p for p in parts if p in args.parts]
    modules = {p: importlib.import_module(f"boltz2_dump_{p}") for p in parts}

    torch.set_num_threads(max(1, torch.get_num_threads()))
    if (out / "mols").exists():
        shutil.rmtree(out / "mols")
    bt.make_mols_dir(out / "mols")
    model = bt.build_model(seed=0)
    bt.write_checkpoint(model, out / "boltz2_conf.ckpt")
    bt.write_checkpoint(bt.build_affinity_model(), out / "boltz2_aff.ckpt",
                        hp=bt.affinity_hyper_parameters())

    cases = args.cases if args.cases is not None else list(bt.CASES)
    with tempfile.TemporaryDirectory() as td:
        for case in cases:
            bt.write_case(case, out / "inputs" / case)
            feats = bt.featurize(case, Path(td), out / "mols", seed=0,
                                 ligand_mols_out=out / "inputs" / case / "ligand_mols")
            tensors = feature_tensors(feats)
            for part, mod in modules.items():
                with torch.no_grad():
                    got = mod.dump(model, feats, case)
                for k, v in got.items():
                    assert k.startswith(part + "."), f"part {part} wrote {k}"
                    assert k not in tensors, f"{k} written twice"
                    tensors[k] = v.detach().float().contiguous()
            tmp = out / f"{case}.safetensors.tmp"
            save_file(tensors, str(tmp), metadata={"case": case, "parts": ",".join(parts)})
            tmp.rename(out / f"{case}.safetensors")
            print(f"{case}: {len(tensors)} tensors", flush=True)
    if args.cases is None:
        import make_boltz2_affinity_fixture

        make_boltz2_affinity_fixture.write_fixture(out)


if __name__ == "__main__":
    main()
