// bioinfer bench sweep: parses the options, runs the op sweep, --report and --update-table of
// the tuning library, and prints what they return.
#include "sweep.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "args.h"
#include "backend/tuning/tuned_table.h"
#include "bioinfer/error.h"
#include "core/threads.h"
#include "sweep/gemm_timing.h"
#include "sweep/sweep.h"

namespace bioinfer::cli {

namespace {

// Where the results go and the table --update-table rewrites, both relative to the working
// directory: the repository root when run as the README shows.
constexpr const char* kDefaultOut = "bench/results/sweeps";
constexpr const char* kDefaultTable = "src/backend/tuning/tuned_table.json";

const char* kSweepHelp =
    R"(usage: bioinfer bench sweep [--what LIST|all] [--shapes LIST] [--dtypes LIST] [options]
       bioinfer bench sweep --report RESULTS.json
       bioinfer bench sweep --update-table RESULTS.json[,MORE.json] [--table FILE]

Runs every variant of each op at the real model shapes, checks each against a reference (admitted
when PCC >= 0.999 and, in fp32, when its max-abs error is within 4x the default kernel's), times
the admitted and the rejected alike (minimum over repetitions after a
warm-up), and writes one JSON per sub-sweep. A variant that fails is recorded and the sweep goes
on; the exit status is 1 when any variant failed.

  --what LIST      matmul, attention, layer_norm, rotary, softmax, activation, trimul, triatt,
                   pair_mlp (ESMFold's pair ops, chunk sizes as variants), or all (default)
  --shapes LIST    shape sets: esm (ESM-2 8M..3B, ESM C 300M/600M), gr00t (a vision-language-
                   action backbone), esmfold (the folding trunk's pair ops at L 128, 256, 512,
                   c_z 128), esmfold2 (ESMFold2's pair-update GEMMs at L 64 and 128, c_z 256),
                   fold (the linears a fold runs at one protein's 256 residues: the ESM-2 3B
                   and ESM C 600M stems, ESMFold's sequence attention; matmul_fold entries),
                   tiny (seconds; for tests). Default esm,gr00t
  --dtypes LIST    fp32, bf16 (default fp32, and bf16 where the CPU has a bf16 GEMM; ops
                   without a bf16 variant run fp32 only)
  --iters N        back-to-back calls per timing (default 3)
  --reps N         timings per variant; the minimum counts (default 5)
  --threads N      worker threads (default: all cores)
  --out DIR        where the JSON goes (default bench/results/sweeps)
  --dry-run        print every shape and variant as JSON, run nothing
  --report FILE    print a results file's winners against the tuned table in use
  --update-table FILES  write the winners of results files into the tuned table
  --table FILE     the table --update-table rewrites (default src/backend/tuning/tuned_table.json)
)";

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');)
        if (!item.empty()) out.push_back(item);
    return out;
}

std::string command_line(int argc, char** argv) {
    std::string s = "bioinfer bench sweep";
    for (int i = 0; i < argc; ++i) s += std::string(" ") + argv[i];
    return s;
}

std::vector<const tuning::sweep::OpSweep*> chosen_ops(const std::string& what) {
    namespace sw = tuning::sweep;
    std::vector<const sw::OpSweep*> out;
    for (const std::string& w : split(what)) {
        if (w == "all") {
            for (const sw::OpSweep& o : sw::op_sweeps()) out.push_back(&o);
            continue;
        }
        if (const sw::OpSweep* o = sw::find_op_sweep(w)) {
            out.push_back(o);
            continue;
        }
        for (const auto& [name, why] : sw::pending_sweeps())
            BI_CHECK(name != w, "--what", w, " is not available yet: ", why);
        fail("--what", cat("unknown sweep '", w,
                           "' (matmul, attention, layer_norm, rotary, softmax, "
                           "activation, trimul, triatt, pair_mlp, all)"));
    }
    BI_CHECK(!out.empty(), "--what", "names no sweep");
    return out;
}

}  // namespace

int sweep_main(int argc, char** argv) {
    namespace sw = tuning::sweep;
    const Args a = parse_args(argc, argv,
                              {"what", "shapes", "dtypes", "iters", "reps", "threads", "out",
                               "report", "update-table", "table"},
                              {"help", "dry-run"});
    if (a.has("help")) {
        std::fputs(kSweepHelp, stdout);
        return 0;
    }
    BI_CHECK(a.positional.empty(), "arguments", "'bench sweep' takes no input, got '",
             a.positional.front(), "'");
    set_num_threads(threads_from(a));
    if (a.has("report")) {
        std::fputs(sw::report(sw::read_results(a.get("report")), tuning::active_table()).c_str(),
                   stdout);
        return 0;
    }
    if (a.has("update-table")) {
        const auto files = split(a.get("update-table"));
        const std::string table = a.get("table", kDefaultTable);
        const sw::TableUpdate u = sw::update_table(files, table);
        std::fprintf(stderr, "sweep: wrote %zu entries (%zu from %zu results files) to %s\n",
                     u.entries, u.fresh, files.size(), table.c_str());
        return 0;
    }
    sw::Options o;
    o.ops = chosen_ops(a.get("what", "all"));
    o.sets = split(a.get("shapes", "esm,gr00t"));
    for (const std::string& s : o.sets)
        BI_CHECK(std::find(sw::shape_sets().begin(), sw::shape_sets().end(), s) !=
                     sw::shape_sets().end(),
                 "--shapes", "unknown shape set '", s, "' (esm, gr00t, esmfold, tiny)");
    // Default: fp32, and bf16 where this CPU has a bf16 GEMM (asked for explicitly on a CPU
    // without one, bf16 variants fail and are recorded as such). A dry run probes nothing.
    const bool bf16_here = a.has("dry-run") || tuning::has_packed_gemm(DType::BF16);
    o.dtypes = split(a.get("dtypes", bf16_here ? "fp32,bf16" : "fp32"));
    for (const std::string& d : o.dtypes)
        BI_CHECK(d == "fp32" || d == "bf16", "--dtypes", "unknown dtype '", d, "' (fp32, bf16)");
    o.iters = int(a.get_int_in("iters", 3, 1, kMaxRepeatOption));
    o.reps = int(a.get_int_in("reps", 5, 1, kMaxRepeatOption));
    o.out_dir = a.get("out", kDefaultOut);
    o.arguments = {{"what", a.get("what", "all")},
                   {"shapes", o.sets},
                   {"dtypes", o.dtypes},
                   {"iters", o.iters},
                   {"reps", o.reps},
                   {"threads", num_threads()},
                   {"command", command_line(argc, argv)}};
    if (a.has("dry-run")) {
        std::printf("%s\n", sw::plan_document(o).dump(1).c_str());
        return 0;
    }
    const sw::RunSummary r =
        sw::run(o, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
    if (r.errors > 0) {
        std::fprintf(stderr, "sweep: %zu variants failed (listed under \"errors\")\n", r.errors);
        return 1;
    }
    return 0;
}

}  // namespace bioinfer::cli
