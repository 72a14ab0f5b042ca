"""The Python package against the committed upstream references, against the files the CLI
writes for the same input, and as an API: inputs, zero-copy arrays, errors, threads."""
import gc
import json
import os
import struct
import subprocess
import threading

import numpy as np
import pytest

import bioinfer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
CLI = os.environ.get("BIOINFER_BIN", os.path.join(ROOT, "build", "bioinfer"))
LM_FIXTURES = ["esm2_tiny", "esm2_tiny_hd12", "esmc_tiny", "esmc_tiny_hd10", "esmc_tiny_pth"]


def read_safetensors(path):
    """A safetensors file's F32 tensors as NumPy arrays (the format: u64 header size, JSON
    header, raw little-endian data)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "F32", (k, v["dtype"])
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dtype="<f4").reshape(v["shape"])
    return out


def cases(model):
    with open(os.path.join(FIXTURES, model, "cases.json")) as f:
        return {c["id"]: c["sequence"] for c in json.load(f)["cases"]}


def close(got, ref, what):
    """The parity bar of docs/parity.md: PCC >= 0.99999 and relative L2 <= 1e-5."""
    got, ref = np.asarray(got, np.float64).ravel(), np.asarray(ref, np.float64).ravel()
    assert got.shape == ref.shape, what
    rel = np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30)
    pcc = np.corrcoef(got, ref)[0, 1] if got.size > 1 else 1.0
    assert rel <= 1e-5 and pcc >= 0.99999, f"{what}: relative L2 {rel:.2e}, PCC {pcc:.7f}"


@pytest.fixture(scope="module", params=LM_FIXTURES)
def fixture_model(request):
    return request.param, bioinfer.load(os.path.join(FIXTURES, request.param), threads=2)


def test_embeddings_and_logits_match_the_upstream_reference(fixture_model):
    name, model = fixture_model
    ref = read_safetensors(os.path.join(FIXTURES, name, "reference.safetensors"))
    seqs = cases(name)
    n = model.num_layers
    include = ["per_tok", "logits"] + (["contacts"] if model.architecture == "esm2" else [])
    results = model.embed(seqs, layers=[0, -1], include=include)
    assert [r.id for r in results] == list(seqs)
    for r in results:
        assert r.representations[0].shape == (r.length, model.hidden_size)
        close(r.representations[0], ref[f"{r.id}.hidden.0"][1:-1], f"{name} {r.id} layer 0")
        close(r.representations[n], ref[f"{r.id}.hidden.{n}"][1:-1], f"{name} {r.id} layer {n}")
        close(r.logits, ref[f"{r.id}.logits"][1:-1], f"{name} {r.id} logits")
        if "contacts" in include:
            close(r.contacts, ref[f"{r.id}.contacts"], f"{name} {r.id} contacts")


@pytest.mark.parametrize("name", ["esm2_tiny", "esmc_tiny"])
def test_results_equal_the_cli_files(name, tmp_path):
    seqs = cases(name)
    fasta = tmp_path / "in.fasta"
    fasta.write_text("".join(f">{k}\n{v}\n" for k, v in seqs.items()))
    include = "mean,per_tok,bos,logits" + (",contacts" if name.startswith("esm2") else "")
    out = tmp_path / "out"
    subprocess.run([CLI, "embed", str(fasta), "--weights", os.path.join(FIXTURES, name),
                    "--out-dir", str(out), "--include", include, "--repr-layers", "0,1,-1",
                    "--threads", "2", "--quiet"], check=True)
    model = bioinfer.load(os.path.join(FIXTURES, name), threads=2)
    results = model.embed(str(fasta), layers=(0, 1, -1), include=include.split(","))
    assert [r.id for r in results] == list(seqs)
    for r in results:
        with np.load(out / f"{r.id}.npz") as files:
            assert sorted(files.files) == sorted(r.arrays)
            for k in files.files:
                assert files[k].dtype == r.arrays[k].dtype == np.float32
                np.testing.assert_array_equal(r.arrays[k], files[k], err_msg=f"{r.id} {k}")


def test_inputs_as_list_dict_fasta_and_bare_sequence(tmp_path):
    model = bioinfer.load(os.path.join(FIXTURES, "esm2_tiny"), threads=2)
    seqs = cases("esm2_tiny")
    by_dict = model.embed(seqs)
    by_list = model.embed(list(seqs.values()), ids=list(seqs))
    (tmp_path / "a.fasta").write_text("".join(f">{k}\n{v}\n" for k, v in seqs.items()))
    by_fasta = model.embed(tmp_path / "a.fasta")
    for a, b, c in zip(by_dict, by_list, by_fasta):
        assert a.id == b.id == c.id
        np.testing.assert_array_equal(a.mean_representations[model.num_layers],
                                      b.mean_representations[model.num_layers])
        np.testing.assert_array_equal(a.mean_representations[model.num_layers],
                                      c.mean_representations[model.num_layers])
    bare = model.embed(seqs["ubq"])
    assert [r.id for r in bare] == ["sequence"]
    # a batch of one against the packed batch: within the 1e-5 of docs/parity.md
    np.testing.assert_allclose(bare[0].mean_representations[3], by_dict[0].mean_representations[3],
                               rtol=0, atol=1e-5)
    assert [r.id for r in model.embed(list(seqs.values()))] == [str(i) for i in range(len(seqs))]
    # identical sequences are computed once and each record gets the arrays
    twice = model.embed({"a": seqs["ubq"], "b": seqs["ubq"]}, include=("per_tok",))
    np.testing.assert_array_equal(twice[0].representations[3], twice[1].representations[3])
    chunks = list(model.iter_embed(seqs, chunk=2))
    assert [r.id for r in chunks] == list(seqs)
    # the helpers are embed's arrays
    np.testing.assert_array_equal(model.logits(seqs)[0], model.embed(seqs, include="logits")[0].logits)
    np.testing.assert_array_equal(model.contacts(seqs)[1], model.embed(seqs, include="contacts")[1].contacts)


def test_arrays_are_views_that_outlive_the_model():
    model = bioinfer.load(os.path.join(FIXTURES, "esm2_tiny"), threads=2)
    r = model.embed({"ubq": cases("esm2_tiny")["ubq"]}, include=("per_tok", "mean"))[0]
    per_tok = r.representations[3]
    assert not per_tok.flags.owndata and per_tok.base is not None  # the engine's buffer, no copy
    kept = per_tok.copy()
    del model, r
    gc.collect()
    np.testing.assert_array_equal(per_tok, kept)
    assert per_tok.sum() == kept.sum()


def test_errors_are_python_exceptions(tmp_path):
    model = bioinfer.load(os.path.join(FIXTURES, "esm2_tiny"), threads=2)
    with pytest.raises(ValueError, match="bad_one"):
        model.embed({"good": "MKV", "bad_one": "MK1V"})
    with pytest.raises(ValueError, match="duplicate id"):
        model.embed(["MKV", "MKT"], ids=["x", "x"])
    with pytest.raises(ValueError, match="unknown output"):
        model.embed("MKV", include=("attention",))
    with pytest.raises(ValueError, match="outside"):
        model.embed("MKV", layers=(7,))
    with pytest.raises(OSError):
        model.embed(tmp_path / "missing.fasta")
    with pytest.raises(KeyError, match="no_such_model"):
        bioinfer.load("no_such_model")
    with pytest.raises(OSError):
        bioinfer.load(str(tmp_path / "missing_dir" / "model"))
    with pytest.raises(ValueError, match="precision"):
        bioinfer.load(os.path.join(FIXTURES, "esm2_tiny"), precision="fp8")
    esmc = bioinfer.load(os.path.join(FIXTURES, "esmc_tiny"), threads=1)
    with pytest.raises(RuntimeError, match="contact"):
        esmc.embed("MKV", include=("contacts",))


def test_two_threads_call_one_model():
    model = bioinfer.load(os.path.join(FIXTURES, "esmc_tiny"), threads=1)
    seqs = cases("esmc_tiny")
    want = model.embed(seqs, include=("per_tok", "logits"))
    got, errors = {}, []

    def run(k):
        try:
            for _ in range(3):
                got[k] = model.embed(seqs, include=("per_tok", "logits"))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k in range(2):
        for a, b in zip(want, got[k]):
            for key in a.arrays:
                np.testing.assert_array_equal(a.arrays[key], b.arrays[key])


def test_ctrl_c_stops_a_long_call():
    """SIGINT during a long embed: the call raises KeyboardInterrupt after its current batch."""
    script = f"""
