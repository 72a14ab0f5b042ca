// bioinfer bench sweep: the CLI front of the op sweep (tools/sweep/sweep.h).
#pragma once

namespace bioinfer::cli {

// argv: the arguments after "bench sweep".
int sweep_main(int argc, char** argv);

}  // namespace bioinfer::cli
