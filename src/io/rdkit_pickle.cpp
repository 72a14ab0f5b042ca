// RDKit MolPickler bytes -> atoms and conformers, following RDKit's own reader (MolPickler.cpp,
// StreamOps.h) for format versions 13.0 and later. Little-endian throughout.
#include "io/rdkit_pickle.h"

#include <cstdint>
#include <cstring>

#include "bioinfer/error.h"

namespace bioinfer::io {
namespace {

// MolPickler::Tags values used here (RDKit appends new tags, never renumbers).
enum Tag : uint8_t {
    kVersion = 0,
    kBeginAtom = 1,
    kBeginBond = 11,
    kBeginProps = 18,
    kEndProps = 19,
    kBeginSssr = 20,
    kEndMol = 22,
    kBeginConfs = 23,
    kAtomMapNumber = 24,
    kAtomDummyLabel = 44,
    kBeginAtomMonomer = 45,
    kPdbSerialNumber = 46,
    kPdbAltLoc = 47,
    kPdbResidueName = 48,
    kPdbChainId = 49,
    kPdbInsertionCode = 50,
    kPdbOccupancy = 51,
    kPdbTempFactor = 52,
    kPdbIsHeteroAtom = 53,
    kPdbSecondaryStructure = 54,
    kPdbResidueNumber = 55,
    kPdbSegmentNumber = 56,
    kEndAtomMonomer = 57,
    kBeginAtomProps = 58,
    kBeginBondProps = 59,
    kBeginQueryAtomData = 60,
    kBeginSgroup = 61,
    kBeginStereoGroup = 62,
    kBeginConfProps = 63,
    kBeginConfsDouble = 64,
    kBeginSymmSssr = 66,
    kBeginFastFind = 67,
    kBeginFindOther = 68,
};

constexpr int kMinVersion = 13000;

class Reader {
  public:
    Reader(const std::string& b, const std::string& where) : b_(b), where_(where) {}

