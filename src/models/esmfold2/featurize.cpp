// ESMFold2's protein featurizer: see featurize.h.
#include "models/esmfold2/featurize.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <set>

#include "bio/residues.h"
#include "bioinfer/error.h"

namespace bioinfer::esmfold2 {

const std::vector<ProteinResidue>& protein_residues() {
    static const std::vector<ProteinResidue> table = [] {
        std::vector<ProteinResidue> t = protein_residue_table();
        for (ProteinResidue& r : t) {
            r.letter = bio::residue_letter(r.name);
            r.res_type = bio::residue_token(r.name);
        }
        return t;
    }();
    return table;
}

namespace {

// The 20 amino acids by one-letter code, and UNK (every other letter).
struct ResidueLetters {
    std::map<char, const ProteinResidue*> by_letter;
    const ProteinResidue* unk = nullptr;
    const ProteinResidue& of(char l) const {
        auto it = by_letter.find(l);
        return it != by_letter.end() ? *it->second : *unk;
    }
};

const ResidueLetters& residue_letters() {
    static const ResidueLetters t = [] {
        ResidueLetters r;
        for (const ProteinResidue& p : protein_residues()) {
            if (std::string(p.name) == "UNK")
                r.unk = &p;
            else
                r.by_letter[p.letter] = &p;
        }
        BI_CHECK(r.unk != nullptr, "esmfold2 featurize", "the residue table lacks UNK");
        return r;
    }();
    return t;
}

}  // namespace

Inputs featurize(const std::vector<std::string>& chains, const std::string& where) {
    const ResidueLetters& letters = residue_letters();
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
            const ProteinResidue& r = letters.of(l);
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

void attach_msas(Inputs& in, const std::vector<const bio::Msa*>& per_chain, const std::string& where,
                 int64_t max_rows) {
    constexpr size_t kMaxPaired = 8192, kMaxRows = 16384;
    BI_CHECK(max_rows >= 1, where, "MSA row limit ", max_rows, " must be at least 1");
    const int64_t T = in.tokens;
    const int32_t C = T > 0 ? in.asym_id.back() + 1 : 0;
    BI_CHECK(int32_t(per_chain.size()) == C, where, "MSAs for ", per_chain.size(),
             " chains, the target has ", C);
    // per chain: residue classes and deletion counts (rows x columns), pairing keys
    const ResidueLetters& letters = residue_letters();
    struct ChainMsa {
        int64_t width = 0;
        std::vector<int32_t> res;
        std::vector<float> del;
        std::vector<int64_t> key;
    };
    std::vector<ChainMsa> ch(static_cast<size_t>(C));
    for (int32_t c = 0; c < C; ++c) {
        ChainMsa& m = ch[size_t(c)];
        if (!per_chain[size_t(c)]) {  // the chain's own sequence, one row
            for (int64_t t = 0; t < T; ++t)
                if (in.asym_id[size_t(t)] == c) m.res.push_back(in.res_type[size_t(t)]);
            m.width = int64_t(m.res.size());
            m.del.assign(m.res.size(), 0.f);
            m.key = {-1};
            continue;
        }
        const bio::Msa& msa = *per_chain[size_t(c)];
        m.width = int64_t(msa.rows[0].residues.size());
        BI_CHECK(m.width > 0, msa.source, "the MSA's query row has no aligned columns");
        for (const bio::MsaRow& row : msa.rows) {
            for (char l : row.residues) m.res.push_back(l == '-' ? 1 : letters.of(l).res_type);
            const size_t base = m.del.size();
            m.del.resize(base + size_t(m.width), 0.f);
            for (const auto& [col, n] : row.deletions) m.del[base + size_t(col)] = float(n);
            m.key.push_back(row.taxonomy);
        }
    }
    // the row layout: for each MSA row, the row of each chain (-1: gaps)
    std::vector<std::vector<int64_t>> rows{std::vector<int64_t>(static_cast<size_t>(C), 0)};
    std::vector<int64_t> order;  // pairing keys by first appearance
    std::map<int64_t, std::vector<std::pair<int32_t, int64_t>>> groups;
    for (int32_t c = 0; c < C; ++c)
        for (size_t i = 1; i < ch[size_t(c)].key.size(); ++i) {
            const int64_t k = ch[size_t(c)].key[i];
            if (k == -1) continue;
            auto [it, fresh] = groups.try_emplace(k);
            if (fresh) order.push_back(k);
            it->second.emplace_back(c, int64_t(i));
        }
    std::vector<std::pair<int64_t, size_t>> kept;  // (key, chains it touches)
    std::set<std::pair<int32_t, int64_t>> grouped;
    for (int64_t k : order) {
        const auto& g = groups[k];
        if (g.size() < 2) continue;
        std::set<int32_t> chains;
        for (const auto& [c, i] : g) chains.insert(c), grouped.insert({c, i});
        kept.emplace_back(k, chains.size());
    }
    std::stable_sort(kept.begin(), kept.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    std::vector<std::deque<int64_t>> available(static_cast<size_t>(C));
    for (int32_t c = 0; c < C; ++c)
        for (size_t i = 1; i < ch[size_t(c)].key.size(); ++i)
            if (!grouped.count({c, int64_t(i)})) available[size_t(c)].push_back(int64_t(i));
    const auto next_unpaired = [&](int32_t c) {
        auto& q = available[size_t(c)];
        if (q.empty()) return int64_t(-1);
        const int64_t i = q.front();
        q.pop_front();
        return i;
    };
    for (const auto& [k, n_chains] : kept) {
        if (rows.size() >= kMaxPaired) break;
        std::map<int32_t, std::vector<int64_t>> by_chain;
        for (const auto& [c, i] : groups[k]) by_chain[c].push_back(i);
        size_t n = 0;
        for (const auto& [c, v] : by_chain) n = std::max(n, v.size());
        for (size_t r = 0; r < n && rows.size() < kMaxPaired; ++r) {
            std::vector<int64_t> row(static_cast<size_t>(C));
            for (int32_t c = 0; c < C; ++c) {
                auto it = by_chain.find(c);
                row[size_t(c)] =
                    it != by_chain.end() ? it->second[r % it->second.size()] : next_unpaired(c);
            }
            rows.push_back(std::move(row));
        }
    }
    size_t unpaired = 0;
    for (const auto& q : available) unpaired = std::max(unpaired, q.size());
    for (size_t r = 0; r < unpaired && rows.size() < kMaxRows; ++r) {
        std::vector<int64_t> row(static_cast<size_t>(C));
        for (int32_t c = 0; c < C; ++c) row[size_t(c)] = next_unpaired(c);
        rows.push_back(std::move(row));
    }
    // the features, rows x tokens
    if (int64_t(rows.size()) > max_rows) rows.resize(size_t(max_rows));
    const int64_t M = int64_t(rows.size());
    in.msa_rows = M;
    in.msa.assign(size_t(M * T), 1);
    in.has_deletion.assign(size_t(M * T), 0.f);
    in.deletion_value.assign(size_t(M * T), 0.f);
    in.deletion_mean.assign(size_t(T), 0.f);
    for (int64_t m = 0; m < M; ++m)
        for (int64_t t = 0; t < T; ++t) {
            const int32_t c = in.asym_id[size_t(t)];
            const ChainMsa& cm = ch[size_t(c)];
            const int64_t r = rows[size_t(m)][size_t(c)];
            if (r < 0) continue;
            const int64_t col = std::min<int64_t>(in.residue_index[size_t(t)], cm.width - 1);
            const size_t at = size_t(r * cm.width + col), out = size_t(m * T + t);
            in.msa[out] = cm.res[at];
            const float d = cm.del[at];
            in.has_deletion[out] = d > 0 ? 1.f : 0.f;
            in.deletion_value[out] = float(M_PI / 2) * std::atan(d / 3.f);
        }
    for (int64_t t = 0; t < T; ++t) {
        float s = 0;
        for (int64_t m = 0; m < M; ++m) s += in.deletion_value[size_t(m * T + t)];
        in.deletion_mean[size_t(t)] = s / float(M);
    }
}

}  // namespace bioinfer::esmfold2
