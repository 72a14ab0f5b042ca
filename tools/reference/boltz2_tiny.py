"""A tiny random-weight Boltz-2 built from the boltz package's own modules, its inputs, and its
features as boltz's own pipeline makes them. Shared by the Boltz-2 fixture parts
(boltz2_dump_*.py) and make_boltz2_fixtures.py.

The canonical residue molecules boltz reads from its cache (`mols/<RES>.pkl`, RDKit molecules with
CCD atom names and conformers) are made here with RDKit: heavy atoms named as the CCD names them,
one ETKDGv3 conformer, pickled with all properties. Both sides read the same molecules.
"""
from __future__ import annotations

import contextlib
import pickle
import random
import shutil
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

# Widths are small and head dimensions are not multiples of 8, so no kernel can lean on them.
TINY = dict(
    atom_s=20,
    atom_z=6,
    token_s=44,
    token_z=20,
    num_bins=64,
    atom_feature_dim=388,
    atoms_per_window_queries=32,
    atoms_per_window_keys=128,
    pairformer_blocks=2,
    pairformer_heads=4,  # 44 / 4 = 11 per head
    pairwise_head_width=6,
    pairwise_num_heads=2,
    msa_s=12,
    msa_blocks=2,
    template_dim=10,
    template_blocks=1,
    atom_encoder_depth=2,
    atom_encoder_heads=2,  # 20 / 2 = 10 per head
    token_transformer_depth=2,
    token_transformer_heads=4,  # 2 * 44 / 4 = 22 per head
    atom_decoder_depth=2,
    atom_decoder_heads=2,
    conditioning_transition_layers=2,
    dim_fourier=24,
    confidence_blocks=2,
)

# The released boltz2_conf.ckpt's shapes with boltz predict's inference overrides (PairformerArgsV2:
# 64 blocks, 16 heads; MSAModuleArgs; Boltz2DiffusionParams), for benchmarks at the real size.
RELEASED = dict(
    TINY,
    atom_s=128, atom_z=16, token_s=384, token_z=128,
    pairformer_blocks=64, pairformer_heads=16, pairwise_head_width=32, pairwise_num_heads=4,
    msa_s=64, msa_blocks=4, template_dim=64, template_blocks=2,
    atom_encoder_depth=3, atom_encoder_heads=4, token_transformer_depth=24,
    token_transformer_heads=16, atom_decoder_depth=3, atom_decoder_heads=4,
    conditioning_transition_layers=2, dim_fourier=256, confidence_blocks=8,
)

PROTEIN_3 = {
    "A": "ALA", "R": "ARG", "N": "ASN", "D": "ASP", "C": "CYS", "Q": "GLN", "E": "GLU",
    "G": "GLY", "H": "HIS", "I": "ILE", "L": "LEU", "K": "LYS", "M": "MET", "F": "PHE",
    "P": "PRO", "S": "SER", "T": "THR", "W": "TRP", "Y": "TYR", "V": "VAL",
}
NUCLEIC = {"A": "A", "C": "C", "G": "G", "U": "U"}  # RNA residue names; DNA ones are D + letter


