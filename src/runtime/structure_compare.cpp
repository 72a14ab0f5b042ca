// Residue matching, superposition (gemmi's QCP), TM-score search and Calpha lDDT.
#include "runtime/structure_compare.h"

#include <algorithm>
#include <cmath>
#include <gemmi/qcp.hpp>
#include <map>
#include <tuple>

#include "bioinfer/error.h"

namespace bioinfer::runtime {

namespace {

using Pos = std::array<double, 3>;

double dist2(const Pos& a, const Pos& b) {
    const double x = a[0] - b[0], y = a[1] - b[1], z = a[2] - b[2];
    return x * x + y * y + z * z;
}

// Global alignment of two letter strings (match +2, mismatch -1, gap -2): aligned index pairs.
std::vector<std::pair<size_t, size_t>> align(const std::string& a, const std::string& b) {
    const size_t n = a.size(), m = b.size();
    std::vector<int> score((n + 1) * (m + 1));
    auto at = [&](size_t i, size_t j) -> int& { return score[i * (m + 1) + j]; };
    for (size_t i = 0; i <= n; ++i) at(i, 0) = -2 * int(i);
    for (size_t j = 0; j <= m; ++j) at(0, j) = -2 * int(j);
    for (size_t i = 1; i <= n; ++i)
        for (size_t j = 1; j <= m; ++j)
            at(i, j) = std::max({at(i - 1, j - 1) + (a[i - 1] == b[j - 1] ? 2 : -1),
                                 at(i - 1, j) - 2, at(i, j - 1) - 2});
    std::vector<std::pair<size_t, size_t>> pairs;
    size_t i = n, j = m;
    while (i > 0 && j > 0) {
        if (at(i, j) == at(i - 1, j - 1) + (a[i - 1] == b[j - 1] ? 2 : -1)) {
            pairs.emplace_back(i - 1, j - 1);
            --i;
            --j;
        } else if (at(i, j) == at(i - 1, j) - 2) {
            --i;
        } else {
            --j;
        }
    }
    std::reverse(pairs.begin(), pairs.end());
    return pairs;
}

struct Superposition {
    double rot[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}, trans[3] = {0, 0, 0};
    Pos apply(const Pos& p) const {
        return {rot[0] * p[0] + rot[1] * p[1] + rot[2] * p[2] + trans[0],
                rot[3] * p[0] + rot[4] * p[1] + rot[5] * p[2] + trans[1],
                rot[6] * p[0] + rot[7] * p[1] + rot[8] * p[2] + trans[2]};
    }
};

// The rigid transform that best maps `moving` onto `fixed` over the selected indices.
Superposition superpose(const std::vector<Pos>& fixed, const std::vector<Pos>& moving,
                        const std::vector<size_t>& sel) {
    std::vector<gemmi::Position> a, b;
    for (size_t k : sel) {
        a.emplace_back(fixed[k][0], fixed[k][1], fixed[k][2]);
        b.emplace_back(moving[k][0], moving[k][1], moving[k][2]);
    }
    const gemmi::SupResult r = gemmi::superpose_positions(a.data(), b.data(), a.size(), nullptr);
    Superposition s;
    for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) s.rot[i * 3 + j] = r.transform.mat[i][j];
        s.trans[i] = r.transform.vec.at(i);
    }
    return s;
}

// TM-score of the pairs under superposition s, normalised by n_norm.
double tm_under(const std::vector<Pos>& fixed, const std::vector<Pos>& moving,
                const Superposition& s, double d0, double n_norm) {
    double sum = 0;
    for (size_t k = 0; k < fixed.size(); ++k) sum += 1.0 / (1.0 + dist2(fixed[k], s.apply(moving[k])) / (d0 * d0));
    return sum / n_norm;
}

// TM-score search as in Zhang & Skolnick's TM-score: superpose on seed fragments of decreasing
// length, then repeatedly on the pairs closer than d0_search, keeping the best score.
double tm_score(const std::vector<Pos>& fixed, const std::vector<Pos>& moving, double d0,
                double n_norm) {
    const size_t n = fixed.size();
    if (n < 3) return 0.0;
    const double d0_search = std::clamp(d0, 4.5, 8.0);
    double best = 0;
    for (size_t frag = n; ; frag = std::max<size_t>(frag / 2, 4)) {
        const size_t step = std::max<size_t>(1, frag / 2);
        for (size_t start = 0; start + frag <= n; start += step) {
            std::vector<size_t> sel(frag);
            for (size_t k = 0; k < frag; ++k) sel[k] = start + k;
            for (int it = 0; it < 20; ++it) {
                const Superposition s = superpose(fixed, moving, sel);
                best = std::max(best, tm_under(fixed, moving, s, d0, n_norm));
                std::vector<size_t> next;
                for (double cut = d0_search; next.size() < 3 && cut < 100.0; cut += 0.5) {
                    next.clear();
                    for (size_t k = 0; k < n; ++k)
                        if (dist2(fixed[k], s.apply(moving[k])) < cut * cut) next.push_back(k);
                }
                if (next.size() < 3 || next == sel) break;
                sel = std::move(next);
            }
        }
        if (frag <= 4 || frag / 2 < 4) break;
    }
    return best;
}

}  // namespace

