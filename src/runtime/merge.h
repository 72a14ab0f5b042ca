// bioinfer merge: the shards of a sharded run (or any finished embed / predict outputs) into one
// output in input order, the same bytes whatever the number of shards.
#pragma once
#include <string>
#include <vector>

namespace bioinfer::runtime {

struct MergeResult {
    std::string tool;  // "bioinfer embed" | "bioinfer predict"
    int shards = 0;
    int64_t targets = 0, failed = 0;
    int exit_status = 0;  // of the merged job: 0 all done, 1 all failed, 2 some failed
};

// dirs: shard folders (shard-I-of-N), or folders holding them, or one unsharded output.
// Every shard 0..N-1 of one run must be there and finished (results.json), or it is an error
// naming the missing ones. format: "npz" or "h5" for embeddings ("" = what the run asked for).
MergeResult merge_outputs(const std::vector<std::string>& dirs, const std::string& out_dir,
                          const std::string& format);

}  // namespace bioinfer::runtime
