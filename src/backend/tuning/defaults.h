// Each kernel's built-in choice per tuned-table op: the variant and parameters it runs where the
// table has no entry (and with BIOINFER_TUNED_TABLE=none). The kernels and the sweep read it here.
#pragma once
#include <initializer_list>
#include <string>
#include <vector>

#include "backend/tuning/tuned_table.h"

namespace bioinfer::tuning {

// The op's default variant and its parameters; an error for an op without one.
const Choice& default_choice(const std::string& op);
// Every op with a default: the ops the kernels look up.
std::vector<std::string> default_ops();

// A choice as the kernels run it. An empty choice is the op's default. A parameter the choice
// leaves out takes the variant's own default (the own GEMM's blocking), else the one of the
// op's default variant (a materialised attention still splits its queries in q_block rows).
Choice resolve(const std::string& op, Choice c);

// What a kernel runs for this call: lookup() (a forced choice, or the table's), resolved.
Choice choose(const char* kernels, const char* op, const char* dtype,
              std::initializer_list<Dim> shape);

// Sees every choice choose() returns (tests that check what the kernels ran); null: none. Set
// it outside parallel regions, and only while no other thread runs kernels.
using ChoiceObserver = void (*)(const char* op, const Choice& c);
void set_choice_observer(ChoiceObserver f);

}  // namespace bioinfer::tuning
