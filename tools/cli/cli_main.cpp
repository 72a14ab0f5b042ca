// bioinfer: one binary, a table of subcommands. Errors print one line and exit non-zero. The
// binary's main() is run() alone (main.cpp), so a program that adds models to the registry
// first runs the same command line (tests/models/toy).
#include "cli.h"

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "bioinfer/error.h"

#ifndef BIOINFER_VERSION
#error "BIOINFER_VERSION is defined by the build (CMakeLists.txt's project version)"
#endif

namespace bioinfer::cli {
int embed_main(int argc, char** argv);
int bench_main(int argc, char** argv);
int predict_main(int argc, char** argv);
int compare_main(int argc, char** argv);
int weights_main(int argc, char** argv);
int merge_main(int argc, char** argv);
int score_main(int argc, char** argv);
int design_main(int argc, char** argv);
}  // namespace bioinfer::cli

namespace {

struct Subcommand {
    const char* name;
    int (*run)(int, char**);
    const char* summary;
};

const Subcommand kSubcommands[] = {
    {"embed", bioinfer::cli::embed_main,
     "per-residue / pooled embeddings, contacts, logits (ESM-2, ESM C)"},
    {"score", bioinfer::cli::score_main,
     "variant-effect scores from the likelihoods (ESM-2, ESM C)"},
    {"predict", bioinfer::cli::predict_main,
     "structure prediction: PDB/mmCIF, confidences (ESMFold, ESMFold2, Boltz-2)"},
    {"design", bioinfer::cli::design_main,
     "sequence design and scoring: ProteinMPNN, LigandMPNN, SolubleMPNN; refold the designs"},
    {"merge", bioinfer::cli::merge_main, "assemble the shards of a sharded embed / predict run"},
    {"weights", bioinfer::cli::weights_main,
     "list, download and prune model weights (Hugging Face cache)"},
    {"compare", bioinfer::cli::compare_main, "Calpha RMSD, TM-score and lDDT of two structures"},
    {"bench", bioinfer::cli::bench_main, "time a model on inputs, JSON on stdout"},
};

void usage(FILE* f) {
    std::fprintf(f, "usage: bioinfer <command> [options]\n\ncommands:\n");
    for (auto& s : kSubcommands) std::fprintf(f, "  %-8s %s\n", s.name, s.summary);
    std::fprintf(f, "\n'bioinfer <command> --help' describes a command.\n");
}

}  // namespace

int bioinfer::cli::run(int argc, char** argv) {
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!std::strcmp(argv[1], "--version")) {
        std::printf("bioinfer %s\n", BIOINFER_VERSION);
        return 0;
    }
    for (auto& s : kSubcommands) {
        if (std::strcmp(argv[1], s.name) != 0) continue;
        try {
            return s.run(argc - 2, argv + 2);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "bioinfer %s: error: %s\n", s.name, bioinfer::error_line(e).c_str());
            return 1;
        }
    }
    std::fprintf(stderr, "bioinfer: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
