// Boltz-2's model inputs: the feature tensors boltz's data pipeline hands the model, keyed by the
// reference's own feature names ("res_type", "ref_pos", "atom_to_token", "msa", ...), fp32, with
// the batch dimension dropped (res_type (N, 33), ref_pos (A, 3), msa (S, N), atom_to_token (A, N)).
// Integer and boolean features are stored as exact fp32 values. The featurizer fills it from the
// inputs; parity tests fill it from a fixture's `feat.*` tensors.
#pragma once
#include <map>
#include <string>

#include "bioinfer/error.h"
#include "bioinfer/tensor.h"

namespace bioinfer::boltz2 {

struct Features {
    std::map<std::string, Tensor> t;

    bool has(const std::string& name) const { return t.count(name) > 0; }
    const Tensor& at(const std::string& name) const {
        auto it = t.find(name);
        BI_CHECK(it != t.end(), "boltz2 features", "no feature '", name, "'");
        return it->second;
    }
    void set(const std::string& name, Tensor v) { t[name] = std::move(v); }
    int64_t num_tokens() const { return at("res_type").shape()[0]; }
    int64_t num_atoms() const { return at("ref_pos").shape()[0]; }  // padded to a multiple of 32
    int64_t num_msa_rows() const { return at("msa").shape()[0]; }
};

}  // namespace bioinfer::boltz2
