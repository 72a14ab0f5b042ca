// The toy helix model (toy_fold.h): a spec, a model, and its registry row. Nothing here is known
// to the CLI, the pipelines or the registry's built-in rows.
#include "toy_fold.h"

#include <cmath>

#include "bioinfer/error.h"

namespace bioinfer::toy {
namespace {

constexpr const char* kArch = "toy_helix";

class ToySpec : public fold::ModelSpec {
public:
    explicit ToySpec(double plddt) : plddt_(plddt) {}
    double plddt() const { return plddt_; }
    std::string architecture() const override { return kArch; }
    std::vector<bio::MoleculeType> molecule_types() const override {
        return {bio::MoleculeType::Protein};
    }
    bool takes_msa() const override { return false; }
    int default_num_recycles() const override { return 0; }
    fold::Input from_fasta(const io::FastaRecord& rec, const std::string& where) const override {
        fold::Input in = fold::protein_chains_from_fasta(rec, where);
        prepare(in);
        return in;
    }
    void prepare(fold::Input& in) const override {
        check_chains(in);
        in.tokens = in.residues = 0;
        for (const bio::Chain& c : in.target.chains) in.tokens += int64_t(c.sequence.size());
        in.residues = in.tokens;
    }
    int64_t memory_bytes(const fold::Input& in) const override { return in.tokens * 64; }

private:
    double plddt_;
};

class ToyModel : public fold::StructureModel {
public:
    ToyModel(const io::ModelDir& dir, double plddt) : spec_(plddt) {
        Tensor g = dir.get_f32("helix.geometry", {3});
        radius_ = g.f32()[0], rise_ = g.f32()[1], twist_ = g.f32()[2] * M_PI / 180;
    }
    const fold::ModelSpec& spec() const override { return spec_; }
    bio::Prediction predict(const fold::Input& in, const fold::Options& opts) const override {
        BI_CHECK(opts.num_samples == 1, in.where, "toy_helix predicts one structure");
        bio::Prediction p;
        for (const bio::Chain& e : in.target.chains) {
            const int32_t chain = int32_t(p.chains.size());
            p.chains.push_back({e.id, bio::MoleculeType::Protein, int64_t(p.tokens.size()),
                                int64_t(e.sequence.size()), chain});
            for (size_t r = 0; r < e.sequence.size(); ++r) {
                const int64_t atom = int64_t(p.atoms.size());
                p.tokens.push_back({chain, int32_t(r + 1), "ALA", e.sequence[r], atom, 1, atom});
                p.atoms.push_back({int64_t(p.tokens.size()) - 1, "CA", "C"});
            }
        }
        const int64_t n = int64_t(p.atoms.size());
        bio::Sample s;
        s.coords = Tensor::empty({n, 3});
        s.plddt = Tensor::empty({n});
        s.token_plddt = Tensor::empty({n});
        for (int64_t i = 0; i < n; ++i) {
            const int64_t r = p.tokens[size_t(i)].residue - 1;
            const double off = 20.0 * p.tokens[size_t(i)].chain;  // chains side by side
            s.coords.f32()[3 * i] = float(radius_ * std::cos(twist_ * double(r)) + off);
            s.coords.f32()[3 * i + 1] = float(radius_ * std::sin(twist_ * double(r)));
            s.coords.f32()[3 * i + 2] = float(rise_ * double(r));
            s.plddt.f32()[i] = s.token_plddt.f32()[i] = float(spec_.plddt());
        }
        s.scores["ptm"] = spec_.plddt();
        p.samples.push_back(std::move(s));
        return p;
    }

private:
    ToySpec spec_;
    double radius_ = 0, rise_ = 0, twist_ = 0;
};

bool is_toy(const io::ModelDir& dir) {
    return dir.has_config() && dir.config().value("model_type", "") == kArch;
}

double plddt_of(const io::ModelDir& dir) {
    return io::config_get<double>(dir.config(), "plddt", dir.dir() + "/config.json");
}

}  // namespace

models::StructureModelRow toy_helix_row() {
    return {kArch, "Toy helix", "model_type toy_helix", is_toy,
            [](const io::ModelDir& dir) -> std::unique_ptr<fold::ModelSpec> {
                return std::make_unique<ToySpec>(plddt_of(dir));
            },
            [](const io::ModelDir& dir) -> std::unique_ptr<fold::StructureModel> {
                return std::make_unique<ToyModel>(dir, plddt_of(dir));
            }};
}

}  // namespace bioinfer::toy
