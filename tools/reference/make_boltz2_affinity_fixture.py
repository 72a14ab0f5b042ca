"""Boltz-2 affinity-stage fixture: boltz's second stage (`properties: - affinity`) on a predicted
complex, with the tiny affinity model (boltz2_aff.ckpt of make_boltz2_fixtures.py).

    .venv-reference/bin/python tools/reference/make_boltz2_affinity_fixture.py [--out tests/fixtures/boltz2_tiny]

(make_boltz2_fixtures.py runs it too.) The input (inputs/affinity/affinity.yaml) is a 230-residue
protein with an MSA, the binder (a SMILES ligand), a CCD ligand and a short second protein far
from the binder. Its structure is given synthetic coordinates (a random walk of 3.8 A steps, atoms
scattered around their residue, the ligands beside residues 150 and 152) and saved as boltz saves
a stage-1 prediction (predictions/<id>/pre_affinity_<id>.npz). boltz's affinity data pipeline
(Boltz2InferenceDataModule with affinity=True, method "other") crops and featurises it, and the
tiny affinity model runs its forward on that batch (recycling 5, 3 sampling steps, 5 samples), as
`boltz predict` runs the affinity stage. Writes affinity.safetensors:

  structure.coords        (A, 3) the structure's atom coordinates (boltz's atom order)
  feat.<name>             the batch (batch dimension kept), as the other cases store it; one-hot
                          tables are stored as `onehot.<name>`: the index of each row's 1 (-1 for
                          an all-zero row), with `onehot.<name>.classes` its class count
  affinity.mw             the binder's molecular weight boltz records (heavy atoms)
  affinity.aug_rot (U, 3, 3), affinity.aug_trans (U, 3)
                          each residue's random motion of ref_pos (see boltz2_dump_inputs.py)
  run.x0_randn, run.quat_randn, run.trans_randn, run.eps_randn
                          the sampler's random draws, in the order taken
  run.sample_atom_coords (5, A, 3), run.iptm (5), run.best_idx
  run.s_inputs_affinity   the input embedding with the affinity profile
  run.affinity_pred_value, run.affinity_probability_binary and the per-module ...1 / ...2
                          (boltz predict's default: no molecular-weight correction)
  run.affinity_pred_value_mw_corrected
                          the same run's value with --affinity_mw_correction
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import boltz2_tiny as bt  # noqa: E402

NAME = "affinity"
SAMPLING_STEPS = 3
SAMPLES = 5


def protein_sequence(n: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    letters = "ACDEFGHIKLMNPQRSTVWY"
    return "M" + "".join(letters[i] for i in rng.integers(0, 20, n - 1))


def case_files() -> tuple[str, dict]:
    seq = protein_sequence(230, 3)
    # MSA rows: substitutions, a gap run and insertions, including one in the query row (boltz
    # counts it as a deletion of the query: the affinity profile's deletion mean sees it)
    rows = [seq[:40] + "ac" + seq[40:]]
    s1 = list(seq)
    for i in range(5, 230, 17):
        s1[i] = "A" if s1[i] != "A" else "G"
    rows.append("".join(s1))
    rows.append(seq[:100] + "-----" + seq[105:200] + "kkw" + seq[200:])
    rows.append(seq[:10] + "W" + seq[11:])
    a3m = "".join(f">s{i}\n{r}\n" for i, r in enumerate(rows))
    yaml = f"""version: 1
sequences:
  - protein:
      id: A
      sequence: {seq}
      msa: affinity_a.a3m
  - ligand:
      id: B
      smiles: 'CC(=O)Oc1ccccc1C(=O)O'
  - ligand:
      id: C
      ccd: EOH
  - protein:
      id: D
      sequence: GSHMKEVLRQ
      msa: empty
properties:
  - affinity:
      binder: B
