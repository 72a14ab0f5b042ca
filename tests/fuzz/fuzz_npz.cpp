// An npz (zip of .npy files) as merge reads a shard's embeddings.
#include "fuzz_target.h"
#include "io/npy.h"

using namespace bioinfer;

BIOINFER_FUZZ_TARGET(npz) {
    const std::string path = write_temp(data, ".npz");
    attempt([&] { io::read_npz(path); });
    attempt([&] { io::npz_shapes(path); });
}
