// MSAs: a3m and CSV by boltz's rules (Boltz-2), a3m by the esm package's (ESMFold2).
#include "fuzz_target.h"
#include "io/msa.h"

using namespace bioinfer;

BIOINFER_FUZZ_TARGET(msa) {
    attempt([&] { io::parse_a3m(data, "input.a3m", 64); });
    attempt([&] { io::parse_msa_csv(data, "input.csv", 64); });
    attempt([&] { io::parse_a3m_esm(data, "input.a3m", 64); });
}
