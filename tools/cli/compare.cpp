// bioinfer compare: Calpha RMSD, TM-score and lDDT between a predicted and a reference structure.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "args.h"
#include "bioinfer/error.h"
#include "io/atomic_file.h"
#include "io/structure.h"
#include "runtime/structure_compare.h"

namespace bioinfer::cli {

static const char* kCompareHelp = R"(usage: bioinfer compare PRED TRUTH [options]

PRED and TRUTH are PDB or mmCIF files (first model, amino-acid residues with a CA atom).
Prints JSON: Calpha RMSD after optimal superposition, TM-score (normalised by TRUTH's length)
and Calpha lDDT (against TRUTH).

  --match M    how residues pair up: number (same chain id and residue number), sequence
               (global alignment of the one-letter sequences, chains in file order), or auto
               (number when it pairs most residues with the same amino acid; default)
  --out FILE   write the JSON to FILE instead of stdout
)";

int compare_main(int argc, char** argv) {
    Args a = parse_args(argc, argv, {"match", "out"}, {"help"});
    if (a.has("help")) {
        std::fputs(kCompareHelp, stdout);
        return 0;
    }
    BI_CHECK(a.positional.size() == 2, "arguments", "expected PRED and TRUTH, got ",
             a.positional.size(), " files (see --help)");
    const std::string m = a.get("match", "auto");
    BI_CHECK(m == "auto" || m == "number" || m == "sequence", "--match",
             "expected auto, number or sequence, got '", m, "'");
    const runtime::Match how = m == "number"     ? runtime::Match::Number
                               : m == "sequence" ? runtime::Match::Sequence
                                                 : runtime::Match::Auto;
    const auto pred = io::read_ca_residues(a.positional[0]);
    const auto truth = io::read_ca_residues(a.positional[1]);
    const runtime::Comparison c = runtime::compare_structures(pred, truth, how);
    const nlohmann::json j = {{"pred", a.positional[0]},     {"truth", a.positional[1]},
                              {"matched_by", c.matched_by},  {"pred_residues", c.pred_residues},
                              {"truth_residues", c.truth_residues}, {"aligned", c.aligned},
                              {"identical", c.identical},    {"ca_rmsd", c.rmsd},
                              {"tm_score", c.tm_score},      {"tm_d0", c.d0},
                              {"ca_lddt", c.lddt}};
    const std::string text = j.dump(2) + "\n";
    if (a.has("out"))
        io::write_file_atomic(a.get("out"), text);
    else
        std::fputs(text.c_str(), stdout);
    return 0;
}

}  // namespace bioinfer::cli
