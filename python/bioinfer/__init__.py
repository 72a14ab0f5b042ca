"""bioinfer in Python: ESM-2 and ESM C embeddings, logits and contacts from the C++ engine that the
`bioinfer` command line runs, in process, with the weights kept resident between calls.

    import bioinfer
    model = bioinfer.load("esm2_t33_650M_UR50D")            # or a model directory
    results = model.embed({"ubq": "MQIFVKTLTG..."}, include=("mean", "per_tok"))
    results[0].mean_representations[33]                      # numpy array, (1280,)

Results equal the files `bioinfer embed` writes for the same input and options: the same
batching, packing and deduplication run underneath.
"""
from __future__ import annotations

import os
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _bioinfer

__all__ = ["load", "LanguageModel", "EmbedResult", "__version__"]
__version__ = "0.1.0"

Sequences = Union[str, "os.PathLike[str]", Sequence[str], Mapping[str, str]]
_INCLUDE = ("mean", "per_tok", "bos", "contacts", "logits")
_FASTA_SUFFIXES = (".fa", ".fasta", ".faa", ".fas")


def load(name_or_dir: Union[str, "os.PathLike[str]"], precision: str = "fp32",
         threads: Optional[int] = None, device: str = "cpu", *, offline: bool = False,
         cache_dir: Optional[str] = None) -> "LanguageModel":
    """Loads a model and keeps its weights resident.

    name_or_dir: a model directory (Hugging Face ESM-2 or ESM C layout, or the esm package's
    state dict), a registry name (`bioinfer weights` lists them: "esm2_t33_650M_UR50D",
    "esmc-600m", ...) or an "org/name" repository, taken from the Hugging Face cache and
    downloaded there on first use (offline=True, or HF_HUB_OFFLINE=1, never downloads).
    precision: "fp32" (exact to the upstream model), "bf16" or "int8" (docs/parity.md).
    threads: the threads each call computes on (None: all cores).
    Raises KeyError for an unknown model name, OSError for a missing directory or file.
    """
    if device != "cpu":
        raise ValueError(f"device: this build runs on the CPU only, got {device!r}")
    name = os.fspath(name_or_dir)
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
    if threads is not None and threads < 0:
        raise ValueError(f"threads: expected >= 0, got {threads}")
    try:
        arch = _bioinfer.architecture(path)
    except RuntimeError as e:
        raise ValueError(str(e)) from None
    return LanguageModel(_bioinfer.LanguageModel(path, name, precision, threads or 0), arch)


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
    else:
        recs = [(str(i), s) for i, s in enumerate(sequences)]
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
              progress: bool = False) -> List[EmbedResult]:
        """Embeds sequences: a list of strings, a dict id -> sequence, a FASTA file or folder
        path, or one bare sequence. layers: fair-esm's repr_layers (negative counts from the
        end; the last layer is after the final LayerNorm). include: any of "mean", "per_tok",
        "bos", "contacts" (ESM-2), "logits". Returns one EmbedResult per record, in input order.
        A residue outside the model's alphabet raises ValueError naming the record; Ctrl-C
        stops the call after the batch it is in (KeyboardInterrupt)."""
        include = [include] if isinstance(include, str) else list(include)
        for w in include:
            if w not in _INCLUDE:
                raise ValueError(f"include: unknown output {w!r}: expected one of {', '.join(_INCLUDE)}")
        if not include:
            raise ValueError("include: nothing to output")
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
        items = self._m.embed(recs, layers, ",".join(include), toks_per_batch, truncate, progress)
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
