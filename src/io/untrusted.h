// Checks for text read from files and answers bioinfer does not trust (checkpoints, shards, a
// hub's headers): the shapes a name or a number must have before it is used.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace bioinfer::io {

// A path from an untrusted file (a shard's results.json, a hub's listing) that stays inside the
// folder it is joined to: relative, '/'-separated, no empty, '.' or '..' component, no backslash
// or control character.
bool is_plain_relative_path(const std::string& p);

// `s` as a decimal count: true when it is 1 to `max_digits` ASCII digits (no sign, no spaces),
// with the value in `out`; false (and `out` untouched) otherwise. max_digits <= 18 keeps every
// accepted value inside int64_t.
bool parse_decimal(std::string_view s, size_t max_digits, int64_t& out);

}  // namespace bioinfer::io
