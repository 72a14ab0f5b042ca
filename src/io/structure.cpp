// gemmi does the PDB / mmCIF reading and writing; this file holds the one translation unit that
// compiles gemmi's writer implementation.
#define GEMMI_WRITE_IMPLEMENTATION
#include "io/structure.h"

#include <gemmi/mmread.hpp>
#include <gemmi/model.hpp>
#include <gemmi/modify.hpp>
#include <gemmi/polyheur.hpp>
#include <gemmi/resinfo.hpp>
#include <gemmi/to_cif.hpp>
#include <gemmi/to_mmcif.hpp>
#include <gemmi/to_pdb.hpp>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include "bio/prediction.h"
#include "bio/residues.h"
#include "bioinfer/error.h"
#include "io/atomic_file.h"
#include "io/limits.h"

namespace bioinfer::io {

void write_structure(const std::vector<AtomSite>& atoms, const std::string& name,
                     const std::string& format, const std::string& path) {
    BI_CHECK(format == "pdb" || format == "cif", path, "format '", format,
             "' is not pdb or cif");
    gemmi::Structure st;
    st.name = name;
    st.input_format = format == "pdb" ? gemmi::CoorFormat::Pdb : gemmi::CoorFormat::Mmcif;
    gemmi::Model model("1");
    for (const AtomSite& a : atoms) {
        if (model.chains.empty() || model.chains.back().name != a.chain)
            model.chains.emplace_back(a.chain);
        gemmi::Chain& ch = model.chains.back();
        if (ch.residues.empty() || *ch.residues.back().seqid.num != a.residue ||
            ch.residues.back().seqid.icode != a.icode || ch.residues.back().name != a.resname) {
            gemmi::Residue r;
            r.name = a.resname;
            r.seqid = gemmi::SeqId(a.residue, a.icode);
            r.entity_type = a.hetero ? gemmi::EntityType::NonPolymer : gemmi::EntityType::Polymer;
            r.het_flag = a.hetero ? 'H' : 'A';
            ch.residues.push_back(r);
        }
        gemmi::Atom at;
        at.name = a.atom;
        at.element = gemmi::Element(a.element);
        at.pos = gemmi::Position(a.x, a.y, a.z);
        at.occ = 1.0f;
        at.b_iso = a.b_factor;
        ch.residues.back().atoms.push_back(at);
    }
    st.models.push_back(std::move(model));
    gemmi::setup_entities(st);
    gemmi::assign_serial_numbers(st);
    std::ostringstream os;
    if (format == "pdb") {
        gemmi::PdbWriteOptions opt;
        opt.cryst1_record = false;
        gemmi::write_pdb(st, os, opt);
    } else {
        gemmi::cif::write_cif_to_stream(os, gemmi::make_mmcif_document(st));
    }
    write_file_atomic(path, os.str());
}

std::vector<AtomSite> atom_sites(const bio::Prediction& p, size_t sample) {
    BI_CHECK(sample < p.samples.size(), "atom_sites", "sample ", sample, " of ", p.samples.size());
    const bio::Sample& s = p.samples[sample];
    std::vector<AtomSite> atoms;
    atoms.reserve(p.atoms.size());
    for (size_t a = 0; a < p.atoms.size(); ++a) {
        const bio::Atom& at = p.atoms[a];
        const bio::Token& t = p.tokens[size_t(at.token)];
        const float* xyz = s.coords.f32() + a * 3;
        atoms.push_back({p.chains[size_t(t.chain)].id, t.residue, t.name, at.name, at.element, xyz[0],
                         xyz[1], xyz[2], 100.0f * s.plddt.f32()[a]});
    }
    return atoms;
}

void write_structure(const bio::Prediction& p, size_t sample, const std::string& name,
                     const std::string& format, const std::string& path) {
    write_structure(atom_sites(p, sample), name, format, path);
}

namespace {

// A PDB or mmCIF file within the input size limit, with at least one model.
gemmi::Structure read_checked(const std::string& path) {
    check_regular_file(path, input_limits().file_bytes, "--max-input-size");
    gemmi::Structure st;
    try {
        st = gemmi::read_structure_file(path);
    } catch (const std::exception& e) {
        fail(path, cat("cannot read structure: ", e.what()));
    }
    BI_CHECK(!st.models.empty(), path, "holds no model");
    return st;
}

}  // namespace

std::vector<CaResidue> read_ca_residues(const std::string& path) {
    const gemmi::Structure st = read_checked(path);
    std::vector<CaResidue> out;
    for (const gemmi::Chain& ch : st.models[0].chains)
        for (const gemmi::Residue& r : ch.residues) {
            const gemmi::ResidueInfo info = gemmi::find_tabulated_residue(r.name);
            if (!info.is_amino_acid()) continue;
            const gemmi::Atom* ca = nullptr;
            for (const gemmi::Atom& a : r.atoms)
                if (a.name == "CA" && a.element == gemmi::El::C) {
                    ca = &a;
                    break;  // first conformer
                }
            if (!ca) continue;
            CaResidue c;
            c.chain = ch.name;
            c.number = *r.seqid.num;
            c.icode = r.seqid.icode;
            c.name = r.name;
            // gemmi writes modified residues (MSE, ...) in lower case: X, as in sequence files
            const char one = info.one_letter_code;
            c.letter = one >= 'A' && one <= 'Z' ? one : 'X';
            c.ca = {ca->pos.x, ca->pos.y, ca->pos.z};
            c.b_factor = ca->b_iso;
            out.push_back(c);
        }
    BI_CHECK(!out.empty(), path, "holds no amino-acid residue with a CA atom");
    return out;
}

namespace {

// ProDy's amino-acid residue names (atomic/flags.py: the 20 and its nonstandard ones) and water.
bool prody_amino_acid(const std::string& n) {
    static const std::set<std::string> names = {
        "ALA", "ARG", "ASN", "ASP", "CYS", "GLN", "GLU", "GLY", "HIS", "ILE", "LEU", "LYS",
        "MET", "PHE", "PRO", "SER", "THR", "TRP", "TYR", "VAL", "ASX", "GLX", "ASH", "GLH",
        "CSO", "CYX", "HIP", "HID", "HIE", "HSD", "HSE", "HSP", "HISD", "HISE", "HISP", "LYN",
        "TYM", "ARN", "MSE", "CME", "SEC", "SEP", "TPO", "PTR", "PHD", "XLE", "XAA", "MEN", "CSB"};
    return names.count(n) > 0;
}
bool prody_water(const std::string& n) {
    static const std::set<std::string> names = {"HOH", "DOD", "WAT", "TIP3", "H2O", "OH2",
                                                "TIP", "TIP2", "TIP4", "SPC", "SOL", "T3P"};
    return names.count(n) > 0;
}
// parse_PDB's element numbers: its table of symbols (with its "Mb" for Mo, and its last entry,
// "Uuo", left out of the mapping), upper-cased, numbered from 1.
int32_t element_number(const std::string& symbol) {
    static const char* const table[] = {
        "H",  "He", "Li", "Be", "B",  "C",  "N",  "O",  "F",   "Ne", "Na",  "Mg", "Al",  "Si",
        "P",  "S",  "Cl", "Ar", "K",  "Ca", "Sc", "Ti", "V",   "Cr", "Mn",  "Fe", "Co",  "Ni",
        "Cu", "Zn", "Ga", "Ge", "As", "Se", "Br", "Kr", "Rb",  "Sr", "Y",   "Zr", "Nb",  "Mb",
        "Tc", "Ru", "Rh", "Pd", "Ag", "Cd", "In", "Sn", "Sb",  "Te", "I",   "Xe", "Cs",  "Ba",
        "La", "Ce", "Pr", "Nd", "Pm", "Sm", "Eu", "Gd", "Tb",  "Dy", "Ho",  "Er", "Tm",  "Yb",
        "Lu", "Hf", "Ta", "W",  "Re", "Os", "Ir", "Pt", "Au",  "Hg", "Tl",  "Pb", "Bi",  "Po",
        "At", "Rn", "Fr", "Ra", "Ac", "Th", "Pa", "U",  "Np",  "Pu", "Am",  "Cm", "Bk",  "Cf",
        "Es", "Fm", "Md", "No", "Lr", "Rf", "Db", "Sg", "Bh",  "Hs", "Mt",  "Ds", "Rg",  "Cn",
        "Uut", "Fl", "Uup", "Lv", "Uus"};
    std::string up = symbol;
    for (char& c : up) c = char(std::toupper(static_cast<unsigned char>(c)));
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); ++i) {
        std::string t = table[i];
        for (char& c : t) c = char(std::toupper(static_cast<unsigned char>(c)));
        if (t == up) return int32_t(i + 1);
    }
    return 0;
}

}  // namespace

