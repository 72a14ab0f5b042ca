// boltz's input files (YAML and its FASTA form) as predict reads them for Boltz-2.
#include "fuzz_target.h"
#include "io/boltz_inputs.h"

using namespace bioinfer;

BIOINFER_FUZZ_TARGET(boltz_input) {
    attempt([&] {
        const io::BoltzTarget t = io::parse_boltz_yaml(data, "input.yaml");
        io::check_affinity_binder(t);
    });
    attempt([&] { io::parse_boltz_fasta(data, "input.fasta"); });
}
