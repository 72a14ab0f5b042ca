// A client for the ColabFold MMseqs2 MSA server, as boltz (boltz/data/msa/mmseqs2.py, from
// ColabFold) and ColabFold use it:
//   POST <url>/ticket/msa  or  <url>/ticket/pair   form q=">101\nSEQ\n>102\n...", mode=M
//        -> {"id": ..., "status": "PENDING"|"RUNNING"|"COMPLETE"|"ERROR"|"RATELIMIT"|
//            "UNKNOWN"|"MAINTENANCE"}
//   GET  <url>/ticket/<id>                 the same answer, polled until COMPLETE or ERROR
//   GET  <url>/result/download/<id>        out.tar.gz: uniref.a3m and
//        bfd.mgnify30.metaeuk30.smag30.a3m (mode env), or pair.a3m (pairing), each holding one
//        block per query, headed ">101", ">102", ..., blocks separated by a NUL byte.
// Unpaired MSAs use mode "env"; paired ones "pairgreedy-env" or "paircomplete-env". Answers are
// cached by sequence (and for pairing by the ordered set of sequences), so that a rerun and a
// screening run of one protein query once.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/boltz_inputs.h"

namespace bioinfer::fold {
class ModelSpec;
}

namespace bioinfer::runtime {

struct FoldRecord;

struct MsaServerOptions {
    std::string url = "https://api.colabfold.com";  // boltz's --msa_server_url default
    std::string pairing = "greedy";                 // --msa_pairing_strategy: greedy | complete
    // Authentication, at most one kind: HTTP basic (boltz's --msa_server_username/_password,
    // $BOLTZ_MSA_USERNAME/$BOLTZ_MSA_PASSWORD) or an API key header (--api_key_header, default
    // X-API-Key, with --api_key_value or $MSA_API_KEY_VALUE).
    std::string username, password;
    std::string api_key_header = "X-API-Key", api_key_value;
    std::string cache_dir;  // answers by sequence; empty: no cache
    bool offline = false;   // no request at all: only cached answers
    // Timing. Each request may take request_timeout_s; a request that fails to arrive (no
    // connection, a timeout, an interrupted transfer, a 5xx answer) is retried `retries` times
    // retry_wait_s apart. A job is polled every poll_s to 2 poll_s seconds (boltz: 5 to 10), and
    // RATELIMIT / UNKNOWN answers to a submission are retried as often; a job not done within
    // max_wait_s is given up.
    double request_timeout_s = 60;
    int retries = 5;
    double retry_wait_s = 5;
    double poll_s = 5;
    double max_wait_s = 4 * 3600;
    int64_t max_download_bytes = int64_t(4) << 30;  // out.tar.gz, decompressed
    std::function<void(const std::string&)> log;    // one line per state change
    // Checked before every wait and request: a cancelled run stops with an error, leaving
    // nothing behind.
    std::function<bool()> cancelled;
};

// What server_msa_csvs returns: per query sequence, boltz's MSA CSV (compute_msa): "key,sequence"
// then the paired rows (key: the row's index in the paired MSA; rows all gaps dropped; at most
// 8192), then the unpaired rows (key -1; the query dropped when paired rows lead), at most
// 16384 rows in all; no trailing newline.
// `sequences`: one target's protein entities that need an MSA, in entity order (unique).
// Paired MSAs are asked for when there are two or more. Errors are one line naming the server.
std::vector<std::string> server_msa_csvs(const std::vector<std::string>& sequences,
                                         const MsaServerOptions& opts);

// The blocks of a ColabFold a3m file by query number (">101" ...): the text of each block, its
// lines in order. NUL bytes separate blocks; a file may hold them in any order. Errors name
// `where`.
std::vector<std::pair<int, std::string>> split_colabfold_a3m(const std::string& text,
                                                             const std::string& where);

// boltz's process_input with --use_msa_server: for one target, the server's CSV per protein entity
// written to <msa_dir>/<target>_<entity>.csv (boltz's names, each file through a temporary name)
// and the paths returned; for Boltz-2's reader (io::load_boltz_msas).
io::MsaFetch boltz_msa_fetch(const MsaServerOptions& opts, const std::string& msa_dir);

// The same for models reading FASTA records (ESMFold2): each record's protein chains that have no
// MSA yet get the server's, written as <msa_dir>/<id>_<chain>.a3m with the pairing keys in the
// headers (key=N, as predict's --msa-dir takes them) and read by the model's rules. A record whose
// MSAs cannot be had fails alone (its error set); the others go on.
void attach_server_msas(std::vector<FoldRecord>& records, const MsaServerOptions& opts,
                        const std::string& msa_dir, const fold::ModelSpec& spec);

// Where answers are cached by default: $XDG_CACHE_HOME/bioinfer/msa, else ~/.cache/bioinfer/msa.
std::string default_msa_cache_dir();

// Options from boltz's environment variables where the command line gave none.
void msa_server_options_from_env(MsaServerOptions& o);

}  // namespace bioinfer::runtime
