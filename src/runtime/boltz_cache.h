// Boltz-2's files as a model directory: boltz's own cache folder (~/.boltz or $BOLTZ_CACHE, as
// `boltz predict` fills it) or a hub snapshot of boltz-community/boltz-2 with mols.tar extracted.
#pragma once
#include <string>

#include "models/boltz2/names.h"  // the files' names

namespace bioinfer::runtime {

// boltz's cache folder: $BOLTZ_CACHE when set, else ~/.boltz (boltz.main.get_cache_path).
std::string boltz_cache_path();

// A folder holding boltz2_conf.ckpt and a mols/ folder: a boltz cache such as ~/.boltz, or a hub
// snapshot whose mols.tar has been unpacked.
bool is_boltz2_model_dir(const std::string& dir);

// A folder in boltz's cache layout: boltz2_conf.ckpt with mols/ or mols.tar (boltz2_aff.ckpt
// beside them when boltz fetched the affinity model). Unpacks mols.tar when mols/ is absent, then
// returns true; false (nothing touched) for any other folder.
bool open_boltz2_cache(const std::string& dir);

struct Boltz2Files {
    std::string checkpoint;  // <dir>/boltz2_conf.ckpt
    std::string mols_dir;    // <dir>/mols: <CCD code>.pkl per molecule
};
// The files of a Boltz-2 model folder; an error naming what is missing otherwise (with the
// hint to unpack mols.tar when only the archive is there).
Boltz2Files boltz2_files(const std::string& dir);

// Unpacks mols.tar of `dir` into `dir`/mols when that folder is absent (boltz extracts the same
// archive into its cache). The archive is read into a hidden staging folder first, so mols/
// appears complete or not at all. Returns whether it unpacked anything.
bool unpack_boltz2_mols(const std::string& dir);

// Unpacks a tar archive (POSIX ustar, GNU long names, pax path records; regular files and
// folders) into `dest`. Entries with absolute paths or ".." are refused, links are skipped.
void extract_tar(const std::string& tar_path, const std::string& dest);

}  // namespace bioinfer::runtime
