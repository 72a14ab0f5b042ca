// Token order as in fair-esm's Alphabet.from_architecture("ESM-1b") and the HF EsmTokenizer vocab.
#include "models/esm_alphabet.h"

#include <cctype>

#include "bioinfer/error.h"

namespace bioinfer::esm {

const std::vector<std::string>& alphabet() {
    static const std::vector<std::string> a{
        "<cls>", "<pad>", "<eos>", "<unk>", "L", "A", "G", "V", "S", "E", "R",
        "T",     "I",     "D",     "P",     "K", "Q", "N", "F", "Y", "M", "H",
        "W",     "C",     "X",     "B",     "U", "Z", "O", ".", "-", "<null_1>", "<mask>"};
    return a;
}

std::vector<int32_t> tokenize(const std::string& seq, const std::string& record) {
    static const auto table = [] {
        std::vector<int32_t> t(256, -1);
        const auto& a = alphabet();
        for (size_t i = 0; i < a.size(); ++i)
            if (a[i].size() == 1) t[uint8_t(a[i][0])] = int32_t(i);
        return t;
    }();
    std::vector<int32_t> out;
    out.reserve(seq.size());
    for (size_t i = 0; i < seq.size(); ++i) {
        if (seq[i] == '<') {
            size_t end = seq.find('>', i);
            std::string tok = end == std::string::npos ? seq.substr(i) : seq.substr(i, end - i + 1);
            int32_t id = -1;
            const auto& a = alphabet();
            for (size_t k = 0; k < a.size(); ++k)
                if (a[k] == tok) id = int32_t(k);
            BI_CHECK(id >= 0 && id != kCls && id != kEos && id != kPad, "record '" + record + "'",
                     "special token '", tok, "' at position ", out.size() + 1,
                     " is not allowed inside a sequence");
            out.push_back(id);
            i = end;
            continue;
        }
        const unsigned char c = uint8_t(std::toupper((unsigned char)seq[i]));
        const int32_t id = table[c];
        if (id < 0) {
            std::string shown = std::isprint(c) ? std::string(1, char(c)) : cat("\\x", int(c));
            const char* hint = c == ':' ? " (':' joins chains for ESMFold; embed each chain as its own record)"
                                        : "";
            fail("record '" + record + "'", cat("residue '", shown, "' at position ", out.size() + 1,
                                                " is not in the ESM alphabet", hint));
        }
        out.push_back(id);
    }
    return out;
}

}  // namespace bioinfer::esm
