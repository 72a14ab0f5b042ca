// The command line as a function: `bioinfer ARGS...` is run(argc, argv). Programs that register
// models of their own (models/registry.h) before calling it get the whole CLI for them.
#pragma once

namespace bioinfer::cli {
int run(int argc, char** argv);
}  // namespace bioinfer::cli
