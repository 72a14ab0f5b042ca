"""Writes the fuzz targets' seed inputs into tests/fuzz/regressions/<target>/seed-*.

Seeds are small, valid inputs of each kind, cut from the test fixtures or built
here (a safetensors file, a torch.save state dict, an npz, a finished embed shard, hub answers),
and a few damaged ones that must be refused (an npz, and a shard's npz, whose CRC-32 fails).
scripts/fuzz.sh adds the fixture files themselves to each target's starting corpus.

    .venv-reference/bin/python tests/fuzz/make_seeds.py
(torch and numpy from tools/reference/requirements.txt; run from the repository root, after
scripts/build.sh, which the merge seed's shard needs.)
"""
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import zipfile

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fuzz", "regressions")
FIX = os.path.join(ROOT, "tests", "fixtures")
DATA = os.path.join(FIX, "public")
SEP = b"\n--8<--\n"


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def read(*parts):
    with open(os.path.join(*parts), "rb") as f:
        return f.read()


def crc_mismatch(npz):
    """The npz with one byte flipped in the middle of its first member's data: the zip and the
    .npy headers stay valid, only the member's CRC-32 no longer matches."""
    raw = bytearray(npz)
    npy = raw.index(b"\x93NUMPY")
    data = npy + 10 + struct.unpack_from("<H", raw, npy + 8)[0]
    end = min(i for i in (raw.find(b"PK\x03\x04", data), raw.find(b"PK\x01\x02", data)) if i >= 0)
    raw[(data + end) // 2] ^= 0x5A
    return bytes(raw)


def safetensors(tensors):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def main():
    # FASTA: the shared sequences, the scoring fixture, and the shapes the parser must take
    put("fasta", "sequences.fasta", read(DATA, "sequences.fasta"))
    put("fasta", "short.fasta", read(FIX, "score", "short.fasta"))
    put("fasta", "edge.fasta", b">a desc\nMKT<mask>AY\n>b\r\nMK:TA*\n\n>c\n\n>a\nAC GT\n")
    # past the fuzz target's lowered record limit (64); ESM C records of chain breaks alone
    put("fasta", "records-limit.fasta", b"".join(b">r%d\nMK\n" % i for i in range(65)))
    put("fasta", "chain-breaks.fasta", b">a\n|\n>b\n||\n>c\nMK|V\n")

    for case in sorted(os.listdir(os.path.join(FIX, "boltz2_tiny", "inputs"))):
        d = os.path.join(FIX, "boltz2_tiny", "inputs", case)
        for f in sorted(os.listdir(d)):
            if f.endswith(".yaml"):
                put("boltz_input", f, read(d, f))
            if f.endswith(".a3m") or f.endswith(".csv"):
                put("msa", f, read(d, f))
    put("boltz_input", "chains.fasta", b">A|protein|./a.a3m\nMKTAYIAK\n>B|ligand\nCCO\n>C|rna\nACGU\n")
    # past the fuzz target's lowered SMILES limit (48 heavy atoms), and constraints naming
    # chains, residues and atoms the target lacks (checked before any weights load)
    head = b"version: 1\nsequences:\n  - protein:\n      id: A\n      sequence: MKTCYV\n      msa: empty\n"
    put("boltz_input", "smiles-limit.yaml",
        head + b"  - ligand:\n      id: L\n      smiles: '" + b"C" * 60 + b"'\n")
    put("boltz_input", "constraint-refs.yaml",
        head + b"  - ligand:\n      id: B\n      smiles: 'CC(=O)O'\nconstraints:\n"
        b"  - bond:\n      atom1: [A, 4, SG]\n      atom2: [B, 1, QQ]\n"
        b"  - pocket:\n      binder: Z\n      contacts: [[A, 9], [B, CA]]\n"
        b"  - contact:\n      token1: [A, x]\n      token2: [C, 1]\n")

    put("safetensors", "mixed.safetensors", safetensors({
        "w": ("F32", [2, 3], np.arange(6, dtype=np.float32).tobytes()),
        "h": ("F16", [4], np.ones(4, dtype=np.float16).tobytes()),
        "b": ("BF16", [2], struct.pack("<HH", 0x3F80, 0xC000)),
        "i": ("I64", [1], struct.pack("<q", 7)),
    }))
    put("safetensors", "empty.safetensors", safetensors({}))

    torch.manual_seed(0)
    sd = {"layer.weight": torch.randn(3, 4), "layer.bias": torch.zeros(3, dtype=torch.bfloat16),
          "half": torch.ones(2, 2, dtype=torch.float16)}
    buf = io.BytesIO()
    torch.save(sd, buf)
    put("torch_checkpoint", "state_dict.pth", buf.getvalue())
    buf = io.BytesIO()
    torch.save({"state_dict": sd, "hyper_parameters": {"a": 1, "b": [1.5, "x", None, True]}, "epoch": 3}, buf)
    put("torch_checkpoint", "trainer.ckpt", buf.getvalue())
    for f in sorted(os.listdir(os.path.join(FIX, "hostile_checkpoints"))):
        put("torch_checkpoint", f, read(FIX, "hostile_checkpoints", f))

    for f in ["ALA.pkl", "GLY.pkl", "SEP.pkl"]:
        put("mol_pickle", f, read(FIX, "boltz2_tiny", "mols", f))
    put("mol_pickle", "LIG1.pkl", read(FIX, "boltz2_tiny", "inputs", "affinity", "ligand_mols", "LIG1.pkl"))

    for m in ["esm2_tiny", "esmc_tiny", "esmfold_tiny", "esmfold2_tiny", "esmfold2_tiny_legacy"]:
        p = os.path.join(FIX, m, "config.json")
        if os.path.exists(p):
            put("config", m + ".json", read(p))
    # Boltz-2's hyper_parameters as its checkpoint holds them (read without importing boltz:
    # objects of boltz's classes among them come out as plain dicts)
    with zipfile.ZipFile(os.path.join(FIX, "boltz2_tiny", "boltz2_conf.ckpt")) as z:
        pkl = [n for n in z.namelist() if n.endswith("data.pkl")][0]

        class Loose(__import__("pickle").Unpickler):
            def find_class(self, mod, name):
                if mod == "collections":
                    return super().find_class(mod, name)
                class Opaque(dict):  # tensors and boltz's objects: written as {}
                    def __new__(cls, *a, **k):
                        return dict.__new__(cls)

                    def __init__(self, *a, **k):
                        pass

                return Opaque

            def persistent_load(self, pid):
                return None

        ckpt = Loose(io.BytesIO(z.read(pkl))).load()
    put("config", "boltz2_hyper_parameters.json", json.dumps(ckpt["hyper_parameters"], default=str).encode())

    # structures cut to their first residues, the rest of each file's layout kept
    pdb = read(DATA, "structures", "ubiquitin.pdb").split(b"\n")
    atoms = [l for l in pdb if l.startswith((b"ATOM", b"HETATM"))][:60]
    put("structure", "ubiquitin.pdb", b"\n".join([l for l in pdb if l.startswith((b"HEADER", b"SEQRES"))] + atoms + [b"END", b""]))
    for name in ["9obn.cif"]:
        lines, rows, out = read(FIX, "boltz2_tiny", "inputs", "template", name).split(b"\n"), 0, []
        for l in lines:
            if l.startswith((b"ATOM", b"HETATM")):
                rows += 1
                if rows > 60:
                    continue
            out.append(l)
        text = b"\n".join(out)
        put("structure", name, text[:60000] if len(text) > 60000 else text)

    arrays = {"mean": np.arange(8, dtype=np.float32), "per_tok": np.ones((3, 4), dtype=np.float32)}
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    put("npz", "savez.npz", buf.getvalue())
    put("npz", "crc-mismatch.npz", crc_mismatch(buf.getvalue()))
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    put("npz", "savez_compressed.npz", buf.getvalue())

    # one finished embed shard (the tiny ESM-2), as fuzz_merge.cpp splits it
    tmp = tempfile.mkdtemp()
    try:
        fa = os.path.join(tmp, "in.fasta")
        with open(fa, "w") as f:
            f.write(">p1\nMKTAYIAK\n")
        subprocess.run([os.path.join(ROOT, "build", "bioinfer"), "embed", fa, "--weights",
                        os.path.join(FIX, "esm2_tiny"), "--out-dir", os.path.join(tmp, "out"),
                        "--include", "mean"], check=True, stdout=subprocess.DEVNULL)
        out = os.path.join(tmp, "out")
        npz = [f for f in os.listdir(out) if f.endswith(".npz")][0]
        parts = []
        for f in ["results.json", "manifest.json"]:  # this machine's paths made relative
            parts.append(read(out, f).replace(FIX.encode(), b"tests/fixtures").replace(tmp.encode(), b"."))
        assert npz == "p1.npz"  # the name fuzz_merge.cpp writes the third part under
        put("merge", "shard", parts[0] + SEP + parts[1] + SEP + read(out, npz))
        put("merge", "shard-crc-mismatch", parts[0] + SEP + parts[1] + SEP + crc_mismatch(read(out, npz)))
    finally:
        shutil.rmtree(tmp)

    # tar archives the way boltz's mols.tar and Python's tarfile write them
    for fmt, name in [(tarfile.GNU_FORMAT, "gnu.tar"), (tarfile.PAX_FORMAT, "pax.tar"), (tarfile.USTAR_FORMAT, "ustar.tar")]:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
            d = tarfile.TarInfo("mols")
            d.type, d.mtime = tarfile.DIRTYPE, 0
            t.addfile(d)
            for member, body in [("mols/ALA.pkl", b"x" * 40), ("mols/" + "L" * 120 + ".pkl", b"y")]:
                if fmt == tarfile.USTAR_FORMAT and len(member) > 100:
                    continue
                i = tarfile.TarInfo(member)
                i.size, i.mtime = len(body), 0
                t.addfile(i, io.BytesIO(body))
        put("tar", name, buf.getvalue())

    head = (b"HTTP/1.1 302 Found\r\nLocation: /cdn/x\r\nHTTP/1.1 200 OK\r\nX-Repo-Commit: 0123abcd\r\n"
            b"X-Linked-Etag: \"" + b"a" * 64 + b"\"\r\nX-Linked-Size: 1234\r\nContent-Length: 10\r\nETag: W/\"abc\"\r\n\r\n")
    listing = json.dumps({"sha": "0123456789abcdef0123456789abcdef01234567",
                          "siblings": [{"rfilename": "config.json"}, {"rfilename": "model.safetensors"},
                                       {"rfilename": "data/weights/x.pth"}]}).encode()
    index = json.dumps({"metadata": {"total_size": 10},
                        "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}).encode()
    put("hub", "answers", head + SEP + listing + SEP + index)


if __name__ == "__main__":
    sys.exit(main())