"""
    return yaml, {"affinity_a.a3m": a3m}


def place_atoms(structure) -> np.ndarray:
    """Synthetic predicted coordinates for every atom of the structure (float32)."""
    rng = np.random.default_rng(21)
    atoms, residues, chains = structure.atoms, structure.residues, structure.chains
    coords = np.zeros((len(atoms), 3), dtype=np.float32)
    steps = rng.normal(size=(400, 3))
    steps *= 3.8 / np.linalg.norm(steps, axis=1, keepdims=True)
    walk = np.cumsum(steps, axis=0)
    anchors = {"B": walk[150] + 5.0, "C": walk[152] - 4.0, "D": walk[0] + 180.0}
    for chain in chains:
        name = str(chain["name"])
        for r in residues[chain["res_idx"]: chain["res_idx"] + chain["res_num"]]:
            centre = walk[r["res_idx"]] if name == "A" else anchors[name] + 3.8 * r["res_idx"]
            a0, n = r["atom_idx"], r["atom_num"]
            coords[a0:a0 + n] = centre + rng.normal(size=(n, 3)) * 1.3
            if name == "A" or name == "D":  # the center atom (CA) at the walk point
                coords[r["atom_center"]] = centre
    return coords.astype(np.float32)


ONEHOT = ("atom_to_token", "token_to_rep_atom", "token_to_center_atom", "r_set_to_rep_atom",
          "ref_atom_name_chars", "ref_element", "atom_backbone_feat", "res_type",
          "contact_conditioning", "profile_affinity", "template_restype")


def onehot_or_dense(name: str, t: torch.Tensor) -> dict:
    """A one-hot table as the index of each row's 1 (see the module docstring), else as is."""
    t = t.float()
    if name in ONEHOT:
        assert torch.all((t == 0) | (t == 1)) and torch.all(t.sum(-1) <= 1), name
        idx = torch.where(t.sum(-1) > 0, t.argmax(-1), torch.full(t.shape[:-1], -1))
        return {f"onehot.{name}": idx.float(),
                f"onehot.{name}.classes": torch.tensor([float(t.shape[-1])])}
    if t.numel() and torch.equal(t, t.round()) and t.abs().max() <= 2048:
        t = t.half()
    return {f"feat.{name}": t.contiguous()}


def featurize_affinity(work: Path, mol_dir: Path, ligand_mols_out: Path):
    """boltz's stage-1 processing of the case, the synthetic prediction saved as boltz saves it,
    and the affinity stage's batch; the random motions of ref_pos recorded."""
    from rdkit.Chem import AllChem, Descriptors

    # boltz reads AllChem.Descriptors, which older RDKit releases imported as a side effect
    if not hasattr(AllChem, "Descriptors"):
        AllChem.Descriptors = Descriptors

    from boltz.data.module.inferencev2 import Boltz2InferenceDataModule
    from boltz.data.types import Coords, Interface, Manifest, StructureV2
    from boltz.main import process_inputs

    yaml_text, msas = case_files()
    inp = work / "input"
    inp.mkdir(parents=True)
    for f, text in msas.items():
        (inp / f).write_text(text)
    (inp / f"{NAME}.yaml").write_text(yaml_text)
    out_dir = work / "processed_root"
    cwd = os.getcwd()
    os.chdir(inp)
    try:
        with bt.seeded_etkdg() as ligand_mols:  # as in boltz2_tiny.featurize
            process_inputs(data=[inp / f"{NAME}.yaml"], out_dir=out_dir,
                           ccd_path=mol_dir.parent / "ccd.pkl", mol_dir=mol_dir, msa_server_url="",
                           msa_pairing_strategy="greedy", boltz2=True)
    finally:
        os.chdir(cwd)
    processed = out_dir / "processed"
    manifest = Manifest.load(processed / "manifest.json")
    record = manifest.records[0]
    assert record.affinity is not None, "the case asks for affinity"

    bt.save_ligand_mols(ligand_mols, ligand_mols_out)

    # The stage-1 prediction: the processed structure with coordinates, every atom present.
    structure = StructureV2.load(processed / "structures" / f"{record.id}.npz")
    structure = structure.remove_invalid_chains()
    coords = place_atoms(structure)
    atoms = structure.atoms.copy()
    atoms["coords"] = coords
    atoms["is_present"] = True
    residues = structure.residues.copy()
    residues["is_present"] = True
    pred = replace(structure, atoms=atoms, residues=residues,
                   interfaces=np.array([], dtype=Interface),
                   coords=np.array([(x,) for x in coords], dtype=Coords))
    target_dir = work / "predictions"
    (target_dir / record.id).mkdir(parents=True)
    np.savez_compressed(target_dir / record.id / f"pre_affinity_{record.id}.npz", **asdict(pred))

    dm = Boltz2InferenceDataModule(
        manifest=manifest, target_dir=target_dir, msa_dir=processed / "msa", mol_dir=mol_dir,
        num_workers=0, constraints_dir=None, template_dir=None,
        extra_mols_dir=processed / "mols", override_method="other", affinity=True)
    torch.manual_seed(0)
    with bt.recorded_motions() as (rots, trans):
        batch = next(iter(dm.predict_dataloader()))
    return batch, coords, record, torch.stack(rots).float(), torch.stack(trans).float()