def hyper_parameters(dims: dict = TINY) -> dict:
    """Boltz2.__init__ arguments of the tiny model (or of `dims`), laid out as the released
    checkpoint's are."""
    from boltz.main import Boltz2DiffusionParams, BoltzSteeringParams

    t = dims
    pairformer_args = dict(num_blocks=t["pairformer_blocks"], num_heads=t["pairformer_heads"],
                           dropout=0.0, pairwise_head_width=t["pairwise_head_width"],
                           pairwise_num_heads=t["pairwise_num_heads"], activation_checkpointing=False,
                           offload_to_cpu=False, v2=True)
    return dict(
        atom_s=t["atom_s"], atom_z=t["atom_z"], token_s=t["token_s"], token_z=t["token_z"],
        num_bins=t["num_bins"], atom_feature_dim=t["atom_feature_dim"],
        atoms_per_window_queries=t["atoms_per_window_queries"],
        atoms_per_window_keys=t["atoms_per_window_keys"],
        training_args=dict(recycling_steps=3, sampling_steps=200, diffusion_multiplicity=1,
                           diffusion_samples=1, confidence_loss_weight=1.0),
        validation_args=dict(recycling_steps=3, sampling_steps=200, diffusion_samples=1,
                             symmetry_correction=False, run_confidence_sequentially=False),
        embedder_args=dict(atom_encoder_depth=t["atom_encoder_depth"],
                           atom_encoder_heads=t["atom_encoder_heads"],
                           add_method_conditioning=True, add_modified_flag=True,
                           add_cyclic_flag=True, add_mol_type_feat=True),
        msa_args=dict(msa_s=t["msa_s"], msa_blocks=t["msa_blocks"], msa_dropout=0.0, z_dropout=0.0,
                      use_paired_feature=True, pairwise_head_width=t["pairwise_head_width"],
                      pairwise_num_heads=t["pairwise_num_heads"], activation_checkpointing=False,
                      offload_to_cpu=False, subsample_msa=False, num_subsampled_msa=1024),
        pairformer_args=pairformer_args,
        score_model_args=dict(sigma_data=16, dim_fourier=t["dim_fourier"],
                              atom_encoder_depth=t["atom_encoder_depth"],
                              atom_encoder_heads=t["atom_encoder_heads"],
                              token_transformer_depth=t["token_transformer_depth"],
                              token_transformer_heads=t["token_transformer_heads"],
                              atom_decoder_depth=t["atom_decoder_depth"],
                              atom_decoder_heads=t["atom_decoder_heads"],
                              conditioning_transition_layers=t["conditioning_transition_layers"],
                              activation_checkpointing=False, transformer_post_ln=False),
        diffusion_process_args=asdict(Boltz2DiffusionParams()),
        diffusion_loss_args=dict(add_smooth_lddt_loss=True, nucleotide_loss_weight=5.0,
                                 ligand_loss_weight=10.0),
        confidence_model_args=dict(
            num_dist_bins=64, max_dist=22, add_s_to_z_prod=True, add_s_input_to_s=True,
            add_z_input_to_z=True, use_s_diffusion=False,
            pairformer_args=dict(pairformer_args, num_blocks=t["confidence_blocks"]),
            confidence_args=dict(num_plddt_bins=50, num_pde_bins=64, num_pae_bins=64,
                                 use_separate_heads=True)),
        template_args=dict(template_dim=t["template_dim"], template_blocks=t["template_blocks"],
                           pairwise_head_width=t["pairwise_head_width"],
                           pairwise_num_heads=t["pairwise_num_heads"]),
        use_templates=True, use_templates_v2=True,
        confidence_prediction=True, token_level_confidence=True, alpha_pae=1.0,
        fix_sym_check=True, cyclic_pos_enc=True, bond_type_feature=True, predict_bfactor=True,
        ema=False, use_kernels=False, validate_structure=False, structure_prediction_training=True,
        steering_args=asdict(BoltzSteeringParams()),
        predict_args=dict(recycling_steps=1, sampling_steps=6, diffusion_samples=2,
                          max_parallel_samples=2, write_confidence_summary=True,
                          write_full_pae=True, write_full_pde=True),
    )


def affinity_args(blocks: int, head_width: int, heads: int, token_s: int, seq_heads: int,
                  head_blocks: int, head_heads: int) -> dict:
    """One affinity module's Boltz2 arguments (affinity_model_args<k>): a pair-only pairformer of
    `blocks` blocks (triangle attention of `heads` heads of `head_width`; `seq_heads` is the
    unused single-track setting), and heads of width `token_s` (transformer_args' other
    settings are not read)."""
    return dict(
        pairformer_args=dict(num_blocks=blocks, num_heads=seq_heads, dropout=0.0,
                             pairwise_head_width=head_width, pairwise_num_heads=heads,
                             activation_checkpointing=False, offload_to_cpu=False, v2=True),
        transformer_args=dict(token_s=token_s, num_blocks=head_blocks, num_heads=head_heads,
                              activation_checkpointing=False),
        num_dist_bins=64, max_dist=22)