    template <typename T>
    T get() {
        need(sizeof(T));
        T v;
        std::memcpy(&v, b_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;  // little-endian host (x86-64, aarch64), as RDKit writes
    }
    std::string str() {
        const uint32_t n = get<uint32_t>();
        need(n);
        std::string s = b_.substr(pos_, n);
        pos_ += n;
        return s;
    }
    uint8_t tag() { return get<uint8_t>(); }
    void expect_tag(uint8_t want, const char* what) {
        const uint8_t t = tag();
        BI_CHECK(t == want, where_, "RDKit molecule: expected the ", what, " tag (", int(want),
                 ") at byte ", pos_ - 1, ", got tag ", int(t));
    }
    void skip(uint64_t n) {
        need(n);
        pos_ += size_t(n);
    }
    size_t pos() const { return pos_; }
    size_t left() const { return b_.size() - pos_; }
    // A count read from the stream, checked against the bytes left (each item >= `min_bytes`).
    uint64_t count(uint64_t n, size_t min_bytes, const char* what) {
        BI_CHECK(n <= left() / (min_bytes ? min_bytes : 1), where_, "RDKit molecule: ", what,
                 " count ", n, " exceeds the ", left(), " bytes left (corrupt or truncated)");
        return n;
    }
    const std::string& where() const { return where_; }

  private:
    void need(uint64_t n) {
        BI_CHECK(n <= left(), where_, "RDKit molecule is truncated: expected ", n,
                 " more bytes at byte ", pos_, ", got ", left());
    }
    const std::string& b_;
    std::string where_;
    size_t pos_ = 0;
};

// Atom and bond indices are 1 byte in molecules of at most 255 atoms, else 4.
struct Index {
    bool wide = false;
    int64_t read(Reader& r) const {
        return wide ? int64_t(r.get<int32_t>()) : int64_t(r.get<uint8_t>());
    }
    size_t size() const { return wide ? 4 : 1; }
};

// streamReadProps: string, integer and boolean properties kept (as text), others parsed past.
void read_props(Reader& r, int version, std::map<std::string, std::string>* keep) {
    const uint64_t n = version >= 14000 ? r.get<uint16_t>() : r.get<uint32_t>();
    r.count(n, 5, "property");
    for (uint64_t i = 0; i < n; ++i) {
        const std::string key = r.str();
        const uint8_t type = r.get<uint8_t>();
        switch (type) {
            case 0: {  // string
                std::string v = r.str();
                if (keep) (*keep)[key] = std::move(v);
                break;
            }
            case 1: {  // int, kept as its decimal text (as RDKit's GetProp returns it)
                const int32_t v = r.get<int32_t>();
                if (keep) (*keep)[key] = std::to_string(v);
                break;
            }
            case 2: {  // unsigned
                const uint32_t v = r.get<uint32_t>();
                if (keep) (*keep)[key] = std::to_string(v);
                break;
            }
            case 4:
                r.skip(4);
                break;  // float
            case 3: {  // bool
                const uint8_t v = r.get<uint8_t>();
                if (keep) (*keep)[key] = v ? "1" : "0";
                break;
            }
            case 5:
                r.skip(8);
                break;  // double
            case 6: {   // vector<string>
                const uint64_t m = r.count(r.get<uint64_t>(), 4, "string-vector property");
                for (uint64_t j = 0; j < m; ++j) r.str();
                break;
            }
            case 7:
            case 8:
            case 10:  // vector<int>, vector<unsigned>, vector<float>
                r.skip(4 * r.count(r.get<uint64_t>(), 4, "vector property"));
                break;
            case 11:
                r.skip(8 * r.count(r.get<uint64_t>(), 8, "vector property"));
                break;
            default:
                fail(r.where(), cat("RDKit molecule: property '", key, "' has type tag ", int(type),
                                    ", which this reader does not parse (custom or unknown)"));
        }
    }
}

void read_atom(Reader& r, int version, RdkitAtom& a) {
    a.atomic_num = r.get<uint8_t>();
    const uint8_t flags = r.get<uint8_t>();
    BI_CHECK(!(flags & 0x10), r.where(),
             "RDKit molecule: atom holds a query; expected a plain molecule");
    a.aromatic = flags & 0x40;
    a.no_implicit = flags & 0x20;
    if (flags & 0x80) r.skip(12);  // coordinates on the atom (pre-3.0 layout)
    // _unpickleAtomData: each field present when its bit is set, else its default
    const int32_t pf = r.get<int32_t>();
    if (pf & 1) r.skip(4);  // mass offset (float)
    const auto small = [&](int bit, int absent) {
        return (pf & (1 << bit)) ? int(r.get<int8_t>()) : absent;
    };
    a.formal_charge = small(1, 0);
    a.chiral_tag = small(2, 0);
    a.hybridization = small(3, 4);
    a.explicit_hs = small(4, 0);
    small(5, 0);  // explicit and implicit valence: RDKit recomputes them
    small(6, 0);
    a.radicals = small(7, 0);
    BI_CHECK(a.chiral_tag >= 0 && a.hybridization >= 0 && a.explicit_hs >= 0 && a.radicals >= 0,
             r.where(), "RDKit molecule: negative chiral tag, hybridization or hydrogen count");
    if (pf & (1 << 8)) a.isotope = r.get<uint32_t>();
    if (flags & 0x08) {            // atom map number
        r.expect_tag(kAtomMapNumber, "ATOM_MAPNUMBER");
        const int8_t c = r.get<int8_t>();
        if (c < 0 && version > 9000) r.skip(4);
    }
    if (flags & 0x04) {
        r.expect_tag(kAtomDummyLabel, "ATOM_DUMMYLABEL");
        r.str();
    }
    if (flags & 0x02) {  // monomer (PDB residue) info
        r.expect_tag(kBeginAtomMonomer, "BEGIN_ATOM_MONOMER");
        r.str();
        const uint32_t type = r.get<uint32_t>();
        if (type == 0 || type == 2) {  // UNKNOWN, OTHER
            r.expect_tag(kEndAtomMonomer, "END_ATOM_MONOMER");
        } else {
            BI_CHECK(type == 1, r.where(), "RDKit molecule: unknown monomer type ", type);
            for (uint8_t t = r.tag(); t != kEndAtomMonomer; t = r.tag()) {
                switch (t) {
                    case kPdbSerialNumber:
                    case kPdbResidueNumber:
                    case kPdbSecondaryStructure:
                    case kPdbSegmentNumber:
                        r.skip(4);
                        break;
                    case kPdbAltLoc:
                    case kPdbResidueName:
                    case kPdbChainId:
                    case kPdbInsertionCode:
                        r.str();
                        break;
                    case kPdbOccupancy:
                    case kPdbTempFactor:
                        r.skip(8);
                        break;
                    case kPdbIsHeteroAtom:
                        r.skip(1);
                        break;
                    default:
                        fail(r.where(), cat("RDKit molecule: unknown tag ", int(t),
                                            " in an atom's residue info"));
                }
            }
        }
    }
}

RdkitBond read_bond(Reader& r, const Index& ix, int64_t num_atoms) {
    RdkitBond bond;
    const int64_t b = ix.read(r), e = ix.read(r);
    BI_CHECK(b >= 0 && b < num_atoms && e >= 0 && e < num_atoms, r.where(),
             "RDKit molecule: bond between atoms ", b, " and ", e, ", expected indices below ",
             num_atoms);
    const uint8_t flags = r.get<uint8_t>();
    BI_CHECK(!(flags & 0x10), r.where(),
             "RDKit molecule: bond holds a query; expected a plain molecule");
    bond.begin = int(b);
    bond.end = int(e);
    bond.aromatic = flags & 0x40;
    bond.conjugated = flags & 0x20;
    bond.type = (flags & 0x08) ? int(r.get<uint8_t>()) : 1;  // absent: SINGLE
    if (flags & 0x04) bond.dir = r.get<uint8_t>();
    if (flags & 0x02) {  // stereo and its atoms
        bond.stereo = r.get<uint8_t>();
        const int n = r.get<int8_t>();
        BI_CHECK(n >= 0, r.where(), "RDKit molecule: negative stereo-atom count");
        r.count(uint64_t(n), ix.size(), "stereo atom");
        for (int k = 0; k < n; ++k) {
            const int64_t s = ix.read(r);
            BI_CHECK(s >= 0 && s < num_atoms, r.where(), "RDKit molecule: stereo atom ", s,
                     " of a bond, expected an index below ", num_atoms);
            bond.stereo_atoms.push_back(int(s));
        }
    }
    if (flags & 0x01) {  // mol-file end points and attachment
        r.str();
        r.str();
    }
    return bond;
}

}  // namespace

std::string rdkit_chiral_tag_name(int tag) {
    static const char* names[] = {
        "CHI_UNSPECIFIED",  "CHI_TETRAHEDRAL_CW",      "CHI_TETRAHEDRAL_CCW",
        "CHI_OTHER",        "CHI_TETRAHEDRAL",         "CHI_ALLENE",
        "CHI_SQUAREPLANAR", "CHI_TRIGONALBIPYRAMIDAL", "CHI_OCTAHEDRAL"};
    return tag >= 0 && tag < int(std::size(names)) ? names[tag] : "";
}

RdkitMol decode_rdkit_mol(const std::string& bytes, const std::string& where) {
    Reader r(bytes, where);
    RdkitMol mol;
    BI_CHECK(bytes.size() >= 20 && r.get<uint32_t>() == 0xDEADBEEFu, where,
             "not an RDKit molecule: expected RDKit's binary pickle (0xDEADBEEF header)");
    BI_CHECK(r.get<int32_t>() == kVersion, where, "RDKit molecule: no version tag");
    const int32_t major = r.get<int32_t>(), minor = r.get<int32_t>(), patch = r.get<int32_t>();
    BI_CHECK(
        major >= 0 && major <= 1000 && minor >= 0 && minor <= 100 && patch >= 0 && patch <= 100,
        where, "RDKit molecule: unreasonable format version ", major, ".", minor, ".", patch);
    const int version = 1000 * major + 10 * minor + patch;
    mol.version = version;
    BI_CHECK(version >= kMinVersion, where, "RDKit molecule format ", major, ".", minor,
             " is older than this reader supports (13.0, RDKit 2021 onwards)");

    const int32_t num_atoms = r.get<int32_t>();
    const int32_t num_bonds = r.get<int32_t>();
    BI_CHECK(num_atoms >= 0 && num_bonds >= 0, where,
             "RDKit molecule: negative atom or bond count");
    r.count(uint64_t(num_atoms), 6, "atom");
    r.count(uint64_t(num_bonds), 3, "bond");
    const Index ix{num_atoms > 255};
    r.get<uint8_t>();  // flags (coordinates-on-atoms marker of old versions)

    r.expect_tag(kBeginAtom, "BEGINATOM");
    mol.atoms.resize(size_t(num_atoms));
    for (auto& a : mol.atoms) read_atom(r, version, a);
    r.expect_tag(kBeginBond, "BEGINBOND");
    mol.bonds.reserve(size_t(num_bonds));
    for (int32_t i = 0; i < num_bonds; ++i) mol.bonds.push_back(read_bond(r, ix, num_atoms));

    uint8_t t = r.tag();
    if (t == kBeginSssr || t == kBeginSymmSssr || t == kBeginFastFind || t == kBeginFindOther) {
        const uint64_t rings = version >= 13002 ? r.get<uint32_t>() : uint64_t(ix.read(r));
        r.count(rings, 1, "ring");
        for (uint64_t i = 0; i < rings; ++i) {
            const int64_t n = ix.read(r);
            BI_CHECK(n >= 0, where, "RDKit molecule: negative ring size");
            r.skip(uint64_t(n) * ix.size());
        }
        t = r.tag();
    }
    BI_CHECK(t != kBeginSgroup, where,
             "RDKit molecule holds substance groups, which this reader does not parse");
    if (t == kBeginStereoGroup) {
        const int64_t groups = ix.read(r);
        r.count(uint64_t(groups), 2, "stereo group");
        for (int64_t g = 0; g < groups; ++g) {
            const int64_t type = ix.read(r);
            if (version >= 14010 && type != 0) ix.read(r);  // group id (not for ABSOLUTE)
            r.skip(uint64_t(r.count(uint64_t(ix.read(r)), ix.size(), "stereo atom")) * ix.size());
            if (version > 16000)
                r.skip(uint64_t(r.count(uint64_t(ix.read(r)), ix.size(), "stereo bond")) *
                       ix.size());
        }
        t = r.tag();
    }
    if (t == kBeginConfs || t == kBeginConfsDouble) {
        const size_t coord = t == kBeginConfs ? 4 : 8;
        const int32_t block = r.get<int32_t>();
        const size_t start = r.pos();
        const int32_t n = r.get<int32_t>();
        BI_CHECK(n >= 0, where, "RDKit molecule: negative conformer count");
        r.count(uint64_t(n), 6, "conformer");
        for (int32_t i = 0; i < n; ++i) {
            RdkitConformer c;
            c.is_3d = r.get<int8_t>() != 0;
            c.id = r.get<int32_t>();
            const int64_t na = ix.read(r);
            BI_CHECK(na == num_atoms, where, "RDKit molecule: conformer ", c.id, " has ", na,
                     " positions, expected one per atom (", num_atoms, ")");
            r.count(uint64_t(na), 3 * coord, "conformer position");
            c.pos.resize(size_t(na));
            for (auto& p : c.pos)
                for (double& x : p) x = coord == 4 ? double(r.get<float>()) : r.get<double>();
            mol.conformers.push_back(std::move(c));
        }
        t = r.tag();
        if (t == kBeginConfProps) {  // conformer properties: not needed
            r.skip(uint64_t(
                r.count(uint64_t(uint32_t(r.get<int32_t>())), 1, "conformer-property byte")));
            t = r.tag();
        }
        BI_CHECK(block >= 0 && r.pos() - 1 - start == size_t(block), where,
                 "RDKit molecule: conformer block is ", r.pos() - 1 - start,
                 " bytes, its header says ", block, " (corrupt)");
    }
    while (t != kEndMol) {
        const uint8_t section = t;
        if (section == kBeginProps || section == kBeginBondProps) {
            r.skip(uint64_t(r.count(uint64_t(uint32_t(r.get<int32_t>())), 1, "property byte")));
        } else if (section == kBeginAtomProps) {
            const uint32_t block = uint32_t(r.get<int32_t>());
            const size_t start = r.pos();
            for (auto& a : mol.atoms) {
                read_props(r, version, &a.props);
                if (version >= 14000) {  // explicit flags byte, then one int16 per set flag
                    const uint8_t bits = r.get<uint8_t>();
                    for (int b = 0; b < 8; ++b)
                        if (bits & (1 << b)) r.skip(2);
                }
            }
            BI_CHECK(r.pos() - start == block, where, "RDKit molecule: atom properties span ",
                     r.pos() - start, " bytes, the header says ", block, " (corrupt)");
        } else {
            fail(where, cat("RDKit molecule: unexpected section tag ", int(section), " at byte ",
                            r.pos() - 1, " (corrupt, or a layout this reader does not parse)"));
        }
        r.expect_tag(kEndProps, "ENDPROPS");
        t = r.tag();
    }
    return mol;
}

}  // namespace bioinfer::io