def run_affinity(batch: dict) -> dict:
    """The tiny affinity model's forward on the batch, as the affinity stage calls it, recording
    the sampler's draws."""
    model = bt.build_affinity_model()
    sm = model.structure_module
    draws = []
    real_randn, real_sample = torch.randn, sm.sample

    def logged_randn(*args, **kwargs):
        t = real_randn(*args, **kwargs)
        draws.append(t.detach().clone())
        return t

    def sample(**kwargs):
        torch.randn = logged_randn
        try:
            return real_sample(**kwargs)
        finally:
            torch.randn = real_randn

    s_aff = {}
    real_embed = model.input_embedder.forward

    def embed(feats, affinity=False):
        r = real_embed(feats, affinity=affinity)
        if affinity:
            s_aff["s"] = r.detach().clone()
        return r

    sm.sample = sample
    model.input_embedder.forward = embed
    feats = {k: (v.float() if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
             for k, v in batch.items()}
    def forward(mw_correction: bool):
        model.affinity_mw_correction = mw_correction
        torch.manual_seed(4321)
        with torch.no_grad():
            return model(feats, recycling_steps=5, num_sampling_steps=SAMPLING_STEPS,
                         diffusion_samples=SAMPLES, max_parallel_samples=1,
                         run_confidence_sequentially=True)

    try:
        # boltz predict's default (no --affinity_mw_correction), then the same run corrected
        res = forward(False)
        n_draws = len(draws)
        corrected = forward(True)
        del draws[n_draws:]
    finally:
        del sm.sample
        del model.input_embedder.forward
    assert torch.equal(corrected["affinity_pred_value1"], res["affinity_pred_value1"])
    n = SAMPLING_STEPS
    assert len(draws) == 1 + 3 * n, f"{len(draws)} draws for {n} steps"
    out = {
        "run.x0_randn": draws[0],
        "run.quat_randn": torch.stack([draws[1 + 3 * i] for i in range(n)]),
        "run.trans_randn": torch.stack([draws[2 + 3 * i] for i in range(n)]),
        "run.eps_randn": torch.stack([draws[3 + 3 * i] for i in range(n)]),
        "run.sample_atom_coords": res["sample_atom_coords"],
        "run.iptm": res["iptm"],
        "run.best_idx": torch.argsort(res["iptm"], descending=True)[:1].float(),
        "run.s_inputs_affinity": s_aff["s"][0],
    }
    for k in ("affinity_pred_value", "affinity_probability_binary", "affinity_pred_value1",
              "affinity_probability_binary1", "affinity_pred_value2", "affinity_probability_binary2"):
        out["run." + k] = res[k].reshape(1).float()
    out["run.affinity_pred_value_mw_corrected"] = corrected["affinity_pred_value"].reshape(1).float()
    return out


def write_fixture(out: Path) -> None:
    case_dir = out / "inputs" / NAME
    if case_dir.exists():
        shutil.rmtree(case_dir)
    case_dir.mkdir(parents=True)
    yaml_text, msas = case_files()
    (case_dir / f"{NAME}.yaml").write_text(yaml_text)
    for f, text in msas.items():
        (case_dir / f).write_text(text)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    with tempfile.TemporaryDirectory() as td:
        td = Path(td)
        bt.make_mols_dir(td / "mols")
        batch, coords, record, rot, trans = featurize_affinity(td / "work", td / "mols",
                                                               case_dir / "ligand_mols")
        tensors = {"structure.coords": torch.from_numpy(coords),
                   "affinity.mw": torch.tensor([float(record.affinity.mw)], dtype=torch.float64).float(),
                   "affinity.aug_rot": rot, "affinity.aug_trans": trans}
        # training targets, and the physical potentials' constraints (the affinity stage reads
        # no constraints folder, so boltz's are empty and its model does not read them)
        for k, v in bt.tensor_feats(batch).items():
            if k in ("disto_target", "disto_coords_ensemble", "coords", "bfactor", "plddt") or \
                    k.startswith(("rdkit_", "chiral_", "stereo_", "planar_", "connected_",
                                  "symmetric_")):
                continue
            tensors.update(onehot_or_dense(k, v))
        tensors.update({k: v.detach().float().contiguous() for k, v in run_affinity(batch).items()})
    tmp = out / f"{NAME}.safetensors.tmp"
    save_file(tensors, str(tmp), metadata={"case": NAME, "mw": repr(float(record.affinity.mw))})
    tmp.rename(out / f"{NAME}.safetensors")
    print(f"{NAME}: {len(tensors)} tensors, mw {record.affinity.mw}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(HERE.parent.parent / "tests/fixtures/boltz2_tiny"))
    write_fixture(Path(ap.parse_args().out))


if __name__ == "__main__":
    main()
