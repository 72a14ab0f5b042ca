// What a download reads from a hub or mirror: a HEAD answer's header lines, the model API's
// listing and a shard index; parts separated by a line "--8<--".
#include "fuzz_target.h"
#include "runtime/http.h"
#include "runtime/hub.h"

using namespace bioinfer;

BIOINFER_FUZZ_TARGET(hub) {
    const auto parts = split_parts(data, "\n--8<--\n", 3);
    runtime::HttpResponse head;
    std::string_view lines = parts[0];
    while (!lines.empty()) {  // libcurl hands the header callback one line at a time
        const size_t nl = lines.find('\n');
        runtime::add_header_line(
            head, lines.substr(0, nl == std::string_view::npos ? lines.size() : nl + 1));
        lines.remove_prefix(nl == std::string_view::npos ? lines.size() : nl + 1);
    }
    attempt([&] { runtime::parse_file_head(head, "https://hub/resolve/main/file"); });
    if (parts.size() > 1)
        attempt(
            [&] { runtime::parse_listing(std::string(parts[1]), "https://hub/api/models/x/y"); });
    if (parts.size() > 2)
        attempt(
            [&] { runtime::index_shards(std::string(parts[2]), "model.safetensors.index.json"); });
}
