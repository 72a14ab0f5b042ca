// PyTorch checkpoints (torch.save's zip format: .pth, .pt, pytorch_model.bin) read without Python
// and without executing anything: a restricted unpickler that understands only the opcodes a
// state dict uses and accepts only tensor-rebuild calls (torch._utils._rebuild_tensor_v2,
// _rebuild_parameter, collections.OrderedDict, torch.*Storage). Any other global - os.system,
// builtins.eval, ... - is refused with an error naming it. Tensor data are zero-copy views into
// the mapped archive (torch stores them uncompressed).
#pragma once
#include <map>
#include <string>

#include "bioinfer/tensor.h"

namespace bioinfer::io {

// The state dict in `path` as name -> tensor (F32, BF16 or F16; other dtypes are an error
// naming the tensor). Nested dicts (e.g. {"model": state_dict}) are flattened with '.'.
std::map<std::string, Tensor> read_torch_checkpoint(const std::string& path);

}  // namespace bioinfer::io
