// boltz's input files (YAML and its FASTA form) as predict reads them for Boltz-2, and the
// checks made on a parsed target before any weights load: each SMILES's size (with the limit
// lowered, so inputs cross it and RDKit never sees a large one) and the constraints' references.
#include "fuzz_target.h"
#include "io/boltz_inputs.h"
#include "io/limits.h"
#include "models/boltz2/constraint_refs.h"

using namespace bioinfer;

BIOINFER_FUZZ_TARGET(boltz_input) {
    io::input_limits().smiles_heavy_atoms = 48;
    for (const bool yaml : {true, false}) {
        bio::Target t;
        bool parsed = false;
        attempt([&] {
            t = yaml ? io::parse_boltz_yaml(data, "input.yaml") : io::parse_boltz_fasta(data, "input.fasta");
            parsed = true;
            io::check_affinity_binder(t);
        });
        if (!parsed) continue;
        bool small = true;
        for (const bio::Chain& c : t.chains)
            if (!c.smiles.empty()) attempt([&] {
                    small = false;
                    io::check_smiles_size(c.smiles, c.where);
                    small = true;
                });
        if (small)
            attempt([&] { boltz2::check_constraint_references(t, boltz2::ConformerLibrary::builtin(), ""); });
    }
}