import random, sys, time
sys.path.insert(0, {os.path.dirname(bioinfer.__path__[0])!r})
import bioinfer
model = bioinfer.load({os.path.join(FIXTURES, "esm2_tiny")!r}, threads=1)
rng = random.Random(0)
seqs = ["".join(rng.choice("ACDEFGHIKLMNPQRSTVWY") for _ in range(300)) for _ in range(40000)]
print("started", flush=True)
t0 = time.time()
try:
    model.embed(seqs)
    print("finished", flush=True)
except KeyboardInterrupt:
    print(f"interrupted {{time.time() - t0:.1f}}", flush=True)
"""
    import signal
    import sys
    import time
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "started"
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0, out
    assert out.startswith("interrupted"), out


# (fixture, input given to predict and fold) for each structure model
FOLDS = [
    ("esmfold_tiny", {"ubq_part": "MQIFVKTLTGKTITLEVEPSDTIENVKAK", "dimer": "MKTAYIAK:GSHMLEDP"}),
    ("esmfold2_tiny", {"mono": "MQIFVKTLTGKTITLEVEPS"}),
]


@pytest.mark.parametrize("name,seqs", FOLDS)
def test_folds_equal_the_cli_files(name, seqs, tmp_path):
    fasta = tmp_path / "in.fasta"
    fasta.write_text("".join(f">{k}\n{v}\n" for k, v in seqs.items()))
    out = tmp_path / "out"
    subprocess.run([CLI, "predict", str(fasta), "--weights", os.path.join(FIXTURES, name),
                    "--out-dir", str(out), "--write-pae", "--threads", "2", "--quiet"], check=True)
    model = bioinfer.load(os.path.join(FIXTURES, name), threads=2)
    assert isinstance(model, bioinfer.StructureModel)
    preds = model.fold(seqs)
    assert [p.id for p in preds] == list(seqs)
    for p in preds:
        assert p.to_pdb() == (out / f"{p.id}.pdb").read_text()
        np.testing.assert_array_equal(p.pae, np.load(out / f"{p.id}_pae.npy"))
        conf = json.loads((out / f"{p.id}.json").read_text())
        assert p.ptm == pytest.approx(conf["ptm"], abs=1e-6)
        np.testing.assert_allclose(100 * p.token_plddt, conf["plddt"], rtol=0, atol=1e-3)
        assert p.coords.shape == (len(p.atoms), 3) and p.plddt.shape == (len(p.atoms),)
        assert "_atom_site." in p.to_mmcif()
        same = bioinfer.compare(p, out / f"{p.id}.pdb")
        assert same["aligned"] == len(p.tokens) and same["rmsd"] < 1e-3 and same["tm_score"] > 0.999
    one = model.fold(next(iter(seqs.values())))
    assert isinstance(one, bioinfer.FoldResult)


def test_boltz2_folds_its_yaml_as_the_cli_does(tmp_path):
    src = os.path.join(ROOT, "examples", "boltz2", "protein_ligand.yaml")
    out = tmp_path / "out"
    subprocess.run([CLI, "predict", src, "--weights", os.path.join(FIXTURES, "boltz2_tiny"),
                    "--out-dir", str(out), "--threads", "2", "--quiet"], check=True)
    model = bioinfer.load(os.path.join(FIXTURES, "boltz2_tiny"), threads=2)
    p = model.fold(src)
    assert p.id == "protein_ligand"
    # boltz's layout: boltz_results_<name>/predictions/<name>/<name>_model_0.cif
    written = [os.path.join(d, f) for d, _, fs in os.walk(out) for f in fs
               if f == "protein_ligand_model_0.cif"]
    assert len(written) == 1, list(os.walk(out))
    assert p.to_mmcif() == open(written[0]).read()
    with pytest.raises(FileNotFoundError):
        model.fold(str(tmp_path / "missing.yaml"))


def test_boltz2_warns_where_boltz_forgives(tmp_path):
    # an MSA whose first row is not the chain's sequence: boltz warns and folds single-sequence
    (tmp_path / "other.a3m").write_text(">query\nGGGGGG\n>hit\nGGGAGG\n")
    src = tmp_path / "mismatch.yaml"
    src.write_text("version: 1\nsequences:\n  - protein:\n      id: A\n      sequence: MKTAYIAK\n"
                   "      msa: other.a3m\n")
    model = bioinfer.load(os.path.join(FIXTURES, "boltz2_tiny"), threads=2)
    with pytest.warns(UserWarning, match="folds single-sequence"):
        p = model.fold(str(src), num_recycles=0, sampling_steps=2)
    assert p.id == "mismatch"


def test_fold_errors():
    model = bioinfer.load(os.path.join(FIXTURES, "esmfold_tiny"), threads=1)
    with pytest.raises(ValueError, match="bad"):
        model.fold({"bad": "MKT1V"})
    with pytest.raises(ValueError, match="precision"):
        bioinfer.load(os.path.join(FIXTURES, "esmfold_tiny"), precision="int8")
    with pytest.raises(FileNotFoundError):
        bioinfer.compare(os.path.join(FIXTURES, "nothing.pdb"), os.path.join(ROOT, "examples", "boltz2", "1ubq.pdb"))


def test_progress_callbacks_report_and_can_stop():
    model = bioinfer.load(os.path.join(FIXTURES, "esm2_tiny"), threads=1)
    seqs = cases("esm2_tiny")
    seen = []
    model.embed(seqs, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(i + 1, len(seqs)) for i in range(len(seqs))]

    def stop(done, total):
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        model.embed(seqs, progress=stop)
    folder = bioinfer.load(os.path.join(FIXTURES, "esmfold_tiny"), threads=1)
    stages = []
    folder.fold({"a": "MKTAYIAK"}, progress=lambda *a: stages.append(a))
    assert stages and all(s[0] == "a" for s in stages)
    assert any(s[1].startswith("trunk") for s in stages), stages
    with pytest.raises(ZeroDivisionError):
        folder.fold("MKTAYIAK", progress=lambda *a: 1 / 0)


def test_pseudo_log_likelihood_matches_the_reference():
    """include=("pll",): the wild type's pseudo-log-likelihood from
    tools/reference/make_score_fixtures.py (transformers, one masked forward per residue)."""
    with open(os.path.join(FIXTURES, "score", "expected.json")) as f:
        expected = json.load(f)
    seq = expected["cases"]["short"]["wild_type"]
    for name in ("esm2_tiny", "esmc_tiny"):
        model = bioinfer.load(os.path.join(FIXTURES, name))
        (r,) = model.embed({"wt": seq}, include=("pll",))
        assert abs(r.pll - expected["models"][name]["short"]["pll_wild_type"]) < 1e-3
        assert r.mean_representations == {}


def test_arguments_are_checked_and_named(tmp_path):
    """Thread counts are bounded (far too many crashed the interpreter inside the OpenMP
    runtime); arguments of the wrong type raise TypeError naming the argument."""
    path = os.path.join(FIXTURES, "esm2_tiny")
    for n in (100000, 2**31, -1, bioinfer._bioinfer.max_threads() + 1):
        with pytest.raises(ValueError, match=r"threads: expected 0 \(all CPUs\) to"):
            bioinfer.load(path, threads=n)
    with pytest.raises(TypeError, match="threads: expected an integer or None, got float"):
        bioinfer.load(path, threads=2.5)
    with pytest.raises(TypeError, match="threads: expected an integer or None, got bool"):
        bioinfer.load(path, threads=True)
    with pytest.raises(TypeError, match="name_or_dir: expected a model name or directory, got int"):
        bioinfer.load(12345)
    model = bioinfer.load(path, threads=bioinfer._bioinfer.max_threads())
    with pytest.raises(TypeError, match="sequences: expected a sequence string, a FASTA path, a "
                                        "list of sequences or a dict id -> sequence, got int"):
        model.logits(12345)
    with pytest.raises(TypeError, match="toks_per_batch: expected an integer, got str"):
        model.embed(["MKV"], toks_per_batch="100")
    with pytest.raises(TypeError, match="include: expected a string or a list of strings, got int"):
        model.embed(["MKV"], include=5)
    assert model.logits(["MKV"])[0].shape == (3, 33)


def test_nonfinite_weights_are_refused_unless_allowed(tmp_path):
    """A checkpoint holding a NaN is refused naming the tensor; allow_nonfinite=True loads it
    (the CLI's --allow-nonfinite), and the record whose outputs are NaN then fails."""
    src = os.path.join(FIXTURES, "esm2_tiny")
    dst = tmp_path / "nan_model"
    dst.mkdir()
    with open(os.path.join(src, "config.json")) as f:
        (dst / "config.json").write_text(f.read())
    with open(os.path.join(src, "model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header_bytes = f.read(n)
        data = bytearray(f.read())
    header = json.loads(header_bytes)
    name = next(k for k, v in header.items()
                if k != "__metadata__" and v["dtype"] == "F32" and "intermediate.dense.weight" in k)
    start = header[name]["data_offsets"][0]
    data[start + 20:start + 24] = struct.pack("<f", float("nan"))  # flat index 5
    (dst / "model.safetensors").write_bytes(struct.pack("<Q", n) + header_bytes + bytes(data))
    with pytest.raises(RuntimeError, match=rf"tensor '{name}' holds a non-finite value \(NaN\) at "
                                           r"flat index 5.*allow_nonfinite=True"):
        bioinfer.load(str(dst))
    with pytest.raises(TypeError, match="allow_nonfinite: expected True or False"):
        bioinfer.load(str(dst), allow_nonfinite="yes")
    model = bioinfer.load(str(dst), allow_nonfinite=True)
    with pytest.raises(Exception, match="NaN or Inf"):
        model.embed(["MKTAYIAKQR"])
