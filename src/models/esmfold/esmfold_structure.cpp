// ESMFold's StructureModel: reading chains, the memory estimate, and the fold's outputs as named
// atoms (linker dropped, residues numbered from 1 within each chain).
#include "models/esmfold/esmfold_structure.h"

#include <algorithm>
#include <cctype>

#include "bio/residues.h"
#include "bioinfer/error.h"
#include "models/esmfold/residue_constants.h"

namespace bioinfer::esmfold {

fold::Input EsmFoldSpec::from_fasta(const io::FastaRecord& rec, const std::string& where) const {
    fold::Input in = fold::protein_chains_from_fasta(rec, where);
    prepare(in);
    return in;
}

EncodedTarget encode_input(const fold::Input& in) {
    std::string joined;
    const std::vector<bio::Chain>& chains = in.target.chains;
    for (size_t k = 0; k < chains.size(); ++k) joined += (k ? ":" : "") + chains[k].sequence;
    return encode_sequence(joined, in.where);
}

void EsmFoldSpec::prepare(fold::Input& in) const {
    check_chains(in);
    for (const bio::Chain& c : in.target.chains)
        for (size_t i = 0; i < c.sequence.size(); ++i)
            BI_CHECK(c.sequence[i] >= 'A' && c.sequence[i] <= 'Z', in.where, "chain ", c.id,
                     ": character '", c.sequence[i], "' at position ", i + 1,
                     " is not an upper-case amino-acid letter");
    const EncodedTarget enc = encode_input(in);
    in.tokens = int64_t(enc.target.aatype.size());
    in.residues = 0;
    for (uint8_t l : enc.is_linker) in.residues += !l;
}

int64_t EsmFoldSpec::memory_bytes(const fold::Input& in) const {
    const EsmFoldConfig& c = cfg_;
    const int64_t L = in.tokens;
    const int64_t pair = L * L * 4;  // bytes per pair channel
    const int64_t chunk = int64_t(256) << 20;
    // trunk: z, the triangle multiplication's two operands, product and output gate, chunk
    // temporaries
    const int64_t trunk = pair * c.trunk.c_z * 5 + chunk;
    // structure module: z, the projected pair, its normalised copy and the IPA bias
    const int64_t sm = pair * (c.trunk.c_z + 2 * c.sm.c_z + c.sm.heads);
    // heads: z, distogram logits (and their symmetric copy), pTM probabilities, PAE
    const int64_t heads = pair * (c.trunk.c_z + 3 * 64 + 1);
    const int64_t stem = L * 4 * 4096 * 8;  // the ESM stem's hidden states and activations
    // The caching allocator keeps the trunk's blocks while the structure module allocates its
    // own, so the two add up (1024 residues: 4.7 GB estimated, 4.1 GB measured above the
    // weights, docs/performance.md).
    return std::max(trunk + sm, heads) + stem;
}

std::unique_ptr<EsmFoldStructureModel> EsmFoldStructureModel::load(const io::ModelDir& dir) {
    return std::make_unique<EsmFoldStructureModel>(EsmFoldModel::load(dir));
}

EsmFoldStructureModel::EsmFoldStructureModel(std::unique_ptr<EsmFoldModel> model)
    : model_(std::move(model)), spec_(model_->config()) {}

bio::Prediction EsmFoldStructureModel::predict(const fold::Input& in,
                                                const fold::Options& opts) const {
    BI_CHECK(opts.num_samples == 1, in.where, "esmfold predicts one structure per target, not ",
             opts.num_samples);
    const EncodedTarget enc = encode_input(in);
    FoldOptions fo;
    fo.num_recycles = opts.num_recycles;
    fo.chunk = opts.chunk;
    fo.tap = opts.tap;
    fo.trunk_profile = opts.trunk_profile;
    if (opts.progress)
        fo.progress = [&](const std::string& what, int step, int steps) {
            if (step < steps)
                opts.progress(what + " pass", step, steps);
            else
                opts.progress("structure module and heads", 0, 0);
        };
    if (opts.progress) opts.progress("language model", 0, 0);
    const FoldOutput out = model_->fold(enc.target, fo);

    bio::Prediction p;
    p.num_recycles = opts.num_recycles < 0 ? spec_.default_num_recycles() : opts.num_recycles;
    p.stage_seconds = {{"language_model", out.seconds_stem},
                       {"trunk", out.seconds_trunk},
                       {"structure_module", out.seconds_structure},
                       {"heads", out.seconds_heads}};
    // Residues kept (linkers dropped), numbered from 1 within each chain; per residue the atom37
    // slots its type has, in atom37 order.
    const std::vector<int32_t>& aatype = enc.target.aatype;
    const int64_t L = int64_t(aatype.size());
    // host-side: the fold's outputs read once per target to lay out the writers' atoms and drop
    // the linker (L x 37 slots, the L x L PAE once), copied to the host first.
    const Tensor h_exists = out.atom37_exists.to(kHost), h_atom37 = out.atom37.to(kHost),
                 h_plddt = out.plddt.to(kHost), h_pae = out.pae.to(kHost);
    const float *exists = h_exists.f32(), *atom37 = h_atom37.f32(), *lddt = h_plddt.f32(),
                *pae = h_pae.f32();
    std::vector<int64_t> keep;
    std::vector<float> xyz, plddt, token_plddt;
    for (int64_t i = 0; i < L; ++i) {
        if (enc.is_linker[size_t(i)]) continue;
        const int32_t ch = enc.chain[size_t(i)];
        if (p.chains.empty() || ch != int32_t(p.chains.size()) - 1) {
            p.chains.push_back({in.target.chains[size_t(ch)].id, bio::MoleculeType::Protein,
                                int64_t(p.tokens.size()), 0});
        }
        bio::PredictedChain& chain = p.chains.back();
        const int r = aatype[size_t(i)];
        bio::Token t;
        t.chain = ch;
        t.residue = int32_t(++chain.tokens);
        t.name = bio::kAminoAcidNames[r];
        t.letter = bio::kAminoAcidLetters[r] ? bio::kAminoAcidLetters[r] : 'X';
        t.first_atom = int64_t(p.atoms.size());
        for (int a = 0; a < rc::kNumAtom37; ++a) {
            if (exists[i * 37 + a] == 0.0f) continue;
            if (a == 1) t.rep_atom = int64_t(p.atoms.size());  // CA
            p.atoms.push_back({int64_t(p.tokens.size()), rc::kAtomTypes[a],
                               std::string(1, rc::kAtomTypes[a][0])});
            xyz.insert(xyz.end(), atom37 + (i * 37 + a) * 3, atom37 + (i * 37 + a) * 3 + 3);
            plddt.push_back(lddt[i * 37 + a]);
        }
        t.atoms = int64_t(p.atoms.size()) - t.first_atom;
        token_plddt.push_back(lddt[i * 37 + 1]);  // X has no atoms, but a CA score
        p.tokens.push_back(std::move(t));
        keep.push_back(i);
    }
    const int64_t n = int64_t(keep.size()), na = int64_t(p.atoms.size());
    std::vector<float> kept_pae(static_cast<size_t>(n * n));
    for (int64_t a = 0; a < n; ++a)
        for (int64_t b = 0; b < n; ++b)
            kept_pae[size_t(a * n + b)] = pae[keep[size_t(a)] * L + keep[size_t(b)]];
    bio::Sample s;
    s.coords = Tensor::of(xyz, {na, 3});
    s.plddt = Tensor::of(plddt, {na});
    s.token_plddt = Tensor::of(token_plddt, {n});
    s.pae = Tensor::of(kept_pae, {n, n});
    s.scores["ptm"] = out.ptm;
    p.samples.push_back(std::move(s));
    return p;
}

}  // namespace bioinfer::esmfold
