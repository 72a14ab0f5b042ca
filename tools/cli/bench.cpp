// bioinfer bench embed: warm timing of the embedding forward on an input set; bioinfer bench
// matmul: the GEMM provider's throughput at one shape; bioinfer bench peak: the machine's ceilings
// (register-level arithmetic peaks, the GEMM's peak, memory bandwidth). JSON on stdout, each with
// the CPU model and ISA flags.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "args.h"
#include "backend/tuning/tuned_table.h"
#include "bioinfer/error.h"
#include "core/threads.h"
#include "io/model_dir.h"
#include "models/language_model.h"
#include "models/structure_model.h"
#include "ops/ops.h"
#include "runtime/embed_pipeline.h"
#include "runtime/fold_pipeline.h"
#include "sweep.h"
#include "sweep/gemm_timing.h"
#include "sweep/machine.h"

namespace bioinfer::cli {

static const char* kBenchHelp =
    R"(usage: bioinfer bench embed INPUT (--weights DIR | --model NAME) [options]
       bioinfer bench fold INPUT (--weights DIR | --model esmfold) [--repeat N] [--num-recycles N]
                 [--sampling-steps N] [--chunk-size N] [--threads N]
       bioinfer bench matmul [--m M --k K --n N] [--precision P] [--weights-dtype fp32|bf16]
                 [--provider table|onednn|own] [--threads N] [--repeat N]
       bioinfer bench peak [--threads N] [--seconds S] [--repeat N] [--no-gemm]
       bioinfer bench sweep [options]   (see 'bioinfer bench sweep --help')

Loads the model once, runs one warm-up pass over INPUT (or over its first --warmup-records
records), then --repeat timed passes (forward only, outputs not written) and prints JSON: tokens/s
of the fastest pass and peak RSS.

