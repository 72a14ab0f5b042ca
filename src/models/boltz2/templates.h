// Boltz-2's structural templates (boltz 2.2.1): the template file's protein chains read as boltz's
// mmCIF parser reads them (parse_mmcif's polymer path; PDB files through its renamed-subchain
// round trip), the query-to-template chain records (schema.py: global alignment scores, an optimal
// one-to-one assignment, ungapped local alignments), and the template_* features
// (featurizerv2.py process_template_features) that replace the dummy set.
#pragma once
#include <array>
#include <map>
#include <string>
#include <vector>

#include "bio/target.h"
#include "models/boltz2/conformers.h"
#include "models/boltz2/features.h"

namespace bioinfer::boltz2 {

// ---- alignment (Biopython's PairwiseAligner with scoring="blastp") ----------------------------

// The global alignment score: BLOSUM62 (Biopython's 27-letter table), gap open -12 and extend -1,
// end gaps scored as internal ones. Letters outside A-Z and * are refused naming `where`.
double blastp_global_score(const std::string& query, const std::string& target,
                           const std::string& where);

struct LocalAlignment {
    int query_st = 0, query_en = 0, template_st = 0, template_en = 0;  // [st, en)
};
// Every co-optimal local alignment with gaps forbidden (the reference's gap scores of -1000), in
// the order Biopython yields them: by end position, query-major; an alignment whose traceback
// passes through another cell of the best score is not reported. None when no pair scores > 0.
std::vector<LocalAlignment> ungapped_local_alignments(const std::string& query,
                                                      const std::string& target,
                                                      const std::string& where);

// scipy.optimize.linear_sum_assignment(score, maximize=True): (row, column) pairs sorted by row,
// min(rows, columns) of them, ties broken as scipy's shortest augmenting path breaks them.
std::vector<std::array<int, 2>> max_assignment(const std::vector<std::vector<double>>& score);

// ---- the template structure ---------------------------------------------------------------

// One template token: a residue of a protein chain, with what the tokenizer computes for it.
struct TemplateResidue {
    int res_idx = 0;   // index in the chain's full sequence (entity_poly_seq)
    int res_type = 0;  // boltz token id (a modified residue: UNK; MSE: MET)
    std::array<float, 9> frame_rot{1, 0, 0, 0, 1, 0, 0, 0, 1};  // row-major [e1 e2 e3] columns
    std::array<float, 3> frame_t{};
    bool frame_mask = false;                 // N, CA and C present (standard residues)
    std::array<float, 3> center{}, disto{};  // CA and CB (CA for GLY; atom 0 when modified)
    bool disto_mask = false;
};
struct TemplateChain {
    std::string name;      // label_asym_id (PDB input: auth chain + subchain count, "A1")
    std::string sequence;  // one-letter full sequence, X for non-standard residues
    std::vector<TemplateResidue> residues;
};
struct TemplateStructure {
    std::string path;
    std::vector<TemplateChain> chains;  // protein (L-peptide) chains in file order
    const TemplateChain* chain(const std::string& name) const;  // null when absent
};

// Reads a template file as boltz's parse_mmcif (use_assembly false): waters, hydrogens and
// alternative conformations removed, each protein subchain aligned to its entity's full sequence
// (gemmi's align_sequence_to_polymer), MSE read as MET. A non-standard residue takes its CCD
// molecule from `canonical` or <mols_dir>/<CODE>.pkl (its first heavy atom, leaving atoms absent
// from the file dropped, is the token's centre). Errors name the file.
TemplateStructure read_template_structure(const std::string& path, bool pdb,
                                          const ConformerLibrary& canonical,
                                          const std::string& mols_dir);

// The structure of a `templates:` entry; a missing file is an error naming the entry.
TemplateStructure read_template(const bio::Template& entry, const ConformerLibrary& canonical,
                                const std::string& mols_dir);

// ---- records and features -------------------------------------------------------------------

// schema.py's TemplateInfo: query chain residues [query_st, query_en) aligned to template chain
// residues [template_st, template_en).
struct TemplateRecord {
    std::string name, query_chain, template_chain;
    int query_st = 0, query_en = 0, template_st = 0, template_en = 0;
    bool force = false;
    double threshold = 0.0;
};

// The records of one `templates:` entry against its structure: with both chain lists given, each
// query chain with its template chain; else the optimal assignment of query chains (chain_ids, or
// every protein chain of the target in input order) to template chains (template_ids, or every
// protein chain of the file in file order) by global alignment score; then every co-optimal
// ungapped local alignment of each pair. A template chain that is not a protein chain of the file
// is an error naming the entry. (boltz lists omitted chains from Python sets, whose order only
// matters when two assignments score alike.)
std::vector<TemplateRecord> template_records(const bio::Template& entry,
                                             const bio::Target& target,
                                             const TemplateStructure& structure);

// The query's tokens as the template features need them: per token its chain name and residue
// index within the chain; `chains` the target's chain names in asym_id order.
struct TemplateQuery {
    std::vector<std::string> token_chain;
    std::vector<int> token_res_idx;
    std::vector<std::string> chains;
};

// process_template_features: one row per distinct template name (first appearance order); each
// record maps template residue r to the query residue r - (template_st - query_st) of its chain
// (every residue of the template chain that lands in the query chain, not only the aligned
// window; a later record overwrites an earlier one), and sets template_restype (T, N, 33),
// template_frame_rot (T, N, 3, 3), template_frame_t, template_cb, template_ca (T, N, 3),
// template_mask_cb, template_mask_frame, template_mask, query_to_template (0), visibility_ids
// (T, N): the row's index on its templated chains, -1 - asym_id elsewhere), template_force and
// template_force_threshold (T) (the row's last record's).
// `structures` by template name (boltz keeps one structure per name: the last file read).
void set_template_features(const std::vector<TemplateRecord>& records,
                           const std::map<std::string, const TemplateStructure*>& structures,
                           const TemplateQuery& query, Features& f);

}  // namespace bioinfer::boltz2
