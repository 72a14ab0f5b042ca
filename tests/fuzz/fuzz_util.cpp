// The rules every fuzz target runs under (fuzz_target.h), and its temporary files.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <typeinfo>

#include "bioinfer/error.h"
#include "fuzz_registry.h"
#include "fuzz_target.h"

namespace fs = std::filesystem;

namespace bioinfer::fuzz {

namespace {

thread_local const char* running = "?";

[[noreturn]] void finding(const char* target, const std::string& what) {
    std::fprintf(stderr, "fuzz target %s: FINDING: %s\n", target, what.c_str());
    std::fflush(stderr);
    std::abort();
}

const fs::path& own_dir() {
    static const fs::path dir = [] {
        const char* tmp = std::getenv("TMPDIR");
        fs::path d =
            fs::path(tmp && *tmp ? tmp : "/tmp") / ("bioinfer-fuzz-" + std::to_string(getpid()));
        fs::create_directories(d);
        std::atexit([] {
            std::error_code ec;
            fs::remove_all(own_dir(), ec);
        });
        return d;
    }();
    return dir;
}

}  // namespace

void finding_here(const std::string& what) {
    finding(running, what);
}

void check_error_message(const char* what) {
    const std::string msg = what;
    if (msg.empty() || msg[0] != '[' || msg.find("] ") == std::string::npos)
        finding(running, "an error message not in the form \"[where] what\": " + shown_bytes(msg));
    if (shown_bytes(msg) != msg)
        finding(running,
                "an error message with raw control or non-UTF-8 bytes: " + shown_bytes(msg));
}

void run_one(const char* target, Body body, std::string_view data) {
    running = target;
    try {
        body(data);
    } catch (const Error& e) {
        check_error_message(e.what());
    } catch (const std::exception& e) {
        finding(target, std::string("an exception other than bioinfer::Error escaped (") +
                            typeid(e).name() + "): " + shown_bytes(e.what()));
    } catch (...) {
        finding(target, "a non-std exception escaped");
    }
}

std::string write_temp(std::string_view data, const std::string& suffix) {
    const fs::path p = own_dir() / ("input" + suffix);
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f.write(data.data(), std::streamsize(data.size()));
    f.close();
    if (!f) finding("write_temp", "cannot write " + p.string());
    return p.string();
}

std::string temp_dir(const std::string& name) {
    const fs::path p = own_dir() / name;
    std::error_code ec;
    fs::remove_all(p, ec);
    fs::create_directories(p);
    return p.string();
}

std::vector<std::string_view> split_parts(std::string_view data, std::string_view sep, size_t n) {
    std::vector<std::string_view> parts;
    while (parts.size() + 1 < n) {
        const size_t at = data.find(sep);
        if (at == std::string_view::npos) break;
        parts.push_back(data.substr(0, at));
        data.remove_prefix(at + sep.size());
    }
    parts.push_back(data);
    return parts;
}

#ifndef BIOINFER_LIBFUZZER
std::map<std::string, Body>& registry() {
    static std::map<std::string, Body> r;
    return r;
}

Registration::Registration(const char* name, Body body) {
    registry()[name] = body;
}
#endif

}  // namespace bioinfer::fuzz