# The tiny affinity model's two modules: 2 pairformer blocks (head width 6, 2 heads), heads of
# width 22.
AFFINITY_ARGS = affinity_args(2, 6, 2, 22, seq_heads=4, head_blocks=1, head_heads=2)
# At the released shapes, for benchmarks. The modules' depth is not in boltz's code (it comes with
# boltz2_aff.ckpt's hyper_parameters, which cannot be downloaded here): 8 pairformer blocks each
# is assumed, with the trunk's pair widths; the modules are a small part of the affinity stage.
AFFINITY_RELEASED = affinity_args(8, 32, 4, 384, seq_heads=16, head_blocks=4, head_heads=16)


def affinity_hyper_parameters(dims: dict = TINY, args: dict = AFFINITY_ARGS) -> dict:
    """Boltz2.__init__ arguments of an affinity model (boltz2_aff.ckpt's layout): the structure
    model's with an ensemble of two affinity modules."""
    import copy

    hp = hyper_parameters(dims)
    hp.update(affinity_prediction=True, affinity_ensemble=True,
              affinity_model_args1=copy.deepcopy(args), affinity_model_args2=copy.deepcopy(args))
    return hp


def make_affinity_model(seed: int, dims: dict = TINY, args: dict = AFFINITY_ARGS):
    """A random-weight affinity model (see affinity_hyper_parameters)."""
    from boltz.model.models.boltz2 import Boltz2

    torch.manual_seed(seed)
    model = Boltz2(**affinity_hyper_parameters(dims, args))
    randomize_(model, seed)
    model.eval()
    return model


_AFFINITY_MODEL = None


def build_affinity_model(seed: int = 1):
    """The tiny affinity model (built once per process; the same weights every time)."""
    global _AFFINITY_MODEL
    if _AFFINITY_MODEL is None:
        _AFFINITY_MODEL = make_affinity_model(seed)
    return _AFFINITY_MODEL


