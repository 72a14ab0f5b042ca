// The targets linked into the replay test, by name (not in libFuzzer builds).
#pragma once
#include <map>
#include <string>

#include "fuzz_target.h"

namespace bioinfer::fuzz {
std::map<std::string, Body>& registry();
}
