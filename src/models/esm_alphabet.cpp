// Token order as in fair-esm's Alphabet.from_architecture("ESM-1b") and the HF EsmTokenizer vocab.
#include "models/esm_alphabet.h"

#include <algorithm>
#include <cctype>

#include "bioinfer/error.h"

namespace bioinfer::esm {

const std::vector<std::string>& alphabet(Vocab v) {
    static const std::vector<std::string> esm2{
        "<cls>", "<pad>", "<eos>", "<unk>", "L", "A", "G", "V", "S", "E", "R",
        "T",     "I",     "D",     "P",     "K", "Q", "N", "F", "Y", "M", "H",
        "W",     "C",     "X",     "B",     "U", "Z", "O", ".", "-", "<null_1>", "<mask>"};
    static const std::vector<std::string> esmc = [] {
        auto a = esm2;
        a[kChainBreak] = "|";
        return a;
    }();
    return v == Vocab::Esm2 ? esm2 : esmc;
}

std::vector<int32_t> tokenize(const std::string& seq, const std::string& record, Vocab v) {
    static const auto make_table = [](Vocab which) {
        std::vector<int32_t> t(256, -1);
        const auto& a = alphabet(which);
        for (size_t i = 0; i < a.size(); ++i)
            if (a[i].size() == 1) t[uint8_t(a[i][0])] = int32_t(i);
        return t;
    };
    static const std::vector<int32_t> esm2_table = make_table(Vocab::Esm2);
    static const std::vector<int32_t> esmc_table = make_table(Vocab::Esmc);
    const auto& table = v == Vocab::Esm2 ? esm2_table : esmc_table;
    const auto& a = alphabet(v);
    std::vector<int32_t> out;
    out.reserve(seq.size());
    for (size_t i = 0; i < seq.size(); ++i) {
        if (seq[i] == '<') {
            size_t end = seq.find('>', i);
            std::string tok = end == std::string::npos ? seq.substr(i) : seq.substr(i, end - i + 1);
            int32_t id = -1;
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
            const std::string shown(1, seq[i]);  // Error shows a non-printable byte as \xHH
            const char* hint =
                c == ':' ? (v == Vocab::Esmc ? " (ESM C joins chains with '|')"
                                             : " (':' joins chains for ESMFold; embed each chain as its own record)")
                         : "";
            fail("record '" + record + "'", cat("residue '", shown, "' at position ", out.size() + 1,
                                                " is not in the ESM alphabet", hint));
        }
        out.push_back(id);
    }
    // ESM C's '|' joins chains: a record of chain breaks alone has nothing to embed
    if (v == Vocab::Esmc && !out.empty())
        BI_CHECK(std::any_of(out.begin(), out.end(), [](int32_t t) { return t != kChainBreak; }),
                 "record '" + record + "'", "holds only chain breaks ('|'), no residue");
    return out;
}

std::vector<int32_t> with_specials(const std::vector<int32_t>& residues) {
    std::vector<int32_t> t;
    t.reserve(residues.size() + 2);
    t.push_back(kCls);
    t.insert(t.end(), residues.begin(), residues.end());
    t.push_back(kEos);
    return t;
}

}  // namespace bioinfer::esm
