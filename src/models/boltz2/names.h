// Where Boltz-2's files are published and what they are called, as boltz's own download code
// names them (boltz.main: BOLTZ2_URL_WITH_FALLBACK, BOLTZ2_AFFINITY_URL_WITH_FALLBACK).
#pragma once

namespace bioinfer::boltz2 {

// The repository `boltz predict` downloads Boltz-2 from.
inline constexpr const char* kHubRepo = "boltz-community/boltz-2";
// The structure + confidence model, and the CCD molecules (mols.tar, unpacked to mols/).
inline constexpr const char* kCheckpoint = "boltz2_conf.ckpt";
inline constexpr const char* kMolsTar = "mols.tar";
inline constexpr const char* kMolsDir = "mols";
// The affinity model, registered on its own and fetched when a target asks for affinity.
inline constexpr const char* kAffinityCheckpoint = "boltz2_aff.ckpt";
inline constexpr const char* kAffinityModelName = "boltz2-affinity";

}  // namespace bioinfer::boltz2