  --repeat N           timed passes (default 3)
  --warmup-records N   warm up on the first N records only (default: all)
  --toks-per-batch N   tokens per batch, run packed (default 4096)
  --include LIST       as for embed (default mean)
  --threads N          worker threads (default: all cores)
  --precision P        fp32 (default) or bf16 (--fast); bench matmul also int8
  --compare-table T    also load the model under tuned table T (a file, or none: every kernel's
                       default) and alternate passes between the two; reports both and the
                       ratio (tokens/s with the table in use over T)

bench matmul times out (M, N) = x (M, K) . w (N, K)^T with w packed once, as the models run their
linear layers (default shape 2048 x 1280 x 5120, ESM-2 650M's FFN at 8x256 tokens), and prints
the best GFLOP/s over --repeat timings of 10 calls each. --weights-dtype bf16 stores w in bf16, as
a bf16 checkpoint is held (at fp32 precision it is widened inside the GEMM, never copied to fp32).
--precision int8 times the int8 linear: w quantized per output channel at load, x per row on
every call, oneDNN's u8 x s8 -> s32 GEMM, then the rescaling pass (GOP/s in "gflops").
--provider picks the fp32 GEMM: the tuned table's choice for the shape (table, the default),
oneDNN's, or the own panel-packed GEMM (own, fp32 only) with its default blocking.

bench peak measures the ceilings other results are fractions of: each instruction family's
register-level peak on this CPU (fp32 FMA on AVX2 and AVX-512, AVX512-BF16, AMX-BF16, int8 on
AVX2's vpmaddubsw/vpmaddwd, AVX-VNNI, AVX512-VNNI, AMX-INT8; families the CPU lacks are listed
as unsupported), a loop of independent accumulators on every thread for about --seconds
(default 0.05) per repetition, best of --repeat (default 5), each thread's accumulators checked
against what the loop adds; then the packed GEMM's peak (2048^3) as a fraction of the fp32 and
bf16 register peaks, and the memory bandwidth (skipped with --no-gemm).
)";

namespace {

double peak_rss_mb() {
    // VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss across fork and exec, so a
    // benchmark driver's own peak would leak into ours.
    double mb = 0;
    std::ifstream st("/proc/self/status");
    for (std::string line; std::getline(st, line);)
        if (line.rfind("VmHWM:", 0) == 0) mb = std::stod(line.substr(6)) / 1024.0;
    return mb;
}

// Resets VmHWM to the current RSS (Linux's clear_refs "5"), so the next peak_rss_mb() is the
// peak since now; false where the kernel does not allow it.
bool reset_peak_rss() {
    std::ofstream f("/proc/self/clear_refs");
    f << "5";
    f.flush();
    return bool(f);
}

// Peak RSS per stage of a fold, keyed by the model's progress stage names ("language model",
// "trunk", ...): each stage's high-water mark, reset as the next one starts.
struct StagePeaks {
    std::map<std::string, double> mb;
    std::string current;
    double overall = 0;  // the process's peak across every reset
    bool resets = true;
    void close() {
        const double now = peak_rss_mb();
        overall = std::max(overall, now);
        if (!current.empty()) mb[current] = std::max(mb[current], now);
        resets = reset_peak_rss() && resets;
    }
    void enter(const std::string& stage) {
        if (stage == current) return;
        close();
        current = stage;
    }
};

int bench_matmul(const Args& a) {
    const int64_t M = a.get_int_in("m", 2048, 1, 1 << 16), K = a.get_int_in("k", 1280, 1, 1 << 16),
                  N = a.get_int_in("n", 5120, 1, 1 << 16);
    const int repeat = int(a.get_int_in("repeat", 5, 1, kMaxRepeatOption));
    const std::string precision = apply_precision(a, /*allow_int8=*/true);
    const std::string stored = a.has("weights-dtype") ? a.get("weights-dtype") : "fp32";
    BI_CHECK(stored == "fp32" || stored == "bf16", "--weights-dtype",
             "expected fp32 or bf16, got '", stored, "'");
    const std::string provider = a.has("provider") ? a.get("provider") : "table";
    BI_CHECK(provider == "table" || provider == "onednn" || provider == "own", "--provider",
             "expected table, onednn or own, got '", provider, "'");
    BI_CHECK(provider != "own" || (precision == "fp32" && stored == "fp32"), "--provider",
             "the own GEMM runs fp32 weights in fp32 only, not ", stored, " weights in ",
             precision);
    std::optional<tuning::Force> forced;
    if (provider != "table")
        forced.emplace("matmul",
                       tuning::Choice{provider == "own" ? "own_packed" : "onednn_packed", {}});
    const double best = tuning::time_packed_linear(M, K, N, ops::matmul_precision(), repeat, 10,
                                                   stored == "bf16" ? DType::BF16 : DType::F32);
    BI_CHECK(best > 0, "--precision", "no ", precision, " GEMM on this CPU");
    // int8: giga-operations (a multiply-add counts 2), the activations' quantization included
    const double gflops = 2.0 * double(M) * double(K) * double(N) / best * 1e-9;
    nlohmann::json j = {{"impl", "bioinfer"},
                        {"op", "linear"},
                        {"kernels", ops::backend_name()},
                        {"threads", num_threads()},
                        {"precision", precision},
                        {"weights_dtype", stored},
                        {"provider", provider},
                        {"m", M},
                        {"k", K},
                        {"n", N},
                        {"seconds_per_call", best},
                        {"gflops", gflops},
                        {"repeat", repeat},
                        {"machine", tuning::machine_facts()}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
}

int bench_peak(const Args& a) {
    double seconds = 0.05;
    if (a.has("seconds")) {
        const std::string v = a.get("seconds");
        char* end = nullptr;
        seconds = std::strtod(v.c_str(), &end);
        BI_CHECK(!v.empty() && end && *end == 0 && seconds > 0 && seconds <= 10, "--seconds",
                 "expected a number of seconds in (0, 10], got '", v, "'");
    }
    const int repeat = int(a.get_int_in("repeat", 5, 1, kMaxRepeatOption));
    nlohmann::json j = {{"bench", "peak"}, {"machine", tuning::machine_facts()}};
    const nlohmann::json regs = tuning::register_peaks(num_threads(), seconds, repeat);
    j["register_peaks"] = regs;
    // the best register peak per operand type, for the fractions below
    nlohmann::json best = nlohmann::json::object();
    for (const auto& r : regs) {
        const std::string unit = r["dtype"] == "int8" ? "gops" : "gflops";
        if (!r.contains(unit)) continue;
        const std::string dt = r["dtype"];
        if (!best.contains(dt) || best[dt]["value"].get<double>() < r[unit].get<double>())
            best[dt] = {{"value", r[unit]}, {"kernel", r["name"]}};
    }
    j["best_register_peak"] = best;
    if (!a.has("no-gemm")) {
        nlohmann::json g = tuning::measure_gemm_and_memory_peaks();
        for (const auto& [dt, gf] : g["gemm_gflops"].items())
            if (best.contains(dt))
                g["gemm_fraction_of_register_peak"][dt] =
                    gf.get<double>() / best[dt]["value"].get<double>();
        j["gemm_and_memory"] = g;
    }
    std::printf("%s\n", j.dump().c_str());
    return 0;
}

// Folds each record of INPUT --repeat times after one warm-up fold of a short sequence; prints
// one JSON line per record: the fastest fold, its stage times, the process's peak RSS so far.
int bench_fold(const Args& a) {
    const int repeat = int(a.get_int_in("repeat", 1, 1, kMaxRepeatOption));
    const std::string precision = apply_precision(a);
    const std::string dir = weights_dir_from(a);
    const io::ModelDir model_dir = io::ModelDir::open(dir);
    const auto records = runtime::collect_fold_records(a.positional[1], *fold::load_spec(model_dir));
    for (const auto& r : records) BI_CHECK(r.error.empty(), "bench", r.error);
    const auto t_load = std::chrono::steady_clock::now();
    auto model = fold::load(model_dir);
    const double load_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
    fold::Options fo;
    fo.num_recycles = int(a.get_int_in("num-recycles", -1, 0, 64));
    fo.chunk = a.get_int_in("chunk-size", 0, 0, kMaxTokensOption);
    fo.sampling_steps = int(a.get_int_in("sampling-steps", -1, 1, 100000));  // ESMFold2
    io::FastaRecord warm;
    warm.id = "warm-up";
    warm.sequence = "MKTAYIAKQRQISFVK";
    StagePeaks peaks;
    peaks.current = "load";
    peaks.enter("warm-up");
    const double load_peak_mb = peaks.mb["load"];
    model->predict(model->spec().from_fasta(warm, "warm-up"), fo);
    peaks.enter("");
    for (const auto& rec : records) {
        double best = 1e300;
        bio::Prediction keep;
        std::map<std::string, double> profile, best_profile;
        peaks.mb.clear();
        for (int r = 0; r < repeat; ++r) {
            profile.clear();
            fo.trunk_profile = &profile;
            fo.progress = [&](const std::string& stage, int, int) { peaks.enter(stage); };
            const auto t0 = std::chrono::steady_clock::now();
            bio::Prediction out = model->predict(rec.input, fo);
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            peaks.enter("");
            if (s < best) {
                best = s;
                keep = std::move(out);
                best_profile = profile;
            }
        }
        nlohmann::json stages = nlohmann::json::object();
        for (const auto& [stage, sec] : keep.stage_seconds) stages[stage] = sec;
        nlohmann::json j = {{"impl", "bioinfer"},
                            {"kernels", ops::backend_name()},
                            {"threads", num_threads()},
                            {"precision", precision},
                            {"id", rec.id},
                            {"length", rec.input.tokens},
                            {"seconds", best},
                            {"stages_s", stages},
                            {"trunk_ops_s", best_profile},
                            {"load_s", load_s},
                            {"chunk", fo.chunk},
                            {"num_recycles", fo.num_recycles},
                            {"repeat", repeat},
                            {"peak_rss_mb", std::max(peaks.overall, peak_rss_mb())},
                            {"machine", tuning::machine_facts()}};
        // each stage's own peak (the model's progress names), where the kernel lets VmHWM reset
        if (peaks.resets) {
            j["stage_peak_rss_mb"] = peaks.mb;
            j["stage_peak_rss_mb"]["load"] = load_peak_mb;
        }
        std::printf("%s\n", j.dump().c_str());
        std::fflush(stdout);
    }
    return 0;
}

}  // namespace

int bench_main(int argc, char** argv) {
    if (argc > 0 && std::string(argv[0]) == "sweep") return sweep_main(argc - 1, argv + 1);
    Args a =
        parse_args(argc, argv,
                   {"weights", "model", "repeat", "toks-per-batch", "threads", "include",
                    "precision", "m", "k", "n", "warmup-records", "compare-table", "num-recycles",
                    "chunk-size", "sampling-steps", "weights-dtype", "provider", "seconds"},
                   {"help", "fast", "no-gemm"});
    if (a.has("help") || a.positional.empty()) {
        std::fputs(kBenchHelp, a.has("help") ? stdout : stderr);
        return a.has("help") ? 0 : 2;
    }
    if (a.positional[0] == "fold") {
        BI_CHECK(a.positional.size() == 2, "arguments", "expected 'bench fold INPUT'");
        set_num_threads(threads_from(a));
        return bench_fold(a);
    }
    if (a.positional[0] == "peak") {
        BI_CHECK(a.positional.size() == 1, "arguments", "'bench peak' takes no input");
        set_num_threads(threads_from(a));
        return bench_peak(a);
    }
    if (a.positional[0] == "matmul") {
        BI_CHECK(a.positional.size() == 1, "arguments", "'bench matmul' takes no input");
        set_num_threads(threads_from(a));
        return bench_matmul(a);
    }
    BI_CHECK(a.positional.size() == 2 && a.positional[0] == "embed", "arguments",
             "expected 'bench embed INPUT', 'bench fold INPUT', 'bench matmul' or 'bench peak'");
    set_num_threads(threads_from(a));
    runtime::EmbedOptions opts;
    opts.precision = apply_precision(a, /*allow_int8=*/true);
    opts.toks_per_batch = a.get_int_in("toks-per-batch", 4096, 1, kMaxTokensOption);
    if (a.has("include")) runtime::parse_include(a.get("include"), opts);
    const int repeat = int(a.get_int_in("repeat", 3, 1, kMaxRepeatOption));
    const io::ModelDir model_dir = io::ModelDir::open(weights_dir_from(a));
    auto records = runtime::collect_records(a.positional[1], 1022,
                                            lm::vocab_of(model_dir));
    for (const auto& r : records) BI_CHECK(r.error.empty(), "bench", r.error);
    tuning::load_active_table();
    auto model = lm::load(model_dir);
    // --compare-table: a second copy of the model whose kernels read another table (its weights
    // packed under that table's choices); passes alternate between the two, in ABBA order.
    std::unique_ptr<lm::LanguageModel> other;
    tuning::Table other_table;
    if (a.has("compare-table")) {
        other_table = tuning::load_table(a.get("compare-table"));
        tuning::set_table_override(&other_table);
        other = lm::load(model_dir);
        tuning::set_table_override(nullptr);
    }
    const auto pass = [&](bool compared, const std::vector<runtime::EmbedRecord>& recs) {
        tuning::set_table_override(compared ? &other_table : nullptr);
        auto s = runtime::run_embed(compared ? *other : *model, recs, opts, false);
        tuning::set_table_override(nullptr);
        return s;
    };
    const int64_t warm = a.get_int_in("warmup-records", 0, 0, int64_t(1) << 40);
    for (bool compared : {false, true}) {
        if (compared && !other) continue;
        if (warm > 0 && warm < int64_t(records.size()))
            pass(compared, {records.begin(), records.begin() + warm});
        else
            pass(compared, records);
    }
    double best = 1e300, best_other = 1e300;
    std::vector<double> secs, secs_other, paired;
    runtime::EmbedStats st;
    for (int r = 0; r < repeat; ++r) {
        double mine = 0, theirs = 0;
        for (bool compared : {r % 2 == 1, r % 2 == 0}) {
            if (compared && !other) continue;
            const auto s = pass(compared, records);
            (compared ? theirs : mine) = s.seconds;
            if (!compared) st = s;
        }
        secs.push_back(mine);
        best = std::min(best, mine);
        if (other) {
            secs_other.push_back(theirs);
            best_other = std::min(best_other, theirs);
            paired.push_back(theirs / mine);
        }
    }
    const double peak_mb = peak_rss_mb();
    nlohmann::json j = {{"impl", "bioinfer"},
                        {"kernels", ops::backend_name()},
                        {"threads", num_threads()},
                        {"precision", opts.precision},
                        {"sequences", st.sequences},
                        {"tokens", st.tokens},
                        {"seconds", best},
                        {"tokens_per_s", double(st.tokens) / best},
                        {"peak_rss_mb", peak_mb},
                        {"repeat", repeat},
                        {"tuned_table", tuning::active_table().origin},
                        {"pass_seconds", secs},
                        {"machine", tuning::machine_facts()}};
    if (other) {
        std::sort(paired.begin(), paired.end());
        const size_t n = paired.size();
        j["compare_table"] = other_table.origin;
        j["compare_tokens_per_s"] = double(st.tokens) / best_other;
        j["compare_pass_seconds"] = secs_other;
        // tokens/s of this table over the compared one: best pass against best pass, and the
        // median of the ratios of passes run back to back.
        j["ratio_best"] = best_other / best;
        j["ratio_median_paired"] = n % 2 ? paired[n / 2] : 0.5 * (paired[n / 2 - 1] + paired[n / 2]);
        j["peak_rss_mb_note"] = "both copies of the model are resident";
    }
    std::printf("%s\n", j.dump().c_str());
    return 0;
}

}  // namespace bioinfer::cli
