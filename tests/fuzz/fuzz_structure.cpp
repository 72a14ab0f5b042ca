// Structure files: as compare reads them (PDB or mmCIF, told apart by their contents), and as
// Boltz-2 reads a structural template (mmCIF, and PDB through its own path).
#include "fuzz_target.h"
#include "io/structure.h"
#include "models/boltz2/conformers.h"
#include "models/boltz2/templates.h"

using namespace bioinfer;

BIOINFER_FUZZ_TARGET(structure) {
    const std::string path = write_temp(data, ".pdb");
    attempt([&] { io::read_ca_residues(path); });
    const auto& canonical = boltz2::ConformerLibrary::builtin();
    attempt([&] { boltz2::read_template_structure(path, true, canonical, ""); });
    attempt([&] { boltz2::read_template_structure(path, false, canonical, ""); });
}
