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
//
// Nothing reaches out_dir unless the whole merge succeeds:
// - Every file taken from a shard is checked before anything is written: it must be a regular
//   file; an npz is read whole (zip directory, every member's CRC-32, the .npy headers against
//   the member sizes) and a record's HDF5 datasets are read, and their arrays must be those
//   manifest.json lists. A damaged file is an error naming it.
// - The merged files are written into a staging folder beside out_dir (hidden, named
//   .<out_dir's name>.merge-tmp-<pid>-<n>, on the same file system), which is removed on every
//   error. A merge killed outright (SIGKILL, a power cut) leaves it behind, out_dir untouched.
// - out_dir absent: the staging folder becomes out_dir with one rename (its missing parent
//   folders are created then). out_dir present: each merged file replaces its namesake with one
//   rename, data files first and results.json last; files of out_dir the merge does not write
//   (say, npz files of an earlier npz merge when this one writes embeddings.h5) are left as they
//   are, so results.json and manifest.json are the only lists of what the merge made. Each file
//   replaced is kept (hard link, or copy) until all are in place, and put back if a rename fails.
// - out_dir must not be, lie inside or contain one of the input shards (compared with symbolic
//   links, "." and ".." resolved): merging there would overwrite the shard's own results.json
//   and manifest.json.
MergeResult merge_outputs(const std::vector<std::string>& dirs, const std::string& out_dir,
                          const std::string& format);

}  // namespace bioinfer::runtime
