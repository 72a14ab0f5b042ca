// What the MSA server client reads from a ColabFold MMseqs2 server: the result archive
// (out.tar.gz, gunzipped and unpacked in memory) and its a3m files, split by query; parts
// separated by a line "--8<--": an a3m file's text, then an archive's bytes.
#include <sstream>

#include "fuzz_target.h"
#include "io/archive.h"
#include "runtime/msa_server.h"

using namespace bioinfer;

BIOINFER_FUZZ_TARGET(msa_server) {
    const auto parts = split_parts(data, "\n--8<--\n", 2);
    attempt([&] { runtime::split_colabfold_a3m(std::string(parts[0]), "uniref.a3m"); });
    if (parts.size() < 2) return;
    attempt([&] {
        std::istringstream tar(io::gunzip(std::string(parts[1]), 1 << 24, "out.tar.gz"));
        io::read_tar(tar, "out.tar.gz", [&](const io::TarEntry& e, std::istream& in) {
            if (!e.directory) runtime::split_colabfold_a3m(io::read_tar_body(e, in, 1 << 24, e.path), e.path);
        });
    });
}
