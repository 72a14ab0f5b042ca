// What predict writes for one target (runtime/fold_pipeline.h runs the job): the plain layout
// (per sample a structure, its PAE/PDE and plot; the confidence JSON last) or the tree boltz
// predict writes. Every file goes through a temporary name and a rename.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "bio/prediction.h"
#include "runtime/fold_pipeline.h"

namespace bioinfer::runtime {

// A prediction holding NaN or Inf (weights loaded with --allow-nonfinite, an overflow) fails
// its target alone, before anything of it is written: an error naming the target and the value.
void require_finite(const bio::Prediction& p, const std::string& id);

// Writes a target's files (per sample a structure, PAE and plot; the confidence JSON last);
// returns their names. Sample 0, the model's best, is <id>.<format>; sample k > 0 is
// <id>_sample<k>.<format>.
nlohmann::json write_target(const FoldRecord& rec, const bio::Prediction& out, double seconds,
                            const PredictOptions& opts, const std::string& out_dir);

// Writes a target as boltz predict does (its folder replaced in one step), then the pLDDT/PAE
// plot of the best sample beside it; returns the files relative to out_dir.
nlohmann::json write_boltz_target(const FoldRecord& rec, const bio::Prediction& out,
                                  const PredictOptions& opts, const std::string& out_dir);

// The files boltz predict writes for target `id` (sample 0's; the rest follow the same names).
// With an affinity binder, also the affinity stage's affinity_<id>.json; with
// opts.fold.write_embeddings, embeddings_<id>.npz (s and z, written after the folder is in place).
nlohmann::json boltz_files(const std::string& id, const PredictOptions& opts, bool affinity);

}  // namespace bioinfer::runtime
