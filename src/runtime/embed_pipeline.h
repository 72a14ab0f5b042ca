// The embedding job behind `bioinfer embed` and `bioinfer bench embed`: collect and validate
// inputs, batch by length, run the model once per batch, write per-record outputs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/esm_alphabet.h"
#include "models/language_model.h"
#include "runtime/inputs.h"
#include "runtime/jobs.h"
#include "runtime/progress.h"

namespace bioinfer::runtime {

struct EmbedRecord {
    std::string id;
    std::string source;           // file (or "<argument>")
    std::vector<int32_t> tokens;  // residue tokens, no <cls>/<eos>, after truncation
    int64_t original_length = 0;
    std::string error;  // why it cannot run ("" when it can): reported as a failed target
};

// INPUT: a FASTA file, a folder of FASTA files (*.fa, *.fasta, *.faa, *.fas), or a bare sequence.
// Validates everything (alphabet `vocab`, empty and duplicate records) before returning: a bad
// record carries its error.
std::vector<EmbedRecord> collect_records(const std::string& input, int64_t truncate,
                                         esm::Vocab vocab = esm::Vocab::Esm2);

// One record's outputs by npz key (special tokens stripped), in the order they are written.
struct RecordArrays {
    std::vector<std::pair<std::string, Tensor>> arrays;
};

struct EmbedOptions : JobOptions {
    std::vector<int> repr_layers{-1};  // fair-esm style, negative counts from the end
    bool per_tok = false, mean = true, bos = false, contacts = false, logits = false;
    // pll: each record's pseudo-log-likelihood (variant_scoring.h: one masked pass per residue)
    bool pll = false;
    int64_t toks_per_batch = 4096;
    std::string format = "npz";      // npz | h5
    std::string precision = "fp32";  // GEMM compute dtype, for the manifest
    // With run_embed(write_outputs = false): each record's arrays, handed over instead of
    // written (the in-process API; called on the worker that computed them, record by record,
    // a duplicate's record with its own index).
    std::function<void(size_t record, RecordArrays arrays)> sink;
};

// How embed's progress reads: sequences, tokens, the log file.
ProgressOptions embed_progress_options(const EmbedOptions& o);

// Where a record's array sits in embeddings.h5: UniProt's layout /<id> when each record has one
// array, else /<array>/<id>.
std::string h5_dataset(const std::string& array, const std::string& stem, size_t n_arrays);

// Parses "mean,per_tok,bos,contacts,logits,pll" into opts (error on unknown words).
void parse_include(const std::string& list, EmbedOptions& opts);
// Resolves negative layer indices against num_layers (error when out of range).
std::vector<int> resolve_layers(const std::vector<int>& layers, int64_t num_layers);

struct EmbedStats {
    int64_t sequences = 0, tokens = 0;  // computed now; tokens include <cls>/<eos>, no padding
    double seconds = 0;                 // model forward + output writing
    std::vector<TargetResult> results;  // every record, in input order
};

// Runs the job; with write_outputs=false only the forward passes run (benchmarking). Records
// whose outputs exist (an npz with every requested array, or those datasets in embeddings.h5)
// are skipped unless override_existing; a failing record is reported and the others go on.
// Writes manifest.json (the records with outputs) and results.json (every record's status).
EmbedStats run_embed(lm::LanguageModel& model, const std::vector<EmbedRecord>& records,
                     const EmbedOptions& opts, bool write_outputs);

}  // namespace bioinfer::runtime
