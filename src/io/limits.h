// Limits on what bioinfer reads from its users, checked before the expensive work they would
// cause: the size of a file read whole, records per file, a SMILES's size, the time one ligand's
// conformer may take. docs/reliability.md lists each with its default and how to raise it.
#pragma once
#include <cstdint>
#include <string>

namespace bioinfer::io {

struct InputLimits {
    // Bytes of an input file read whole into memory: FASTA, a mutations CSV, an MSA (a3m, csv),
    // a ligand list (--max-input-size).
    int64_t file_bytes = int64_t(2) << 30;
    // Bytes of a Boltz-2 input file (YAML, or FASTA with one record per chain), one target: a
    // complex of 5,000 tokens with constraints takes tens of kilobytes (--max-input-size too).
    int64_t target_file_bytes = int64_t(4) << 20;
    // Records in one FASTA file, ligands in one screening list (--max-records). A record costs
    // about half a kilobyte besides its sequence: this bounds a file of tiny records, which its
    // size alone does not.
    int64_t records = 1'000'000;
    // Heavy atoms in one SMILES, counted before RDKit parses it (--max-ligand-atoms). boltz
    // names a ligand's atoms by element and rank in 4 characters, which ends near 500 heavy
    // atoms with their hydrogens; its affinity module takes at most 128.
    int64_t smiles_heavy_atoms = 500;
    // Seconds RDKit may spend on one ligand's 3D conformer (--conformer-timeout).
    double conformer_seconds = 300;
};

// The process's limits: the CLI sets them from its options before it reads any input.
InputLimits& input_limits();

// Files bioinfer reads whole that are not inputs (config.json, results.json, an npz of a
// shard): a bound so that a device or a runaway file never exhausts memory.
inline constexpr int64_t kMaxOwnFileBytes = int64_t(4) << 30;
// A SMILES may have this many characters per allowed heavy atom (bonds, branches, ring digits,
// brackets with charges and stereo).
inline constexpr int64_t kSmilesCharsPerAtom = 10;

// An input file read whole (FASTA, CSV, MSA, ligand list), within input_limits().file_bytes;
// a Boltz-2 target file within target_file_bytes. Devices are refused (io::read_file).
std::string read_input_file(const std::string& path);
std::string read_target_file(const std::string& path);

// Heavy atoms a SMILES names, counted by its grammar without parsing it into a molecule: every
// atom of the organic subset (B C N O P S F Cl Br I, aromatic b c n o p s), every bracket atom
// that is not a hydrogen, and '*'. Linear in the string's length.
int64_t smiles_heavy_atom_count(const std::string& smiles);
// Refuses a SMILES past the limits above, naming `where`, before RDKit sees it.
void check_smiles_size(const std::string& smiles, const std::string& where);

// "2 GiB", "512 MiB", "4 KiB", "17 bytes".
std::string size_text(int64_t bytes);

}  // namespace bioinfer::io
