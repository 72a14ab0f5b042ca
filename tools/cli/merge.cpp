// bioinfer merge: shards of an embed or predict run into the single output.
#include <cstdio>

#include "args.h"
#include "bioinfer/error.h"
#include "runtime/merge.h"

namespace bioinfer::cli {

static const char* kMergeHelp = R"(usage: bioinfer merge DIR... --out-dir OUT [--format npz|h5]

Assembles the shards of a sharded `bioinfer embed` or `bioinfer predict` run (--shard I/N, MPI
ranks, Slurm array tasks) into one output in input order: embeddings as one npz per record or
one HDF5 file, with manifest.json; structures with their confidence files. DIR is a shard folder
(shard-I-of-N), a folder holding them (the run's --out-dir), or an unsharded output. Every shard
must be there and finished; the merged files are the same whatever the number of shards.
results.json lists every record in input order (timings stay in the shards' own results.json).
Every file taken from a shard is checked first (an npz read whole, its CRC-32s too); the output
is written beside OUT and moved into place only when complete, so a failed merge leaves OUT as
it was.

  --out-dir OUT        where the merged output goes: not a shard, nor inside one, nor holding
                       one. In an existing folder the merged files replace their namesakes and
                       other files stay.
  --format npz|h5      embeddings: one npz per record or one embeddings.h5 (default: what the
                       run asked for)
)";

int merge_main(int argc, char** argv) {
    Args a = parse_args(argc, argv, {"out-dir", "format"}, {"help", "quiet"});
    if (a.has("help")) {
        std::fputs(kMergeHelp, stdout);
        return 0;
    }
    BI_CHECK(!a.positional.empty(), "arguments", "name the shard folders to merge (see --help)");
    BI_CHECK(a.has("out-dir"), "arguments", "--out-dir is required");
    const auto r = runtime::merge_outputs(a.positional, a.get("out-dir"), a.get("format"));
    if (!a.has("quiet"))
        std::fprintf(stderr, "merge: %d shard(s), %lld records (%lld failed) into %s\n", r.shards,
                     (long long)r.targets, (long long)r.failed, a.get("out-dir").c_str());
    return 0;
}

}  // namespace bioinfer::cli
