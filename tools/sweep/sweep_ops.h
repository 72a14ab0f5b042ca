// The op sweep's model of an op: its shape sets, its variants at a shape and dtype, and a case
// that prepares inputs once, runs one variant per call and measures its agreement with an fp32
// (or fp64) reference. sweep_ops.cpp defines the ops; sweep.h runs, records and reports.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/agreement.h"

namespace bioinfer::tuning::sweep {

// A shape: named dimensions in a fixed order (they become JSON objects and table keys).
using Dims = std::vector<std::pair<std::string, int64_t>>;
int64_t dim(const Dims& d, const std::string& name);

struct Variant {
    std::string name;                       // e.g. "tiled", "onednn_packed", "ref"
    std::map<std::string, int64_t> params;  // e.g. q_block, k_block
    std::string table_op;                   // the tuned-table decision it stands for
    bool selectable = true;                 // false: a reference for scale, never in the table
};
std::string variant_key(const std::string& name, const std::map<std::string, int64_t>& params);

// One shape at one dtype with its inputs and reference ready.
class Case {
public:
    virtual ~Case() = default;
    // Untimed preparation of a variant (weight packing, fresh inputs); returns one call of it.
    // Runs with the variant forced in the tuned table (the references ignore it).
    virtual std::function<void()> prepare(const Variant& v) = 0;
    // Agreement of the output of the first call after prepare() with the reference.
    virtual Agreement check() = 0;
};

struct Shape {
    std::string set;  // the shape set it belongs to ("esm", "gr00t", "tiny")
    std::string label;
    Dims dims;
};

struct OpSweep {
    std::string name;  // the sub-sweep: matmul, attention, layer_norm, rotary, softmax, activation
    bool compute_bound;
    std::vector<Shape> (*shapes)(const std::string& set);
    std::vector<Variant> (*variants)(const Dims& d, const std::string& dtype);
    std::unique_ptr<Case> (*make)(const Dims& d, const std::string& dtype);
    double (*work)(const Dims& d);  // flops (compute-bound) or bytes moved (memory-bound)
    // The dimensions the kernels look the table up by, for one table op of this sweep.
    Dims (*table_shape)(const Dims& d, const std::string& table_op);
};

const std::vector<OpSweep>& op_sweeps();
// Sub-sweeps named by the issue that have no op in the engine yet, with the reason.
const std::vector<std::pair<std::string, std::string>>& pending_sweeps();
// What an empty tuned table runs for a table op: the kernels' default (backend/tuning/defaults.h).
Variant default_variant(const std::string& table_op);
const std::vector<std::string>& shape_sets();

}  // namespace bioinfer::tuning::sweep
