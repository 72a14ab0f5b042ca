// Names of the molecule types.
#include "bio/molecule.h"

namespace bioinfer::bio {

const char* molecule_type_name(MoleculeType t) {
    switch (t) {
        case MoleculeType::Protein:
            return "protein";
        case MoleculeType::Dna:
            return "dna";
        case MoleculeType::Rna:
            return "rna";
        case MoleculeType::Ligand:
            return "ligand";
    }
    return "?";
}

}  // namespace bioinfer::bio