double superposed_rmsd(const std::vector<Pos>& a, const std::vector<Pos>& b) {
    BI_CHECK(a.size() == b.size() && !a.empty(), "superposed_rmsd", "expected two equal, non-empty ",
             "point sets, got ", a.size(), " and ", b.size());
    std::vector<size_t> all(a.size());
    for (size_t k = 0; k < a.size(); ++k) all[k] = k;
    const Superposition s = superpose(a, b, all);
    double sum = 0;
    for (size_t k = 0; k < a.size(); ++k) sum += dist2(a[k], s.apply(b[k]));
    return std::sqrt(sum / double(a.size()));
}

std::vector<io::CaResidue> ca_residues(const bio::Prediction& p, size_t sample) {
    BI_CHECK(sample < p.samples.size(), "ca_residues", "sample ", sample, " of ", p.samples.size());
    const bio::Sample& s = p.samples[sample];
    std::vector<io::CaResidue> out;
    for (const bio::Token& t : p.tokens) {
        // amino acids with a Calpha, as read_ca_residues takes them
        if (t.rep_atom < 0 || p.chains[size_t(t.chain)].type != bio::MoleculeType::Protein) continue;
        const float* xyz = s.coords.f32() + t.rep_atom * 3;
        io::CaResidue r;
        r.chain = p.chains[size_t(t.chain)].id;
        r.number = t.residue;
        r.name = t.name;
        r.letter = t.letter;
        r.ca = {xyz[0], xyz[1], xyz[2]};
        r.b_factor = 100.0f * s.plddt.f32()[t.rep_atom];
        out.push_back(r);
    }
    return out;
}

std::vector<std::pair<size_t, size_t>> match_residues(const std::vector<io::CaResidue>& pred,
                                                      const std::vector<io::CaResidue>& truth,
                                                      Match how, std::string* used) {
    std::vector<std::pair<size_t, size_t>> by_number;
    if (how != Match::Sequence) {
        std::map<std::tuple<std::string, int32_t, char>, size_t> index;
        for (size_t i = 0; i < pred.size(); ++i) index[{pred[i].chain, pred[i].number, pred[i].icode}] = i;
        size_t same_name = 0;
        for (size_t j = 0; j < truth.size(); ++j) {
            auto it = index.find({truth[j].chain, truth[j].number, truth[j].icode});
            if (it == index.end()) continue;
            by_number.emplace_back(it->second, j);
            same_name += pred[it->second].letter == truth[j].letter;
        }
        // Auto: numbering is trusted when it pairs most residues with the same amino acid.
        const bool good = !by_number.empty() && same_name * 10 >= by_number.size() * 9 &&
                          by_number.size() * 2 >= std::min(pred.size(), truth.size());
        if (how == Match::Number || good) {
            if (used) *used = "number";
            return by_number;
        }
    }
    std::string a, b;
    for (auto& r : pred) a += r.letter;
    for (auto& r : truth) b += r.letter;
    if (used) *used = "sequence";
    return align(a, b);
}

Comparison compare_structures(const std::vector<io::CaResidue>& pred,
                              const std::vector<io::CaResidue>& truth, Match how) {
    Comparison c;
    c.pred_residues = int64_t(pred.size());
    c.truth_residues = int64_t(truth.size());
    const auto pairs = match_residues(pred, truth, how, &c.matched_by);
    c.aligned = int64_t(pairs.size());
    BI_CHECK(pairs.size() >= 3, "compare", "only ", pairs.size(),
             " residues pair up between the structures (need at least 3)");
    std::vector<Pos> p, t;
    for (auto [i, j] : pairs) {
        p.push_back(pred[i].ca);
        t.push_back(truth[j].ca);
        c.identical += pred[i].letter == truth[j].letter;
    }
    c.rmsd = superposed_rmsd(t, p);
    const double lt = double(truth.size());
    c.d0 = lt > 21 ? std::max(0.5, 1.24 * std::cbrt(lt - 15.0) - 1.8) : 0.5;
    c.tm_score = tm_score(t, p, c.d0, lt);

    // lDDT over truth residue pairs closer than 15 A; a pair with a residue missing from the
    // prediction counts as not preserved.
    std::vector<long> pred_of(truth.size(), -1);
    for (auto [i, j] : pairs) pred_of[j] = long(i);
    double preserved = 0;
    long total = 0;
    for (size_t a = 0; a < truth.size(); ++a)
        for (size_t b = 0; b < truth.size(); ++b) {
            if (a == b) continue;
            const double dt = std::sqrt(dist2(truth[a].ca, truth[b].ca));
            if (dt >= 15.0) continue;
            ++total;
            if (pred_of[a] < 0 || pred_of[b] < 0) continue;
            const double dp = std::sqrt(dist2(pred[size_t(pred_of[a])].ca, pred[size_t(pred_of[b])].ca));
            const double e = std::fabs(dp - dt);
            preserved += 0.25 * ((e < 0.5) + (e < 1.0) + (e < 2.0) + (e < 4.0));
        }
    c.lddt = total > 0 ? preserved / double(total) : 0.0;
    return c;
}

}  // namespace bioinfer::runtime
