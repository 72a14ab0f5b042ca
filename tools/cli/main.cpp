// The bioinfer binary: the command line (cli_main.cpp) over the models the registry holds.
#include "cli.h"

int main(int argc, char** argv) { return bioinfer::cli::run(argc, argv); }
