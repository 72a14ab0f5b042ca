// The ESM alphabet's tokenizer (models/esm_alphabet.h): letters, special tokens, and the errors
// that name the record and the position.
#include <gtest/gtest.h>

#include "models/esm_alphabet.h"
#include "test_util.h"

using namespace bioinfer;
using test::error_of;
using test::expect_contains;

TEST(Alphabet, TokenizeAndErrors) {
    auto t = esm::tokenize("mk<mask>XBUZO.-", "r1");
    std::vector<int32_t> want{20, 15, 32, 24, 25, 26, 27, 28, 29, 30};
    EXPECT_EQ(t, want);
    expect_contains(error_of([] { esm::tokenize("MKJ", "r1"); }),
                    "[record 'r1'] residue 'J' at position 3 is not in the ESM alphabet");
    expect_contains(error_of([] { esm::tokenize("MK<eos>", "r2"); }), "special token '<eos>'");
    expect_contains(error_of([] { esm::tokenize("MK1", "r3"); }), "residue '1'");
}

// A control byte in a sequence is named in the error as hex, never written raw.
TEST(Alphabet, ControlByteInTheErrorShowsAsHex) {
    expect_contains(error_of([] { esm::tokenize(std::string("MK\x02T"), "r"); }),
                    "residue '\\x02' at position 3");
}
