// libFuzzer target: Slurm host lists and tasks-per-node strings
// (trainer/slurm_env.cc, torch-free), as a job's environment hands them to
// the trainer. A list within the budgets expands to at most
// the budget's names, none empty, and its first name is FirstNode's;
// anything else is an error with a message, never a crash or a hang.
#include <string>

#include "fuzz_util.h"
#include "slurm_env.h"

using namespace imagepack::trainer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // A smaller budget than the trainer's 2^20 names: each input then costs
  // microseconds; the budget logic is the same (the 2^20 bound itself is
  // in tests/trainer/slurm_env_test.cc).
  constexpr size_t kBudget = 4096;
  auto all = ExpandNodeList(text, kBudget);
  auto first = FirstNode(text);
  if (all.ok()) {
    FUZZ_CHECK(!all->empty() && all->size() <= kBudget);
    for (const auto& name : *all) FUZZ_CHECK(!name.empty());
    FUZZ_CHECK(first.ok() && *first == all->front());
  } else {
    FUZZ_CHECK(!all.status().message().empty());
  }
  for (int node : {0, 1, 7}) {
    auto n = TasksOnNode(text, node);
    if (n.ok()) FUZZ_CHECK(*n >= 0);
    else FUZZ_CHECK(!n.status().message().empty());
  }
  return 0;
}
