// boltz's molecule cache (mols/<CCD>.pkl): the pickle, through the restricted unpickler, and the
// RDKit MolPickler bytes inside it. The raw input is also decoded as MolPickler bytes directly.
#include "fuzz_target.h"
#include "io/rdkit_pickle.h"
#include "io/torch_checkpoint.h"

using namespace bioinfer;

BIOINFER_FUZZ_TARGET(mol_pickle) {
    attempt([&] {
        const std::string bytes = io::read_rdkit_mol_pickle(write_temp(data, ".pkl"));
        io::decode_rdkit_mol(bytes, "input.pkl");
    });
    attempt([&] { io::decode_rdkit_mol(std::string(data), "input"); });
}
