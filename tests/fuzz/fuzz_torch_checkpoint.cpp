// A torch.save zip (.pth, .pt, pytorch_model.bin, a Lightning .ckpt): the zip directory, the
// restricted unpickler and the storages; every tensor is read whole.
#include "fuzz_target.h"
#include "io/model_dir.h"
#include "io/torch_checkpoint.h"

using namespace bioinfer;

BIOINFER_FUZZ_TARGET(torch_checkpoint) {
    const std::string path = write_temp(data, ".pth");
    attempt([&] {
        const io::TorchCheckpoint c = io::read_torch_checkpoint_full(path);
        for (const auto& [name, t] : c.tensors) io::first_nonfinite(t);
        (void)c.data.dump();
    });
}
