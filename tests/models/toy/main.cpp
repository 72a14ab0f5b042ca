// bioinfer with the toy helix model registered: the same command line (tools/cli) over the
// registry plus one row, which is all a model needs (tests/models/test_registry.cpp runs it).
#include "cli.h"
#include "toy_fold.h"

int main(int argc, char** argv) {
    bioinfer::models::register_structure_model(bioinfer::toy::toy_helix_row());
    return bioinfer::cli::run(argc, argv);
}
