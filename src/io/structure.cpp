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
#include <sstream>

#include "bio/prediction.h"
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
        if (ch.residues.empty() || *ch.residues.back().seqid.num != a.residue) {
            gemmi::Residue r;
            r.name = a.resname;
            r.seqid = gemmi::SeqId(a.residue, ' ');
            r.entity_type = gemmi::EntityType::Polymer;
            r.het_flag = 'A';
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

std::vector<CaResidue> read_ca_residues(const std::string& path) {
    check_regular_file(path, input_limits().file_bytes, "--max-input-size");
    gemmi::Structure st;
    try {
        st = gemmi::read_structure_file(path);
    } catch (const std::exception& e) {
        fail(path, cat("cannot read structure: ", e.what()));
    }
    BI_CHECK(!st.models.empty(), path, "holds no model");
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

}  // namespace bioinfer::io
