// Boltz-2's structural templates: file reading, chain records and features (templates.h).
#include "models/boltz2/templates.h"

#include <gemmi/align.hpp>
#include <gemmi/cif.hpp>
#include <gemmi/mmcif.hpp>
#include <gemmi/mmread.hpp>
#include <gemmi/model.hpp>
#include <gemmi/modify.hpp>
#include <gemmi/polyheur.hpp>
#include <gemmi/to_mmcif.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>

#include "bioinfer/error.h"
#include "io/atomic_file.h"
#include "io/limits.h"
#include "models/boltz2/ligands.h"

namespace bioinfer::boltz2 {
namespace {

// BLOSUM62 over Biopython's alphabet ABCDEFGHIJKLMNOPQRSTUVWXYZ* (its "blastp" table).
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ*";
constexpr int kBlosum62[27][27] = {{4,  -2, 0,  -2, -1, -2, 0, -2, -1, -1, -1, -1, -1, -2,
                                    -1, -1, -1, -1, 1,  0,  0, 0,  -3, -1, -2, -1, -4},
                                   {-2, 4,  -3, 4,  1, -3, -1, 0,  -3, -3, 0,  -4, -3, 4,
                                    -1, -2, 0,  -1, 0, -1, -3, -3, -4, -1, -3, 0,  -4},
                                   {0,  -3, 9,  -3, -4, -2, -3, -3, -1, -1, -3, -1, -1, -3,
                                    -1, -3, -3, -3, -1, -1, 9,  -1, -2, -1, -2, -3, -4},
                                   {-2, 4,  -3, 6,  2, -3, -1, -1, -3, -3, -1, -4, -3, 1,
                                    -1, -1, 0,  -2, 0, -1, -3, -3, -4, -1, -3, 1,  -4},
                                   {-1, 1,  -4, 2, 5, -3, -2, 0,  -3, -3, 1,  -3, -2, 0,
                                    -1, -1, 2,  0, 0, -1, -4, -2, -3, -1, -2, 4,  -4},
                                   {-2, -3, -2, -3, -3, 6,  -3, -1, 0, 0,  -3, 0,  0, -3,
                                    -1, -4, -3, -3, -2, -2, -2, -1, 1, -1, 3,  -3, -4},
                                   {0,  -1, -3, -1, -2, -3, 6,  -2, -4, -4, -2, -4, -3, 0,
                                    -1, -2, -2, -2, 0,  -2, -3, -3, -2, -1, -3, -2, -4},
                                   {-2, 0,  -3, -1, 0,  -1, -2, 8,  -3, -3, -1, -3, -2, 1,
                                    -1, -2, 0,  0,  -1, -2, -3, -3, -2, -1, 2,  0,  -4},
                                   {-1, -3, -1, -3, -3, 0,  -4, -3, 4,  3,  -3, 2,  1, -3,
                                    -1, -3, -3, -3, -2, -1, -1, 3,  -3, -1, -1, -3, -4},
                                   {-1, -3, -1, -3, -3, 0,  -4, -3, 3,  3,  -3, 3,  2, -3,
                                    -1, -3, -2, -2, -2, -1, -1, 2,  -2, -1, -1, -3, -4},
                                   {-1, 0,  -3, -1, 1, -3, -2, -1, -3, -3, 5,  -2, -1, 0,
                                    -1, -1, 1,  2,  0, -1, -3, -2, -3, -1, -2, 1,  -4},
                                   {-1, -4, -1, -4, -3, 0,  -4, -3, 2,  3,  -2, 4,  2, -3,
                                    -1, -3, -2, -2, -2, -1, -1, 1,  -2, -1, -1, -3, -4},
                                   {-1, -3, -1, -3, -2, 0,  -3, -2, 1,  2,  -1, 2,  5, -2,
                                    -1, -2, 0,  -1, -1, -1, -1, 1,  -1, -1, -1, -1, -4},
                                   {-2, 4,  -3, 1, 0, -3, 0,  1,  -3, -3, 0,  -3, -2, 6,
                                    -1, -2, 0,  0, 1, 0,  -3, -3, -4, -1, -2, 0,  -4},
                                   {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -4},
                                   {-1, -2, -3, -1, -1, -4, -2, -2, -3, -3, -1, -3, -2, -2,
                                    -1, 7,  -1, -2, -1, -1, -3, -2, -4, -1, -3, -1, -4},
                                   {-1, 0,  -3, 0, 2, -3, -2, 0,  -3, -2, 1,  -2, 0, 0,
                                    -1, -1, 5,  1, 0, -1, -3, -2, -2, -1, -1, 4,  -4},
                                   {-1, -1, -3, -2, 0,  -3, -2, 0,  -3, -2, 2,  -2, -1, 0,
                                    -1, -2, 1,  5,  -1, -1, -3, -3, -3, -1, -2, 0,  -4},
                                   {1,  0,  -1, 0,  0, -2, 0,  -1, -2, -2, 0,  -2, -1, 1,
                                    -1, -1, 0,  -1, 4, 1,  -1, -2, -3, -1, -2, 0,  -4},
                                   {0,  -1, -1, -1, -1, -2, -2, -2, -1, -1, -1, -1, -1, 0,
                                    -1, -1, -1, -1, 1,  5,  -1, 0,  -2, -1, -2, -1, -4},
                                   {0,  -3, 9,  -3, -4, -2, -3, -3, -1, -1, -3, -1, -1, -3,
                                    -1, -3, -3, -3, -1, -1, 9,  -1, -2, -1, -2, -3, -4},
                                   {0,  -3, -1, -3, -2, -1, -3, -3, 3,  2,  -2, 1,  1, -3,
                                    -1, -2, -2, -3, -2, 0,  -1, 4,  -3, -1, -1, -2, -4},
                                   {-3, -4, -2, -4, -3, 1,  -2, -2, -3, -2, -3, -2, -1, -4,
                                    -1, -4, -2, -3, -3, -2, -2, -3, 11, -1, 2,  -2, -4},
                                   {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -4},
                                   {-2, -3, -2, -3, -2, 3,  -3, 2,  -1, -1, -2, -1, -1, -2,
                                    -1, -3, -1, -2, -2, -2, -2, -1, 2,  -1, 7,  -2, -4},
                                   {-1, 0,  -3, 1, 4, -3, -2, 0,  -3, -3, 1,  -3, -1, 0,
                                    -1, -1, 4,  0, 0, -1, -3, -2, -2, -1, -2, 4,  -4},
                                   {-4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4,
                                    -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, 1}};

std::vector<int> encode(const std::string& s, const std::string& where) {
    std::vector<int> out;
    out.reserve(s.size());
    for (char c : s) {
        const char* p = c ? std::strchr(kAlphabet, c) : nullptr;
        BI_CHECK(p, where, "template alignment: letter '", std::string(1, c),
                 "' is outside the BLOSUM62 alphabet (A-Z, *)");
        out.push_back(int(p - kAlphabet));
    }
    return out;
}

}  // namespace

double blastp_global_score(const std::string& query, const std::string& target,
                           const std::string& where) {
    const std::vector<int> q = encode(query, where), t = encode(target, where);
    const size_t n = q.size(), m = t.size();
    constexpr double kOpen = -12.0, kExtend = -1.0;
    const double neg = -std::numeric_limits<double>::infinity();
    // Gotoh: H best, E ending in a gap in the query (target letter consumed), F the other way
    std::vector<double> H(m + 1), E(m + 1, neg), Hp(m + 1), Ep(m + 1, neg);
    Hp[0] = 0.0;
    for (size_t j = 1; j <= m; ++j) Ep[j] = Hp[j] = kOpen + double(j - 1) * kExtend;
    std::vector<double> F(m + 1, neg);
    for (size_t i = 1; i <= n; ++i) {
        H[0] = kOpen + double(i - 1) * kExtend;
        E[0] = neg;
        F[0] = H[0];
        for (size_t j = 1; j <= m; ++j) {
            E[j] = std::max(E[j - 1] + kExtend, H[j - 1] + kOpen);
            F[j] = std::max(F[j] + kExtend, Hp[j] + kOpen);
            H[j] = std::max({Hp[j - 1] + double(kBlosum62[q[i - 1]][t[j - 1]]), E[j], F[j]});
        }
        std::swap(H, Hp);
    }
    return Hp[m];
}

std::vector<LocalAlignment> ungapped_local_alignments(const std::string& query,
                                                      const std::string& target,
                                                      const std::string& where) {
    const std::vector<int> q = encode(query, where), t = encode(target, where);
    const int n = int(q.size()), m = int(t.size());
    // H[i][j]: the best ungapped score of an alignment ending at (i, j), at least 0
    std::vector<int> H(size_t(n + 1) * size_t(m + 1), 0);
    const auto at = [&](int i, int j) -> int& { return H[size_t(i) * size_t(m + 1) + size_t(j)]; };
    int best = 0;
    for (int i = 1; i <= n; ++i)
        for (int j = 1; j <= m; ++j) {
            at(i, j) = std::max(0, at(i - 1, j - 1) + kBlosum62[q[i - 1]][t[j - 1]]);
            best = std::max(best, at(i, j));
        }
    std::vector<LocalAlignment> out;
    if (best <= 0) return out;
    for (int i = 1; i <= n; ++i)
        for (int j = 1; j <= m; ++j) {
            if (at(i, j) != best || kBlosum62[q[i - 1]][t[j - 1]] <= 0) continue;
            int k = 1;
            bool through_best = false;
            while (at(i - k, j - k) > 0) {
                through_best |= at(i - k, j - k) == best;
                ++k;
            }
            if (!through_best) out.push_back({i - k, i, j - k, j});
        }
    return out;
}

std::vector<std::array<int, 2>> max_assignment(const std::vector<std::vector<double>>& score) {
    std::vector<std::array<int, 2>> out;
    if (score.empty() || score[0].empty()) return out;
    const bool transpose = score.size() > score[0].size();
    const int nr = int(transpose ? score[0].size() : score.size());
    const int nc = int(transpose ? score.size() : score[0].size());
    // minimise the negated scores
    const auto cost = [&](int i, int j) {
        return -(transpose ? score[size_t(j)][size_t(i)] : score[size_t(i)][size_t(j)]);
    };
    const double inf = std::numeric_limits<double>::infinity();
    const auto rows = static_cast<size_t>(nr), cols = static_cast<size_t>(nc);
    std::vector<double> u(rows, 0.0), v(cols, 0.0), spc(cols);
    std::vector<int> path(cols, -1), col4row(rows, -1), row4col(cols, -1);
    std::vector<int> remaining(cols);
    std::vector<char> SR(rows), SC(cols);
    for (int cur = 0; cur < nr; ++cur) {
        double min_val = 0.0;
        int num_remaining = nc;
        for (int it = 0; it < nc; ++it) remaining[size_t(it)] = nc - it - 1;
        std::fill(SR.begin(), SR.end(), 0);
        std::fill(SC.begin(), SC.end(), 0);
        std::fill(spc.begin(), spc.end(), inf);
        int sink = -1, i = cur;
        while (sink == -1) {
            int index = -1;
            double lowest = inf;
            SR[size_t(i)] = 1;
            for (int it = 0; it < num_remaining; ++it) {
                const int j = remaining[size_t(it)];
                const double r = min_val + cost(i, j) - u[size_t(i)] - v[size_t(j)];
                if (r < spc[size_t(j)]) {
                    path[size_t(j)] = i;
                    spc[size_t(j)] = r;
                }
                if (spc[size_t(j)] < lowest ||
                    (spc[size_t(j)] == lowest && row4col[size_t(j)] == -1)) {
                    lowest = spc[size_t(j)];
                    index = it;
                }
            }
            min_val = lowest;
            BI_CHECK(index >= 0 && std::isfinite(min_val), "template chains",
                     "no feasible assignment of query to template chains");
            const int j = remaining[size_t(index)];
            if (row4col[size_t(j)] == -1)
                sink = j;
            else
                i = row4col[size_t(j)];
            SC[size_t(j)] = 1;
            remaining[size_t(index)] = remaining[size_t(--num_remaining)];
        }
        u[size_t(cur)] += min_val;
        for (int r = 0; r < nr; ++r)
            if (SR[size_t(r)] && r != cur)
                u[size_t(r)] += min_val - spc[size_t(col4row[size_t(r)])];
        for (int c = 0; c < nc; ++c)
            if (SC[size_t(c)]) v[size_t(c)] -= min_val - spc[size_t(c)];
        for (int j = sink;;) {
            const int r = path[size_t(j)];
            row4col[size_t(j)] = r;
            std::swap(col4row[size_t(r)], j);
            if (r == cur) break;
        }
    }
    for (int r = 0; r < nr; ++r) out.push_back({r, col4row[size_t(r)]});
    if (transpose) {
        for (auto& p : out) std::swap(p[0], p[1]);
        std::sort(out.begin(), out.end());
    }
    return out;
}

// ---- the template structure ---------------------------------------------------------------

const TemplateChain* TemplateStructure::chain(const std::string& name) const {
    for (const TemplateChain& c : chains)
        if (c.name == name) return &c;
    return nullptr;
}

namespace {

// numpy's fp32 dot of 3-vectors (its BLAS sdot): fp32 products summed in double, rounded once.
float sdot3(const float* x, const float* y) {
    const float p0 = x[0] * y[0], p1 = x[1] * y[1], p2 = x[2] * y[2];
    return float(double(p0) + double(p1) + double(p2));
}

// boltz's compute_frame in fp32 (norms through sdot): e1 along C - CA, e2 the part of N - CA
// orthogonal to it, e3 = e1 x e2; rot's columns are e1, e2, e3; t = CA.
void compute_frame(const std::array<float, 3>& n, const std::array<float, 3>& ca,
                   const std::array<float, 3>& c, TemplateResidue& r) {
    float v1[3], v2[3], e1[3], u2[3], e2[3], e3[3];
    for (int d = 0; d < 3; ++d) {
        v1[d] = c[size_t(d)] - ca[size_t(d)];
        v2[d] = n[size_t(d)] - ca[size_t(d)];
    }
    const float n1 = std::sqrt(sdot3(v1, v1)) + 1e-10f;
    for (int d = 0; d < 3; ++d) e1[d] = v1[d] / n1;
    const float dot = sdot3(e1, v2);
    for (int d = 0; d < 3; ++d) u2[d] = v2[d] - e1[d] * dot;
    const float n2 = std::sqrt(sdot3(u2, u2)) + 1e-10f;
    for (int d = 0; d < 3; ++d) e2[d] = u2[d] / n2;
    e3[0] = e1[1] * e2[2] - e1[2] * e2[1];
    e3[1] = e1[2] * e2[0] - e1[0] * e2[2];
    e3[2] = e1[0] * e2[1] - e1[1] * e2[0];
    for (int row = 0; row < 3; ++row) {
        r.frame_rot[size_t(row * 3 + 0)] = e1[row];
        r.frame_rot[size_t(row * 3 + 1)] = e2[row];
        r.frame_rot[size_t(row * 3 + 2)] = e3[row];
    }
    r.frame_t = ca;
    r.frame_mask = true;
}

std::array<float, 3> pos_of(const gemmi::Atom& a) {
    return {float(a.pos.x), float(a.pos.y), float(a.pos.z)};
}

// parse_polymer for one L-peptide subchain, reduced to what the template tokens read.
TemplateChain parse_protein_chain(const gemmi::ResidueSpan& polymer, const gemmi::Entity& entity,
                                  const std::string& name, const ConformerLibrary& canonical,
                                  const std::string& mols_dir, const std::string& where) {
    const Vocab& v = vocab();
    std::vector<std::string> sequence;
    for (const std::string& item : entity.full_sequence)
        sequence.push_back(gemmi::Entity::first_mon(item));
    const gemmi::AlignmentResult result = gemmi::align_sequence_to_polymer(
        sequence, polymer, entity.polymer_type, gemmi::AlignmentScoring());
    TemplateChain chain;
    chain.name = name;
    chain.sequence = gemmi::one_letter_code(sequence);
    size_t i = 0;
    for (size_t j = 0; j < result.match_string.size(); ++j) {
        BI_CHECK(j < sequence.size(), where, "chain ", name,
                 ": its residues do not align to the entity's sequence");
        std::string res_name = sequence[j];
        const gemmi::Residue* res = nullptr;
        std::map<std::string, const gemmi::Atom*> atoms;
        if (result.match_string[j] == '|') {
            BI_CHECK(i < polymer.size(), where, "chain ", name, ": alignment past the chain's end");
            res = &polymer[i++];
            for (const gemmi::Atom& a : res->atoms) {
                std::string up = a.name;
                for (char& ch : up) ch = char(std::toupper(static_cast<unsigned char>(ch)));
                atoms[up] = &a;  // the last of a name, as the reference's dict keeps
            }
            BI_CHECK(res->name == res_name, where, "chain ", name, ": alignment mismatch at ",
                     res_name, " (residue ", res->seqid.str(), ")");
        }
        TemplateResidue r;
        r.res_idx = int(j);
        if (res_name == "MSE") {
            res_name = "MET";
            auto se = atoms.find("SE");
            if (se != atoms.end()) atoms["SD"] = se->second;
        } else if (!v.ref_atoms.count(res_name)) {
            // a non-standard residue: UNK, its CCD molecule's first kept heavy atom as the centre
            const ResidueMol mol =
                ccd_molecule(res_name, canonical, mols_dir, cat(where, ": chain ", name));
            r.res_type = v.token_id("UNK");
            const auto heavy = std::count_if(mol.atoms.begin(), mol.atoms.end(),
                                             [](const MolAtom& a) { return a.element != 1; });
            if (heavy == 1) {  // a one-atom component: the residue's first atom, whatever its name
                if (res && !res->atoms.empty()) r.center = r.disto = pos_of(res->atoms[0]);
                r.disto_mask = res != nullptr;
                chain.residues.push_back(r);
                continue;
            }
            for (const MolAtom& a : mol.atoms) {
                if (a.element == 1) continue;
                const bool in_file = atoms.count(a.name) > 0;
                if (a.leaving && !in_file) continue;  // covalent: absent leaving atoms dropped
                if (in_file) {
                    r.center = r.disto = pos_of(*atoms.at(a.name));
                    r.disto_mask = res != nullptr;
                }
                break;
            }
            chain.residues.push_back(r);
            continue;
        }
        r.res_type = v.token_id(res_name);
        const std::vector<std::string>& names = v.ref_atoms.at(res_name);
        const auto atom = [&](const std::string& n) -> const gemmi::Atom* {
            auto it = atoms.find(n);
            return it == atoms.end() ? nullptr : it->second;
        };
        const gemmi::Atom* center = atom(v.center_atom.at(res_name));
        const gemmi::Atom* disto = atom(v.disto_atom.at(res_name));
        if (center) r.center = pos_of(*center);
        if (disto) r.disto = pos_of(*disto);
        r.disto_mask = res && disto;
        // atoms 0..2 of a protein residue are N, CA, C
        const gemmi::Atom* n = atom(names.at(0));
        const gemmi::Atom* ca = atom(names.at(1));
        const gemmi::Atom* c = atom(names.at(2));
        if (n && ca && c) compute_frame(pos_of(*n), pos_of(*ca), pos_of(*c), r);
        chain.residues.push_back(r);
    }
    return chain;
}

}  // namespace

TemplateStructure read_template_structure(const std::string& path, bool pdb,
                                          const ConformerLibrary& canonical,
                                          const std::string& mols_dir) {
    const std::string where = cat("template ", path);
    io::check_regular_file(path, io::input_limits().file_bytes, "--max-input-size");
    gemmi::Structure st;
    try {
        if (pdb) {
            // boltz's parse_pdb: entities set up, each chain's subchains renamed <chain><k>, then
            // written and read back as mmCIF
            gemmi::Structure raw = gemmi::read_structure_file(path, gemmi::CoorFormat::Pdb);
            gemmi::setup_entities(raw);
            BI_CHECK(!raw.models.empty(), where, "holds no model");
            std::map<std::string, std::string> renamed;
            std::map<std::string, int> counts;
            for (gemmi::Chain& ch : raw.models[0].chains) {
                counts[ch.name] = 0;
                for (gemmi::Residue& res : ch.residues) {
                    auto it = renamed.find(res.subchain);
                    if (it == renamed.end())
                        it = renamed
                                 .emplace(res.subchain, ch.name + std::to_string(++counts[ch.name]))
                                 .first;
                    res.subchain = it->second;
                }
            }
            for (gemmi::Entity& e : raw.entities)
                for (std::string& sub : e.subchains) {
                    auto it = renamed.find(sub);
                    if (it != renamed.end()) sub = it->second;
                }
            // with _entity_poly, so that the polymer types survive the round trip
            gemmi::MmcifOutputGroups groups(true);
            groups.entity_poly = true;
            const gemmi::cif::Document doc = gemmi::make_mmcif_document(raw, groups);
            st = gemmi::make_structure_from_block(doc.blocks.at(0));
        } else {
            const gemmi::cif::Document doc = gemmi::cif::read_file(path);
            BI_CHECK(!doc.blocks.empty(), where, "holds no data block");
            st = gemmi::make_structure_from_block(doc.blocks.at(0));
        }
    } catch (const Error&) {
        throw;
    } catch (const std::exception& e) {
        fail(where, cat("cannot read structure: ", e.what()));
    }
    BI_CHECK(!st.models.empty(), where, "holds no model");
    st.merge_chain_parts();
    gemmi::remove_waters(st);
    gemmi::remove_hydrogens(st);
    gemmi::remove_alternative_conformations(st);
    st.remove_empty_chains();

    std::map<std::string, const gemmi::Entity*> entity_of;
    for (const gemmi::Entity& e : st.entities) {
        if (e.entity_type == gemmi::EntityType::Water) continue;
        for (const std::string& sub : e.subchains) entity_of[sub] = &e;
    }
    TemplateStructure out;
    out.path = path;
    for (gemmi::ResidueSpan& sub : st.models[0].subchains()) {
        const std::string id = sub.subchain_id();
        auto it = entity_of.find(id);
        BI_CHECK(it != entity_of.end(), where, "subchain ", id, " belongs to no entity");
        const gemmi::Entity& e = *it->second;
        if (e.entity_type != gemmi::EntityType::Polymer ||
            e.polymer_type != gemmi::PolymerType::PeptideL)
            continue;
        out.chains.push_back(parse_protein_chain(sub, e, id, canonical, mols_dir, where));
    }
    return out;
}

TemplateStructure read_template(const bio::Template& entry, const ConformerLibrary& canonical,
                                const std::string& mols_dir) {
    std::error_code ec;
    // (a path that exists but is no regular file is refused by read_template_structure)
    BI_CHECK(std::filesystem::exists(entry.path, ec), entry.where, "template ",
             entry.name, ": ", entry.path,
             " does not exist (looked next to the input file and in the working directory)");
    return read_template_structure(entry.path, entry.pdb, canonical, mols_dir);
}

// ---- records --------------------------------------------------------------------------------

std::vector<TemplateRecord> template_records(const bio::Template& entry,
                                             const bio::Target& target,
                                             const TemplateStructure& structure) {
    const std::string& w = entry.where;
    std::map<std::string, std::string> query_seq;
    std::vector<std::string> query_ids = entry.chain_ids;
    for (const bio::Chain& c : target.chains)
        if (c.type == bio::MoleculeType::Protein) {
            query_seq[c.id] = c.sequence;
            if (entry.chain_ids.empty()) query_ids.push_back(c.id);
        }
    std::vector<std::string> tmpl_ids = entry.template_ids;
    if (tmpl_ids.empty())
        for (const TemplateChain& c : structure.chains) tmpl_ids.push_back(c.name);
    for (const std::string& id : tmpl_ids)
        BI_CHECK(structure.chain(id), w, "template ", entry.name, ": chain ", id,
                 " is not a protein chain of ", structure.path);
    for (const std::string& id : query_ids)
        BI_CHECK(query_seq.count(id), w, "template ", entry.name, ": chain ", id,
                 " is not one of the protein chains of the input");
    std::vector<std::array<int, 2>> pairs;
    if (!entry.chain_ids.empty() && !entry.template_ids.empty()) {
        for (size_t k = 0; k < query_ids.size(); ++k) pairs.push_back({int(k), int(k)});
    } else {
        std::vector<std::vector<double>> score(query_ids.size());
        for (size_t r = 0; r < query_ids.size(); ++r)
            for (const std::string& t : tmpl_ids)
                score[r].push_back(blastp_global_score(query_seq.at(query_ids[r]),
                                                       structure.chain(t)->sequence, w));
        pairs = max_assignment(score);
    }
    std::vector<TemplateRecord> out;
    for (const auto& [r, c] : pairs) {
        const std::string& q = query_ids[size_t(r)];
        const TemplateChain& tc = *structure.chain(tmpl_ids[size_t(c)]);
        for (const LocalAlignment& a : ungapped_local_alignments(query_seq.at(q), tc.sequence, w)) {
            TemplateRecord rec;
            rec.name = entry.name;
            rec.query_chain = q;
            rec.template_chain = tc.name;
            rec.query_st = a.query_st;
            rec.query_en = a.query_en;
            rec.template_st = a.template_st;
            rec.template_en = a.template_en;
            rec.force = entry.force;
            rec.threshold = entry.threshold;
            out.push_back(rec);
        }
    }
    return out;
}

// ---- features -------------------------------------------------------------------------------

void set_template_features(const std::vector<TemplateRecord>& records,
                           const std::map<std::string, const TemplateStructure*>& structures,
                           const TemplateQuery& query, Features& f) {
    const int64_t N = int64_t(query.token_chain.size());
    constexpr int64_t kClasses = 33;
    std::vector<std::string> names;  // rows: distinct names in first-appearance order
    for (const TemplateRecord& r : records)
        if (std::find(names.begin(), names.end(), r.name) == names.end()) names.push_back(r.name);
    const int64_t T = int64_t(names.size());
    std::vector<float> restype(size_t(T * N * kClasses), 0.f), rot(size_t(T * N * 9), 0.f),
        trans(size_t(T * N * 3), 0.f), cb(size_t(T * N * 3), 0.f), ca(size_t(T * N * 3), 0.f),
        mask_cb(size_t(T * N), 0.f), mask_frame(size_t(T * N), 0.f), mask(size_t(T * N), 0.f),
        vis(size_t(T * N), 0.f), force(size_t(T), 0.f), threshold(size_t(T), 0.f);
    std::map<std::string, int> asym_of;
    for (size_t k = 0; k < query.chains.size(); ++k) asym_of[query.chains[k]] = int(k);
    for (int64_t row = 0; row < T; ++row) {
        std::vector<int> types(size_t(N), 0);
        std::map<int, int> templated;  // asym_id -> row
        const TemplateRecord* last = nullptr;
        for (const TemplateRecord& rec : records) {
            if (rec.name != names[size_t(row)]) continue;
            last = &rec;
            const TemplateStructure& st = *structures.at(rec.name);
            const TemplateChain* tc = st.chain(rec.template_chain);
            BI_CHECK(tc, "template " + rec.name, "chain ", rec.template_chain, " is not in ",
                     st.path);
            const int offset = rec.template_st - rec.query_st;
            // the query chain's tokens by residue index
            std::map<int, int64_t> q_index;
            for (int64_t i = 0; i < N; ++i)
                if (query.token_chain[size_t(i)] == rec.query_chain)
                    q_index[query.token_res_idx[size_t(i)]] = i;
            for (const TemplateResidue& res : tc->residues) {
                auto it = q_index.find(res.res_idx - offset);
                if (it == q_index.end()) continue;
                const int64_t i = it->second, at = row * N + i;
                templated[asym_of.at(rec.query_chain)] = int(row);
                types[size_t(i)] = res.res_type;
                std::copy(res.frame_rot.begin(), res.frame_rot.end(), rot.begin() + at * 9);
                std::copy(res.frame_t.begin(), res.frame_t.end(), trans.begin() + at * 3);
                std::copy(res.disto.begin(), res.disto.end(), cb.begin() + at * 3);
                std::copy(res.center.begin(), res.center.end(), ca.begin() + at * 3);
                mask_cb[size_t(at)] = res.disto_mask ? 1.f : 0.f;
                mask_frame[size_t(at)] = res.frame_mask ? 1.f : 0.f;
                mask[size_t(at)] = 1.f;
            }
        }
        for (int64_t i = 0; i < N; ++i) {
            restype[size_t((row * N + i) * kClasses + types[size_t(i)])] = 1.f;
            const int asym = asym_of.at(query.token_chain[size_t(i)]);
            auto it = templated.find(asym);
            vis[size_t(row * N + i)] = it != templated.end() ? float(it->second) : float(-1 - asym);
        }
        force[size_t(row)] = last->force ? 1.f : 0.f;
        threshold[size_t(row)] = float(last->threshold);
    }
    const auto make = [](std::vector<float>& v, Shape s) { return Tensor::of(v, std::move(s)); };
    f.set("template_restype", make(restype, {T, N, kClasses}));
    f.set("template_frame_rot", make(rot, {T, N, 3, 3}));
    f.set("template_frame_t", make(trans, {T, N, 3}));
    f.set("template_cb", make(cb, {T, N, 3}));
    f.set("template_ca", make(ca, {T, N, 3}));
    f.set("template_mask_cb", make(mask_cb, {T, N}));
    f.set("template_mask_frame", make(mask_frame, {T, N}));
    f.set("template_mask", make(mask, {T, N}));
    f.set("query_to_template", Tensor::zeros({T, N}));
    f.set("visibility_ids", make(vis, {T, N}));
    f.set("template_force", make(force, {T}));
    f.set("template_force_threshold", make(threshold, {T}));
}

}  // namespace bioinfer::boltz2
