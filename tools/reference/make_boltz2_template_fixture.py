"""Boltz-2 template fixtures beyond the `template` parity case: boltz's alignment helpers on
seeded random sequence pairs, and its template features for a PDB-format template.

    .venv-reference/bin/python tools/reference/make_boltz2_template_fixture.py [--out tests/fixtures/boltz2_tiny]

Writes into --out:
  template_alignments.tsv   one line per seeded pair (small alphabets, so that co-optimal
                            alignments and ties are common): kind `global` (query, target, the
                            score of schema.get_global_alignment_score), kind `local` (query,
                            target, every alignment of schema.get_local_alignments as
                            qst-qen-tst-ten joined by commas, `-` for none), kind `assign` (a score
                            matrix as rows joined by `;` of values joined by `,`, and scipy's
                            linear_sum_assignment(maximize=True) as row-col pairs joined by `,`)
  inputs/template_pdb/...   a protein with a PDB-format template (1UBQ, whose subchain boltz names
                            A1) and one untemplated chain
  template_pdb.safetensors  `feat.template_*` and `feat.visibility_ids` of that input as boltz
                            featurises it (no model outputs)
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from scipy.optimize import linear_sum_assignment

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import boltz2_tiny as bt  # noqa: E402
from boltz.data.parse.schema import get_global_alignment_score, get_local_alignments  # noqa: E402

bt.CASES["template_pdb"] = (
    # Ubiquitin residues 2-30 with two substitutions; template_id A1 is boltz's name for the PDB
    # file's chain A (parse_pdb renames subchains to chain + count).
    """version: 1
sequences:
  - protein:
      id: A
      sequence: QIFVKTLTGKAITLEVEPSDTIENVKAKI
      msa: empty
  - protein:
      id: B
      sequence: GSPEEK
      msa: empty
templates:
  - pdb: 1ubq.pdb
    chain_id: A
    template_id: A1
""",
    {"1ubq.pdb": bt.STRUCTURES / "ubiquitin.pdb"})


def alignment_lines(seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for k in range(300):
        alphabet = rng.choice(["AC", "ACDE", "ACDEFGHIKLMNPQRSTVWYX", "WGQ"])
        q = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 16)))
        t = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 16)))
        if k % 2 == 0:
            lines.append(f"global\t{q}\t{t}\t{get_global_alignment_score(q, t):g}")
        else:
            al = get_local_alignments(q, t)
            enc = ",".join(f"{a.query_st}-{a.query_en}-{a.template_st}-{a.template_en}" for a in al)
            lines.append(f"local\t{q}\t{t}\t{enc or '-'}")
    for _ in range(200):
        nr, nc = rng.randint(1, 5), rng.randint(1, 5)
        m = [[float(rng.choice([1, 2, 3, 5, 12.5, -4])) for _ in range(nc)] for _ in range(nr)]
        r, c = linear_sum_assignment(np.array(m), maximize=True)
        mat = ";".join(",".join(f"{v:g}" for v in row) for row in m)
        lines.append(f"assign\t{mat}\t{','.join(f'{a}-{b}' for a, b in zip(r, c))}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(HERE.parent.parent / "tests/fixtures/boltz2_tiny"))
    args = ap.parse_args()
    out = Path(args.out)
    text = "kind\ta\tb\texpected\n" + "\n".join(alignment_lines()) + "\n"
    tmp = out / "template_alignments.tsv.tmp"
    tmp.write_text(text)
    tmp.rename(out / "template_alignments.tsv")

    bt.write_case("template_pdb", out / "inputs" / "template_pdb")
    with tempfile.TemporaryDirectory() as td:
        feats = bt.featurize("template_pdb", Path(td), (out / "mols").resolve())
    tensors = {f"feat.{k}": v[0].detach().float().contiguous() for k, v in feats.items()
               if isinstance(v, torch.Tensor) and (k.startswith("template_") or k == "visibility_ids")}
    tmp = out / "template_pdb.safetensors.tmp"
    save_file(tensors, str(tmp), metadata={"case": "template_pdb"})
    tmp.rename(out / "template_pdb.safetensors")
    print(f"template_alignments.tsv, template_pdb: {len(tensors)} tensors")


if __name__ == "__main__":
    main()
