// ESMFold2's protein featurizer: see featurize.h.
#include "models/esmfold2/featurize.h"

#include <map>

#include "bioinfer/error.h"

namespace bioinfer::esmfold2 {

Inputs featurize(const std::vector<std::string>& chains, const std::string& where) {
    const std::vector<ProteinResidue>& table = protein_residues();
    std::map<char, const ProteinResidue*> by_letter;
    const ProteinResidue* unk = nullptr;
    for (const ProteinResidue& r : table) {
        if (std::string(r.name) == "UNK")
            unk = &r;
        else
            by_letter[r.letter] = &r;
    }
    BI_CHECK(unk != nullptr, where, "the residue table lacks UNK");
    BI_CHECK(!chains.empty(), where, "no chains");
    Inputs in;
    AtomFeatures& a = in.atoms;
    std::map<std::string, int32_t> entity, copies;
    int32_t token = 0;
    for (size_t c = 0; c < chains.size(); ++c) {
        const std::string& seq = chains[c];
        BI_CHECK(!seq.empty(), where, "chain ", c + 1, " is empty");
        const int32_t ent = entity.emplace(seq, int32_t(entity.size())).first->second;
        const int32_t sym = copies[seq]++;
        for (size_t i = 0; i < seq.size(); ++i, ++token) {
            const char l = seq[i];
            BI_CHECK(l >= 'A' && l <= 'Z', where, "chain ", c + 1, ": character '", l,
                     "' at position ", i + 1, " is not an upper-case amino-acid letter");
            auto it = by_letter.find(l);
            const ProteinResidue& r = it != by_letter.end() ? *it->second : *unk;
            in.token_index.push_back(token);
            in.residue_index.push_back(int32_t(i));
            in.asym_id.push_back(int32_t(c));
            in.sym_id.push_back(sym);
            in.entity_id.push_back(ent);
            in.mol_type.push_back(0);
            in.res_type.push_back(r.res_type);
            in.input_ids.push_back(r.esm_token);
            int64_t rep = -1, ca = -1;
            for (const ProteinAtom& at : r.atoms) {
                const std::string name = at.name;
                if (name == "CB") rep = a.real_atoms;
                if (name == "CA") ca = a.real_atoms;
                for (float x : at.pos) a.ref_pos.push_back(x);
                a.ref_charge.push_back(float(at.charge));
                a.ref_element.push_back(at.element == 'C'   ? 6
                                        : at.element == 'N' ? 7
                                        : at.element == 'O' ? 8
                                                            : 16);
                for (size_t k = 0; k < 4; ++k)
                    a.name_chars.push_back(k < name.size() && name[k] != ' ' ? int32_t(name[k]) - 32
                                                                             : 0);
                a.space_uid.push_back(token);
                a.atom_to_token.push_back(token);
                ++a.real_atoms;
            }
            in.rep_atom.push_back(int32_t(rep >= 0 ? rep : ca));
        }
    }
    in.tokens = token;
    a.tokens = token;
    a.atoms = (a.real_atoms + 31) / 32 * 32;
    const size_t pad = size_t(a.atoms - a.real_atoms);
    a.ref_pos.resize(a.ref_pos.size() + 3 * pad, 0.f);
    a.ref_charge.resize(a.ref_charge.size() + pad, 0.f);
    a.ref_element.resize(a.ref_element.size() + pad, 0);
    a.name_chars.resize(a.name_chars.size() + 4 * pad, 0);
    a.space_uid.resize(a.space_uid.size() + pad, 0);
    a.atom_to_token.resize(a.atom_to_token.size() + pad, 0);
    // single-sequence MSA: the query row, no deletions
    in.msa_rows = 1;
    in.msa = in.res_type;
    in.has_deletion.assign(size_t(token), 0.f);
    in.deletion_value.assign(size_t(token), 0.f);
    in.deletion_mean.assign(size_t(token), 0.f);
    return in;
}

}  // namespace bioinfer::esmfold2
