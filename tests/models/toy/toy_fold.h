// A toy structure model, added the way every model is (docs/add-a-model.md): its own folder and
// one registry row. It folds each protein chain into an ideal alpha helix of Calpha atoms whose
// radius, rise and twist are its three weights (model.safetensors: "helix.geometry"), so the
// test can tell that the CLI ran this model on these weights.
#pragma once
#include "models/registry.h"

namespace bioinfer::toy {

// config.json {"model_type": "toy_helix", "plddt": P}; pLDDT P for every atom.
models::StructureModelRow toy_helix_row();

}  // namespace bioinfer::toy
