"""Boltz-2's method conditioning (boltz predict --method) as boltz's own pipeline makes it: the
`monomer` case featurised by boltz's process_inputs + Boltz2InferenceDataModule with
override_method set to each of several methods, and the tiny model's input embedding (s_inputs)
for one of them.

    .venv-reference/bin/python tools/reference/make_boltz2_method_fixture.py [--out tests/fixtures/boltz2_tiny]

Reads the committed fixture in --out (boltz2_conf.ckpt, mols/, monomer.safetensors) and checks
that it is what this script rebuilds: the tiny model's weights (boltz2_tiny.build_model(seed=0),
as make_boltz2_fixtures.py writes them) and, for the default method, every feature of the case.
Writes --out/method.safetensors:
  method.<k>.method_feature   (1, N) the batch's method_feature for the k-th method
  method.s_inputs             (1, N, token_s) the input embedder's output for the method named
                              by the metadata's "s_inputs"
The metadata key "fixture" holds JSON: {"methods": [...], "s_inputs": NAME}, the methods as given
to --method ("" for none: boltz's default, x-ray diffraction).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import boltz2_tiny as bt  # noqa: E402
from make_boltz2_fixtures import feature_tensors  # noqa: E402

CASE = "monomer"
# None (boltz's default), boltz's own spellings in other cases, and names of other ids.
METHODS = [None, "MD", "solution nmr", "AFDB", "Electron Microscopy"]
S_INPUTS_METHOD = "AFDB"


def check_weights(model, ckpt: Path) -> None:
    """The committed checkpoint holds the weights build_model(seed=0) makes."""
    stored = torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"]
    own = model.state_dict()
    assert set(stored) == set(own), "checkpoint keys differ from build_model's"
    for k, v in own.items():
        assert torch.equal(stored[k], v), f"{ckpt}: {k} differs from build_model(seed=0)"


def check_features(feats: dict, case_file: Path) -> None:
    """The default method's features are the committed case's, every one exactly."""
    stored = {k: v for k, v in load_file(str(case_file)).items() if k.startswith("feat.")}
    got = feature_tensors(feats)
    assert set(stored) == set(got), f"{case_file}: feature names differ"
    for k, v in got.items():
        assert torch.equal(stored[k], v), f"{case_file}: {k} differs from boltz's featurisation"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(HERE.parent.parent / "tests/fixtures/boltz2_tiny"))
    args = ap.parse_args()
    out = Path(args.out)

    model = bt.build_model(seed=0)
    check_weights(model, out / "boltz2_conf.ckpt")
    tensors: dict[str, torch.Tensor] = {}
    with tempfile.TemporaryDirectory() as td:
        for k, method in enumerate(METHODS):
            feats = bt.featurize(CASE, Path(td), out / "mols", seed=0, override_method=method)
            if method is None:
                check_features(feats, out / f"{CASE}.safetensors")
            tensors[f"method.{k}.method_feature"] = feats["method_feature"].float().contiguous()
            if method == S_INPUTS_METHOD:
                with torch.no_grad():
                    s = model.input_embedder(feats)
                tensors["method.s_inputs"] = s.detach().float().contiguous()
            print(method, feats["method_feature"].flatten().tolist()[:3], flush=True)
    meta = {"fixture": json.dumps({"methods": [m or "" for m in METHODS],
                                   "s_inputs": S_INPUTS_METHOD})}
    tmp = out / "method.safetensors.tmp"
    save_file(tensors, str(tmp), metadata=meta)
    tmp.rename(out / "method.safetensors")
    print(f"method.safetensors: {len(tensors)} tensors")


if __name__ == "__main__":
    main()
