// Input limits: the process's settings and the SMILES size check (see limits.h).
#include "io/limits.h"

#include <cctype>
#include <cstdio>

#include "bioinfer/error.h"
#include "io/atomic_file.h"

namespace bioinfer::io {

InputLimits& input_limits() {
    static InputLimits limits;
    return limits;
}

std::string read_input_file(const std::string& path) {
    return read_file(path, input_limits().file_bytes, "--max-input-size");
}

std::string read_target_file(const std::string& path) {
    return read_file(path, input_limits().target_file_bytes, "--max-input-size");
}

int64_t smiles_heavy_atom_count(const std::string& s) {
    int64_t n = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '[') {
            // [isotope? symbol chirality? hcount? charge? class?]: heavy unless the symbol is H
            size_t j = i + 1;
            while (j < s.size() && std::isdigit((unsigned char)s[j])) ++j;
            const bool hydrogen = j < s.size() && s[j] == 'H' &&
                                  !(j + 1 < s.size() && std::islower((unsigned char)s[j + 1]));
            if (!hydrogen) ++n;
            const size_t close = s.find(']', j);
            if (close == std::string::npos) break;  // RDKit refuses the rest
            i = close;
        } else if (c == 'B' || c == 'C' || c == 'N' || c == 'O' || c == 'P' || c == 'S' ||
                   c == 'F' || c == 'I' || c == 'b' || c == 'c' || c == 'n' || c == 'o' ||
                   c == 'p' || c == 's' || c == '*') {
            ++n;
            // Cl, Br: one atom of two letters
            if (i + 1 < s.size() && ((c == 'C' && s[i + 1] == 'l') || (c == 'B' && s[i + 1] == 'r')))
                ++i;
        }
    }
    return n;
}

void check_smiles_size(const std::string& smiles, const std::string& where) {
    const int64_t max_atoms = input_limits().smiles_heavy_atoms;
    const int64_t max_chars = max_atoms * kSmilesCharsPerAtom;
    // the SMILES is not quoted whole: it is what is too long
    BI_CHECK(int64_t(smiles.size()) <= max_chars, where, "SMILES of ", smiles.size(),
             " characters: at most ", max_chars, " (", kSmilesCharsPerAtom,
             " per heavy atom allowed; --max-ligand-atoms raises it)");
    const int64_t atoms = smiles_heavy_atom_count(smiles);
    BI_CHECK(atoms <= max_atoms, where, "SMILES with ", atoms, " heavy atoms: at most ", max_atoms,
             " (--max-ligand-atoms raises it; Boltz-2's affinity module takes at most 128)");
}

std::string size_text(int64_t bytes) {
    static const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    double v = double(bytes);
    while (u < 4 && v >= 1024) {
        v /= 1024;
        ++u;
    }
    char buf[48];
    if (v == double(int64_t(v))) std::snprintf(buf, sizeof buf, "%lld %s", (long long)v, units[u]);
    else std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
    return buf;
}

}  // namespace bioinfer::io
