// FASTA as embed, predict and score read it: the file, the records a run can take (duplicate
// ids, file-name stems), and each sequence tokenized for both ESM vocabularies and split into
// chains for the structure models; with the record and size limits lowered so inputs cross them.
#include "fuzz_target.h"
#include "io/fasta.h"
#include "io/limits.h"
#include "models/esm_alphabet.h"
#include "models/structure_model.h"
#include "runtime/inputs.h"

using namespace bioinfer;

BIOINFER_FUZZ_TARGET(fasta) {
    // limits small enough for the fuzzer to reach: the records limit, the file size limit
    io::input_limits().records = 64;
    io::input_limits().file_bytes = 64 << 10;
    attempt([&] { io::parse_fasta(data, "input.fasta"); });
    std::vector<runtime::InputRecord> records;
    attempt([&] { records = runtime::collect_fasta(write_temp(data, ".fasta")); });
    for (const auto& r : records) {
        if (!r.error.empty()) continue;
        runtime::safe_file_stem(r.id);
        attempt([&] { esm::tokenize(r.sequence, r.id, esm::Vocab::Esm2); });
        attempt([&] { esm::tokenize(r.sequence, r.id, esm::Vocab::Esmc); });
        attempt([&] { fold::protein_chains_from_fasta(r, r.source); });
    }
}