DesignStructure read_design_structure(const std::string& path, const std::vector<std::string>& chains,
                                      bool zero_occupancy) {
    const gemmi::Structure st = read_checked(path);
    std::set<std::string> present_chains;
    for (const gemmi::Chain& ch : st.models[0].chains) present_chains.insert(ch.name);
    for (const std::string& c : chains)
        BI_CHECK(present_chains.count(c), path, "has no chain '", c, "' (chains: ",
                 [&] {
                     std::string s;
                     for (const auto& p : present_chains) s += (s.empty() ? "" : ", ") + p;
                     return s;
                 }(),
                 ")");
    const std::set<std::string> keep(chains.begin(), chains.end());
    std::map<std::string, int32_t> chain_order;
    DesignStructure out;
    const auto kept = [&](const gemmi::Atom& a) {
        return (a.altloc == '\0' || a.altloc == ' ' || a.altloc == 'A') && (zero_occupancy || a.occ > 0);
    };
    for (const gemmi::Chain& ch : st.models[0].chains) {
        if (!keep.empty() && !keep.count(ch.name)) continue;
        for (const gemmi::Residue& r : ch.residues) {
            bool any = false, ca = false;
            for (const gemmi::Atom& a : r.atoms)
                if (kept(a)) {
                    any = true;
                    ca = ca || a.name == "CA";
                }
            if (!any) continue;
            chain_order.emplace(ch.name, int32_t(chain_order.size()));
            if (ca && prody_amino_acid(r.name)) {
                DesignResidue d;
                d.chain = ch.name;
                d.number = *r.seqid.num;
                d.icode = r.seqid.icode == '\0' ? ' ' : r.seqid.icode;
                d.name = r.name;
                // the 20's letters; ProDy's nonstandard names are X
                d.letter = bio::residue_letter(r.name);
                for (const gemmi::Atom& a : r.atoms) {
                    if (!kept(a)) continue;
                    for (int s = 0; s < 36; ++s)  // OXT is not read
                        if (a.name == bio::kAtom37Names[s]) {
                            d.xyz[size_t(s * 3)] = float(a.pos.x);
                            d.xyz[size_t(s * 3 + 1)] = float(a.pos.y);
                            d.xyz[size_t(s * 3 + 2)] = float(a.pos.z);
                            d.present[size_t(s)] = 1;
                        }
                }
                out.residues.push_back(d);
                out.chain_index.push_back(chain_order.at(ch.name));
                continue;
            }
            if (prody_water(r.name)) continue;
            for (const gemmi::Atom& a : r.atoms) {
                if (!kept(a)) continue;
                ContextAtom c;
                c.chain = ch.name;
                c.residue = *r.seqid.num;
                c.icode = r.seqid.icode == '\0' ? ' ' : r.seqid.icode;
                c.resname = r.name;
                c.atom = a.name;
                c.element = a.element == gemmi::El::X ? "" : a.element.uname();
                c.element_number = c.element.empty() ? 0 : element_number(c.element);
                c.xyz = {float(a.pos.x), float(a.pos.y), float(a.pos.z)};
                c.b_factor = a.b_iso;
                out.other.push_back(c);
            }
        }
    }
    BI_CHECK(!out.residues.empty(), path, "holds no protein residue (an amino acid with a CA atom)",
             chains.empty() ? "" : " in the chains asked for");
    return out;
}

}  // namespace bioinfer::io