def randomize_(model: torch.nn.Module, seed: int) -> None:
    """Every parameter random (boltz zero-initialises many final projections and gates, which would
    make whole modules vanish): weights ~ N(0, 1/fan_in), biases ~ N(0, 0.1), norm scales
    1 + N(0, 0.1)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g) / max(p.shape[-1], 1) ** 0.5)
            elif name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))


def build_model(seed: int = 0, dims: dict = TINY):
    from boltz.model.models.boltz2 import Boltz2

    torch.manual_seed(seed)
    model = Boltz2(**hyper_parameters(dims))
    randomize_(model, seed)
    model.eval()
    return model


def write_checkpoint(model, path: Path, dims: dict = TINY, hp: dict | None = None) -> None:
    """A Lightning checkpoint as boltz's released ones are laid out: a torch zip holding
    `state_dict` and `hyper_parameters` (plus Lightning's bookkeeping). One option is an object
    that is not plain data (a dataclass), as released hyper-parameters can hold; a reader skips it."""
    from boltz.main import BoltzSteeringParams

    hp = dict(hp) if hp is not None else hyper_parameters(dims)
    hp["steering_args"] = BoltzSteeringParams()
    ckpt = {
        "epoch": 0, "global_step": 0, "pytorch-lightning_version": "2.5.0",
        "state_dict": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "hyper_parameters": hp,
    }
    tmp = path.with_suffix(".tmp")
    torch.save(ckpt, tmp)
    tmp.rename(path)


# ---- canonical residue molecules -----------------------------------------------------------------

def _residue_from_sequence(letter: str, flavor: int, keep_phosphate: bool):
    """Heavy atoms of one residue with their PDB names, from RDKit's sequence builder. Nucleotides
    are cut out of a dinucleotide so they keep P, OP1 and OP2."""
    from rdkit import Chem

    seq = letter * 2 if keep_phosphate else letter
    mol = Chem.MolFromSequence(seq, flavor=flavor)
    Chem.Kekulize(mol, clearAromaticFlags=True)
    rw = Chem.RWMol(mol)
    want_res = 2 if keep_phosphate else 1
    drop = [a.GetIdx() for a in mol.GetAtoms()
            if a.GetPDBResidueInfo().GetResidueNumber() != want_res
            or a.GetPDBResidueInfo().GetName().strip() == "OXT"]
    for idx in sorted(drop, reverse=True):
        rw.RemoveAtom(idx)
    out = rw.GetMol()
    for a in out.GetAtoms():
        a.SetNoImplicit(False)
        a.SetNumExplicitHs(0)
        a.SetProp("name", a.GetPDBResidueInfo().GetName().strip())
    Chem.SanitizeMol(out)
    return out


def _strip_to(mol, names: list[str]):
    from rdkit import Chem

    mol = Chem.Mol(mol)
    Chem.Kekulize(mol, clearAromaticFlags=True)
    rw = Chem.RWMol(mol)
    for a in sorted(mol.GetAtoms(), key=lambda a: -a.GetIdx()):
        if a.GetProp("name") not in names:
            rw.RemoveAtom(a.GetIdx())
    out = rw.GetMol()
    for a in out.GetAtoms():
        a.SetNoImplicit(False)
        a.SetNumExplicitHs(0)
    Chem.SanitizeMol(out)
    return out


def canonical_residue(res: str):
    """RDKit molecule of a canonical residue (boltz's name), heavy atoms only, with `name` props."""
    from boltz.data import const

    inv3 = {v: k for k, v in PROTEIN_3.items()}
    if res in inv3:
        mol = _residue_from_sequence(inv3[res], 0, keep_phosphate=False)
    elif res == "UNK":
        mol = _residue_from_sequence("A", 0, keep_phosphate=False)
    elif res in ("A", "C", "G", "U"):
        mol = _residue_from_sequence(res, 2, keep_phosphate=True)
    elif res == "N":
        mol = _strip_to(_residue_from_sequence("A", 2, keep_phosphate=True), const.ref_atoms["N"])
    elif res in ("DA", "DC", "DG", "DT"):
        mol = _residue_from_sequence(res[1], 6, keep_phosphate=True)
    elif res == "DN":
        mol = _strip_to(_residue_from_sequence("A", 6, keep_phosphate=True), const.ref_atoms["DN"])
    else:
        raise ValueError(f"no template for residue {res}")
    names = [a.GetProp("name") for a in mol.GetAtoms()]
    missing = [n for n in const.ref_atoms[res] if n not in names]
    assert not missing, f"{res}: RDKit template lacks {missing}"
    return mol


def embed_conformer(mol, seed: int):
    """One ETKDGv3 conformer (hydrogens added for the embedding, then removed), named Computed as
    CCD-derived molecules name theirs."""
    from rdkit import Chem
    from rdkit.Chem import AllChem

    molh = Chem.AddHs(mol)
    params = AllChem.ETKDGv3()
    params.randomSeed = seed
    cid = AllChem.EmbedMolecule(molh, params)
    assert cid == 0, "ETKDG failed"
    out = Chem.RemoveHs(molh)
    for a, b in zip(out.GetAtoms(), mol.GetAtoms()):
        a.SetProp("name", b.GetProp("name"))
    out.GetConformer(0).SetProp("name", "Computed")
    return out


CANONICAL_RESIDUES = (list(PROTEIN_3.values()) + ["UNK", "A", "C", "G", "U", "N",
                                                  "DA", "DC", "DG", "DT", "DN"])


def ccd_like_molecule(smiles: str, names: list[str], leaving: tuple = (), conformers: int = 1,
                      seed: int = 5):
    """A molecule laid out as boltz's CCD cache holds them: hydrogens explicit, every atom with
    `name` and `leaving_atom` properties (hydrogens H1, H2, ...), `conformers` ETKDGv3 conformers
    (the first named Computed, the others Ideal)."""
    from rdkit import Chem
    from rdkit.Chem import AllChem

    mol = Chem.AddHs(Chem.MolFromSmiles(smiles))
    h = 0
    for a in mol.GetAtoms():
        if a.GetAtomicNum() == 1:
            h += 1
            a.SetProp("name", f"H{h}")
        else:
            a.SetProp("name", names[a.GetIdx()])
        a.SetProp("leaving_atom", "1" if a.GetProp("name") in leaving else "0")
    params = AllChem.ETKDGv3()
    params.randomSeed = seed
    ids = list(AllChem.EmbedMultipleConfs(mol, conformers, params))
    assert len(ids) == conformers, "ETKDG failed"
    for i, cid in enumerate(ids):
        mol.GetConformer(cid).SetProp("name", "Computed" if i == 0 else "Ideal")
    return mol


# Non-canonical molecules of the cache the ligand cases use: ethanol (CCD EOH, its CCD atom names)
# with two conformers, so boltz's per-residue conformer draw consumes random state.
CCD_MOLECULES = {
    "EOH": dict(smiles="CCO", names=["C1", "C2", "O"], conformers=2),
    # phosphoserine as a modification: its OXT is a leaving atom
    "SEP": dict(smiles="NC(COP(=O)(O)O)C(=O)O",
                names=["N", "CA", "CB", "OG", "P", "O1P", "O2P", "O3P", "C", "O", "OXT"],
                leaving=("OXT",), seed=11),
}


def make_mols_dir(mol_dir: Path, seed: int = 7) -> dict:
    """Writes mols/<RES>.pkl for every canonical residue; returns {res: mol}."""
    from rdkit import Chem

    Chem.SetDefaultPickleProperties(Chem.PropertyPickleOptions.AllProps)
    mol_dir.mkdir(parents=True, exist_ok=True)
    mols = {}
    for i, res in enumerate(CANONICAL_RESIDUES):
        mol = embed_conformer(canonical_residue(res), seed + i)
        with open(mol_dir / f"{res}.pkl", "wb") as f:
            pickle.dump(mol, f)
        mols[res] = mol
    for code, spec in CCD_MOLECULES.items():
        mol = ccd_like_molecule(**spec)
        with open(mol_dir / f"{code}.pkl", "wb") as f:
            pickle.dump(mol, f)
        mols[code] = mol
    return mols


# ---- inputs --------------------------------------------------------------------------------------

# name -> (YAML text, {msa file name: a3m text}). The monomer's MSA has insertions (lower case),
# gaps, a duplicate of the query and a duplicate row, so the dedup and deletion rules show.
CASES = {
    "monomer": (
        """version: 1
sequences:
  - protein:
      id: A
      sequence: MKTAYIAKQRXGSW
      msa: monomer.a3m
""",
        {"monomer.a3m": """>query
MKTAYIAKQRXGSW
>s1
MKTAYLAKQRAGSW
>s2
MR-AYIAKqrQRAGSF
>s3
MKTAYIAKQRXGSW
>s4
-KTGYIAKQRAGS-
>s5
MR-AYIAKqrQRAGSF
""" }),
    "heterodimer": (
        """version: 1
sequences:
  - protein:
      id: A
      sequence: MKVLHEGSTW
      msa: dimer_a.a3m
  - protein:
      id: B
      sequence: GSPEEKLR
      msa: empty
""",
        {"dimer_a.a3m": """>query
MKVLHEGSTW
>u1
MKVLYEGSTW
>u2
MRVLHEaaGSTF
"""}),
    "protein_rna": (
        """version: 1
sequences:
  - protein:
      id: A
      sequence: MSTNPKPQR
      msa: empty
  - rna:
      id: B
      sequence: ACGUNA
""",
        {}),
    # A SMILES ligand with a stereocentre, an E double bond, an aromatic ring and a charge, and a
    # CCD ligand with two conformers; the protein's MSA gives the ligand columns gap rows.
    "protein_ligand": (
        """version: 1
sequences:
  - protein:
      id: A
      sequence: MKTAYIAKQRQISW
      msa: ligand_a.a3m
  - ligand:
      id: B
      smiles: 'C[C@H](Nc1ccccc1)/C=C/C(=O)[O-]'
  - ligand:
      id: C
      ccd: EOH
""",
        {"ligand_a.a3m": """>query
MKTAYIAKQRQISW
>s1
MKTAYLAKQRQISF
"""}),
    # A modified residue (phosphoserine at 3, which the MSA's query row still reads as T), a
    # covalent bond from a cysteine to the ligand, a pocket and a contact constraint, both forced
    # (steering the sampler; the pocket's tokens listed out of order).
    "constrained": (
        """version: 1
sequences:
  - protein:
      id: A
      sequence: MKTCYIAKQRQISW
      msa: constrained_a.a3m
      modifications:
        - position: 3
          ccd: SEP
  - ligand:
      id: B
      smiles: 'CC(=O)Oc1ccccc1C(=O)O'
constraints:
  - bond:
      atom1: [A, 4, SG]
      atom2: [B, 1, C21]
  - pocket:
      binder: B
      contacts: [[A, 10], [A, 7]]
      max_distance: 5.0
      force: true
  - contact:
      token1: [A, 12]
      token2: [B, O9]
      max_distance: 7.5
      force: true
""",
        {"constrained_a.a3m": """>query
MKTCYIAKQRQISW
>s1
MKSCYLAKQRQISF
"""}),
}


# Real structures for template inputs (the project's shared test data, next to the repository).
STRUCTURES = Path(__file__).resolve().parents[3] / "shared" / "data" / "structures"

CASES["template"] = (
    # Chain A: 7ROA's residues 15-28 with one substitution (T25S), its selenomethionine at 19;
    # template given with both chain ids. Chain B: 9OBN's nanobody tail (the His tag unresolved),
    # template chain found by global alignment over the template's protein chains. Chain C: no
    # template (its own visibility group). Both templates forced: the template potential steers
    # the sampler (with two forced templates, the reference's gradient mixes them; see
    # potentials.h).
    """version: 1
sequences:
  - protein:
      id: A
      sequence: GLEEMYANGVSEDN
      msa: empty
  - protein:
      id: B
      sequence: QVTVSSHHHHHH
      msa: empty
  - protein:
      id: C
      sequence: GSPE
      msa: empty
templates:
  - cif: 7roa.cif
    chain_id: A
    template_id: A
    force: true
    threshold: 2.5
  - cif: 9obn.cif
    chain_id: [B]
    force: true
    threshold: 3.0
""",
    {"7roa.cif": STRUCTURES / "prot.cif", "9obn.cif": STRUCTURES / "9obn.cif"})


def write_case(name: str, workdir: Path) -> Path:
    yaml_text, files = CASES[name]
    workdir.mkdir(parents=True, exist_ok=True)
    for fname, content in files.items():
        if isinstance(content, Path):
            shutil.copyfile(content, workdir / fname)
        else:
            (workdir / fname).write_text(content)
    path = workdir / f"{name}.yaml"
    path.write_text(yaml_text)
    return path


def save_ligand_mols(mols: dict, out: Path) -> None:
    """The molecules boltz's input processing made for SMILES ligands (LIG1, ...: the molecules
    seeded_etkdg records, hydrogens included, as boltz computes their constraints on them), one
    pickled molecule per file out/<RES>.pkl, every property kept."""
    from rdkit import Chem

    Chem.SetDefaultPickleProperties(Chem.PropertyPickleOptions.AllProps)
    for res, mol in sorted(mols.items()):
        out.mkdir(parents=True, exist_ok=True)
        with open(out / f"{res}.pkl", "wb") as o:
            pickle.dump(mol, o)


def featurize(name: str, workdir: Path, mol_dir: Path, seed: int = 0,
              ligand_mols_out: Path | None = None, override_method: str | None = None) -> dict:
    """The batch boltz's predict loop hands the model for case `name` (fp32 CPU tensors). With
    `ligand_mols_out`, the molecules boltz made for the case's SMILES ligands (LIG1, ...) are
    written there, one pickled molecule per file, for the other side to use the same conformer.
    `override_method` is boltz predict's --method (None: boltz's default, x-ray diffraction)."""
    from boltz.data.module.inferencev2 import Boltz2InferenceDataModule
    from boltz.main import process_inputs
    from boltz.data.types import Manifest

    case_dir = workdir / name
    if case_dir.exists():
        shutil.rmtree(case_dir)
    yaml_path = write_case(name, case_dir / "input")
    out_dir = case_dir / "processed_root"
    # process_inputs resolves MSA paths relative to the working directory, as boltz's CLI does.
    import os

    cwd = os.getcwd()
    os.chdir(case_dir / "input")
    # SMILES ligands embedded with seed 42 each (seeded_etkdg): reproducible features
    try:
        with seeded_etkdg() as ligand_mols:
            process_inputs(data=[yaml_path], out_dir=out_dir, ccd_path=mol_dir.parent / "ccd.pkl",
                           mol_dir=mol_dir, msa_server_url="", msa_pairing_strategy="greedy",
                           boltz2=True)
    finally:
        os.chdir(cwd)
    processed = out_dir / "processed"
    if ligand_mols_out is not None:
        save_ligand_mols(ligand_mols, ligand_mols_out)
    manifest = Manifest.load(processed / "manifest.json")
    dm = Boltz2InferenceDataModule(
        manifest=manifest, target_dir=processed / "structures", msa_dir=processed / "msa",
        mol_dir=mol_dir, num_workers=0,
        constraints_dir=processed / "constraints" if (processed / "constraints").exists() else None,
        template_dir=processed / "templates" if (processed / "templates").exists() else None,
        extra_mols_dir=processed / "mols" if (processed / "mols").exists() else None,
        override_method=override_method)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    batch = next(iter(dm.predict_dataloader()))
    out = {}
    for k, v in batch.items():
        if isinstance(v, torch.Tensor):
            out[k] = v.float() if v.is_floating_point() else v
        else:
            out[k] = v
    return out


@contextlib.contextmanager
def seeded_etkdg(seed: int = 42):
    """boltz embeds SMILES ligands with RDKit's process-wide generator (ETKDGv3's randomSeed -1),
    so a ligand's conformer depends on every embedding before it in the process. Inside this
    block every embedding is seeded with `seed`, as bioinfer embeds them. Yields a dict that
    receives each SMILES ligand's molecule (LIG1, ...) as parse_ccd_residue gets it."""
    from rdkit.Chem import AllChem

    import boltz.data.parse.schema as schema

    etkdg = AllChem.ETKDGv3
    parse_ccd_residue = schema.parse_ccd_residue
    mols = {}

    def seeded():
        params = etkdg()
        params.randomSeed = seed
        return params

    def recording(name, ref_mol, *args, **kwargs):
        out = parse_ccd_residue(name, ref_mol, *args, **kwargs)
        if name.startswith("LIG"):
            mols[name] = ref_mol
        return out

    AllChem.ETKDGv3 = seeded
    schema.parse_ccd_residue = recording
    try:
        yield mols
    finally:
        AllChem.ETKDGv3 = etkdg
        schema.parse_ccd_residue = parse_ccd_residue


@contextlib.contextmanager
def recorded_motions():
    """Records the random motion boltz's featurizer gives each residue's conformer
    (center_random_augmentation: x' = (x - mean) @ R + t) while the block runs; yields the lists
    the rotations R and translations t are appended to, in ref_space_uid order."""
    import boltz.data.feature.featurizerv2 as fz
    import boltz.model.modules.utils as mu

    rots, trans = [], []
    orig_aug, orig_rot = fz.center_random_augmentation, mu.random_rotations

    def aug(atom_coords, atom_mask, **kw):
        got = []

        def rot(n, dtype=None, device=None):
            r = orig_rot(n, dtype, device)
            got.append(r)
            return r

        mu.random_rotations = rot
        try:
            out = orig_aug(atom_coords, atom_mask, **kw)
        finally:
            mu.random_rotations = orig_rot
        m = atom_mask[:, :, None].float()
        centred = atom_coords - (atom_coords * m).sum(1, keepdim=True) / m.sum(1, keepdim=True)
        rots.append(got[0][0])
        trans.append((out[0] - centred[0] @ got[0][0]).mean(0))
        return out

    fz.center_random_augmentation = aug
    try:
        yield rots, trans
    finally:
        fz.center_random_augmentation = orig_aug


def tensor_feats(feats: dict) -> dict:
    """The tensor entries of a batch (records and other objects dropped)."""
    return {k: v for k, v in feats.items() if isinstance(v, torch.Tensor)}


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as td:
        td = Path(td)
        make_mols_dir(td / "mols")
        model = build_model()
        print(sum(p.numel() for p in model.parameters()), "parameters")
        for case in CASES:
            f = featurize(case, td / "work", td / "mols")
            print(case, {k: tuple(v.shape) for k, v in tensor_feats(f).items()})
