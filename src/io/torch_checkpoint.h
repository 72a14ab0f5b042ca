// PyTorch checkpoints (torch.save's zip format: .pth, .pt, pytorch_model.bin) read without Python
// and without executing anything: a restricted unpickler that understands only the opcodes a
// state dict uses and accepts only tensor-rebuild calls (torch._utils._rebuild_tensor_v2,
// _rebuild_parameter, collections.OrderedDict, torch.*Storage). Any other global - os.system,
// builtins.eval, ... - is refused with an error naming it. Tensor data are zero-copy views into
// the mapped archive (torch stores them uncompressed).
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "bioinfer/tensor.h"

namespace bioinfer::io {

// The state dict in `path` as name -> tensor (F32, BF16 or F16; other dtypes are an error
// naming the tensor). Nested dicts (e.g. {"model": state_dict}) are flattened with '.'.
std::map<std::string, Tensor> read_torch_checkpoint(const std::string& path);

// The same, with the pickle's plain data. A trainer checkpoint (PyTorch Lightning: a dict holding
// `state_dict` beside `hyper_parameters`, `epoch`, ...) may hold objects of other classes among
// its options (dataclasses, config objects): they are never constructed, only skipped, and `data`
// leaves them out. Such an object anywhere else is refused as above.
struct TorchCheckpoint {
    std::map<std::string, Tensor> tensors;  // as read_torch_checkpoint names them
    nlohmann::json data;  // dicts, lists, numbers, strings, bools, null; no tensors
};
TorchCheckpoint read_torch_checkpoint_full(const std::string& path);

// A pickled RDKit molecule (boltz's molecule cache, mols/<RES>.pkl: `pickle.dump(mol)`), read with
// the same restricted unpickler: the only callable allowed is rdkit.Chem.rdchem.Mol, with its
// binary pickle bytes as the one argument (its state, the Python __dict__, is dropped). Returns
// those bytes (RDKit's MolPickler format; see io/rdkit_pickle.h). Any other global is refused
// with "refusing to load" naming it; nothing is constructed or executed.
std::string read_rdkit_mol_pickle(const std::string& path);

}  // namespace bioinfer::io
