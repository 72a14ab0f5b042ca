// Residue lookups over the residue-constant tables.
#include "models/esmfold/residue_constants.h"

namespace bioinfer::esmfold::rc {

int restype_index(char c) {
    for (int r = 0; r < 20; ++r)
        if (kRestypes[r] == c) return r;
    return 20;
}

}  // namespace bioinfer::esmfold::rc
