#include "slurm_env.h"

#include <charconv>
#include <cstdint>
#include <variant>

namespace imagepack::trainer {
namespace {

struct Range {
  uint64_t lo = 0, hi = 0;
  size_t width = 0;  // digits of lo as written: the zero padding of every number
};
// A host expression is a sequence of literal text and bracketed range sets;
// its names are the Cartesian product, the last bracket varying fastest.
using Part = std::variant<std::string, std::vector<Range>>;
using HostExpr = std::vector<Part>;

Status ListError(std::string_view list, size_t at, const std::string& what) {
  return Status::InvalidArgument("host list \"" + std::string(list.substr(0, 200)) +
                                 (list.size() > 200 ? "..." : "") + "\", byte " + std::to_string(at) + ": " + what);
}

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
         c == '.';
}

// Parses a number of at most 18 digits at list[*at], leaving *at past it.
Result<std::pair<uint64_t, size_t>> Number(std::string_view list, size_t* at) {
  const size_t begin = *at;
  while (*at < list.size() && list[*at] >= '0' && list[*at] <= '9') ++*at;
  const size_t digits = *at - begin;
  if (digits == 0) return ListError(list, begin, "expected a number");
  if (digits > 18) return ListError(list, begin, "number of more than 18 digits");
  uint64_t v = 0;
  std::from_chars(list.data() + begin, list.data() + *at, v);  // cannot fail: 1-18 digits
  return std::make_pair(v, digits);
}

// "1,3-5" up to the closing bracket; *at is just past '['.
Result<std::vector<Range>> RangeSet(std::string_view list, size_t* at) {
  std::vector<Range> set;
  for (;;) {
    auto lo = Number(list, at);
    if (!lo.ok()) return lo.status();
    Range r{lo->first, lo->first, lo->second};
    if (*at < list.size() && list[*at] == '-') {
      ++*at;
      const size_t hi_at = *at;
      auto hi = Number(list, at);
      if (!hi.ok()) return hi.status();
      if (hi->first < r.lo) return ListError(list, hi_at, "range ends before it starts");
      r.hi = hi->first;
    }
    set.push_back(r);
    if (*at >= list.size()) return ListError(list, *at, "'[' without ']'");
    if (list[*at] == ']') {
      ++*at;
      return set;
    }
    if (list[*at] != ',') return ListError(list, *at, "expected ',', '-' or ']' in a range");
    ++*at;
  }
}

Result<std::vector<HostExpr>> Parse(std::string_view list) {
  if (list.empty()) return Status::InvalidArgument("empty host list");
  if (list.size() > kMaxNodeListBytes)
    return ListError(list, kMaxNodeListBytes, "longer than " + std::to_string(kMaxNodeListBytes) + " bytes");
  std::vector<HostExpr> exprs(1);
  size_t at = 0;
  while (at < list.size()) {
    const char c = list[at];
    HostExpr& e = exprs.back();
    if (c == ',') {
      if (e.empty()) return ListError(list, at, "empty host name");
      exprs.emplace_back();
      ++at;
    } else if (c == '[') {
      ++at;
      auto set = RangeSet(list, &at);
      if (!set.ok()) return set.status();
      e.emplace_back(std::move(*set));
    } else if (IsNameChar(c)) {
      if (e.empty() || !std::holds_alternative<std::string>(e.back())) e.emplace_back(std::string());
      std::get<std::string>(e.back()).push_back(c);
      ++at;
    } else {
      return ListError(list, at, std::string("unexpected character '") + c + "'");
    }
  }
  if (exprs.back().empty()) return ListError(list, at, "empty host name");
  return exprs;
}

uint64_t CountNames(const HostExpr& e, uint64_t max) {  // saturates just past `max`
  uint64_t n = 1;
  for (const Part& p : e) {
    if (!std::holds_alternative<std::vector<Range>>(p)) continue;
    uint64_t in_set = 0;
    for (const Range& r : std::get<std::vector<Range>>(p)) {
      in_set += r.hi - r.lo + 1;
      if (in_set > max) return max + 1;
    }
    n *= in_set;
    if (n > max) return max + 1;
  }
  return n;
}

std::string Padded(uint64_t v, size_t width) {
  std::string s = std::to_string(v);
  if (s.size() < width) s.insert(0, width - s.size(), '0');
  return s;
}

// Appends e's names to *out, at most `limit` of them.
void Expand(const HostExpr& e, size_t limit, std::vector<std::string>* out) {
  // An odometer over the bracketed parts: which range and which number.
  struct Digit {
    const std::vector<Range>* set;
    size_t range;
    uint64_t value;
  };
  std::vector<Digit> digits;
  for (const Part& p : e)
    if (auto* set = std::get_if<std::vector<Range>>(&p)) digits.push_back({set, 0, set->front().lo});
  for (;;) {
    if (out->size() >= limit) return;
    std::string name;
    size_t d = 0;
    for (const Part& p : e) {
      if (auto* s = std::get_if<std::string>(&p)) {
        name += *s;
      } else {
        const Digit& g = digits[d++];
        name += Padded(g.value, (*g.set)[g.range].width);
      }
    }
    out->push_back(std::move(name));
    size_t k = digits.size();
    for (; k-- > 0;) {  // advance the last bracket; carry leftwards
      Digit& g = digits[k];
      if (g.value < (*g.set)[g.range].hi) {
        ++g.value;
        break;
      }
      if (g.range + 1 < g.set->size()) {
        g.value = (*g.set)[++g.range].lo;
        break;
      }
      g.range = 0;
      g.value = g.set->front().lo;
    }
    if (k == static_cast<size_t>(-1)) return;  // every bracket wrapped: done
  }
}

Result<long long> IntVar(const EnvLookup& env, const char* name, long long lo, long long hi) {
  const char* v = env(name);
  if (!v) return Status::NotFound(std::string(name) + " is not set");
  const std::string_view s(v);
  long long x = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty())
    return Status::InvalidArgument(std::string(name) + "='" + v + "' is not an integer");
  if (x < lo || x > hi)
    return Status::InvalidArgument(std::string(name) + "=" + v + " is not in [" + std::to_string(lo) + ", " +
                                   std::to_string(hi) + "]");
  return x;
}

const char* NonEmpty(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  return (v && *v) ? v : nullptr;
}

}  // namespace

Result<std::vector<std::string>> ExpandNodeList(std::string_view list, size_t max_hosts) {
  auto exprs = Parse(list);
  if (!exprs.ok()) return exprs.status();
  uint64_t total = 0;
  for (const HostExpr& e : *exprs) {
    total += CountNames(e, max_hosts);
    if (total > max_hosts)
      return Status::InvalidArgument("host list \"" + std::string(list.substr(0, 200)) + "\" names more than " +
                                     std::to_string(max_hosts) + " hosts");
  }
  std::vector<std::string> names;
  names.reserve(total);
  for (const HostExpr& e : *exprs) Expand(e, names.size() + CountNames(e, max_hosts), &names);
  return names;
}

Result<std::string> FirstNode(std::string_view list) {
  auto exprs = Parse(list);
  if (!exprs.ok()) return exprs.status();
  std::vector<std::string> first;
  Expand(exprs->front(), 1, &first);
  return first.front();
}

Result<int> TasksOnNode(std::string_view s, int node) {
  auto error = [&](size_t at, const std::string& what) {
    return Status::InvalidArgument("tasks per node \"" + std::string(s.substr(0, 200)) + "\", byte " +
                                   std::to_string(at) + ": " + what);
  };
  if (node < 0) return Status::InvalidArgument("node index " + std::to_string(node) + " < 0");
  size_t at = 0;
  long long first_node = 0;  // of the current entry
  int found = -1;            // the whole string is checked, not only up to the node
  if (s.empty()) return error(0, "expected a task count");
  while (at < s.size()) {
    auto tasks = Number(s, &at);
    if (!tasks.ok()) return error(at, "expected a task count");
    uint64_t repeat = 1;
    if (at < s.size() && s[at] == '(') {
      if (s.substr(at, 2) != "(x") return error(at, "expected \"(xN)\"");
      at += 2;
      auto n = Number(s, &at);
      if (!n.ok()) return error(at, "expected a repeat count");
      if (at >= s.size() || s[at] != ')') return error(at, "expected ')'");
      ++at;
      if (n->first == 0 || n->first > 1u << 24) return error(at, "repeat count not in [1, 2^24]");
      repeat = n->first;
    }
    if (tasks->first > 1u << 20) return error(at, "more than 2^20 tasks on a node");
    if (found < 0 && node < first_node + static_cast<long long>(repeat)) found = static_cast<int>(tasks->first);
    first_node += static_cast<long long>(repeat);
    if (first_node > 1 << 24) return error(at, "more than 2^24 nodes");
    if (at < s.size()) {
      if (s[at] != ',') return error(at, "expected ','");
      ++at;
      if (at == s.size()) return error(at, "trailing ','");
    }
  }
  if (found >= 0) return found;
  return Status::InvalidArgument("tasks per node \"" + std::string(s.substr(0, 200)) + "\" covers " +
                                 std::to_string(first_node) + " node(s), not node " + std::to_string(node));
}

Result<SlurmStep> ReadSlurmStep(const EnvLookup& env) {
  constexpr long long kMaxTasks = 1 << 24;
  SlurmStep st;
  auto world = IntVar(env, "SLURM_NTASKS", 1, kMaxTasks);
  if (!world.ok()) return world.status();
  st.world_size = static_cast<int>(*world);
  if (st.world_size > 1 && !NonEmpty(env, "SLURM_STEP_ID"))
    return Status::InvalidArgument("SLURM_NTASKS=" + std::to_string(st.world_size) +
                                   " but this process is not a task of a job step (no SLURM_STEP_ID): "
                                   "start it with srun");
  auto rank = IntVar(env, "SLURM_PROCID", 0, st.world_size - 1);
  if (!rank.ok()) return rank.status();
  st.rank = static_cast<int>(*rank);
  auto local = IntVar(env, "SLURM_LOCALID", 0, st.world_size - 1);
  if (!local.ok()) return local.status();
  st.local_rank = static_cast<int>(*local);

  st.local_world_size = st.world_size;
  const char* per_node = NonEmpty(env, "SLURM_STEP_TASKS_PER_NODE");
  const char* per_node_name = "SLURM_STEP_TASKS_PER_NODE";
  if (!per_node) per_node = NonEmpty(env, per_node_name = "SLURM_TASKS_PER_NODE");
  if (per_node && NonEmpty(env, "SLURM_NODEID")) {
    auto node = IntVar(env, "SLURM_NODEID", 0, kMaxTasks);
    if (!node.ok()) return node.status();
    auto n = TasksOnNode(per_node, static_cast<int>(*node));
    if (!n.ok()) return n.status().WithContext(per_node_name);
    st.local_world_size = *n;
  } else if (NonEmpty(env, "SLURM_NTASKS_PER_NODE")) {
    auto n = IntVar(env, "SLURM_NTASKS_PER_NODE", 1, kMaxTasks);
    if (!n.ok()) return n.status();
    st.local_world_size = static_cast<int>(*n);
  }
  if (st.local_rank >= st.local_world_size)
    return Status::InvalidArgument("SLURM_LOCALID=" + std::to_string(st.local_rank) + " but " +
                                   std::to_string(st.local_world_size) + " task(s) of the step on this node");
  if (NonEmpty(env, "SLURM_CPUS_PER_TASK")) {
    auto c = IntVar(env, "SLURM_CPUS_PER_TASK", 1, 1 << 20);
    if (!c.ok()) return c.status();
    st.cpus_per_task = static_cast<int>(*c);
  }

  if (const char* addr = NonEmpty(env, "MASTER_ADDR")) {
    st.master_addr = addr;
  } else {
    const char* name = nullptr;
    const char* list = nullptr;
    for (const char* n : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})
      if ((list = NonEmpty(env, n))) {
        name = n;
        break;
      }
    if (list) {
      auto first = FirstNode(list);
      if (!first.ok()) return first.status().WithContext(name);
      st.master_addr = *first;
    } else if (st.world_size > 1) {
      return Status::NotFound("no MASTER_ADDR and no SLURM_STEP_NODELIST / SLURM_JOB_NODELIST to take it from");
    }
  }
  if (NonEmpty(env, "MASTER_PORT")) {
    auto p = IntVar(env, "MASTER_PORT", 1, 65535);
    if (!p.ok()) return p.status();
    st.master_port = static_cast<int>(*p);
  } else if (NonEmpty(env, "SLURM_JOB_ID")) {
    auto id = IntVar(env, "SLURM_JOB_ID", 0, (1ll << 62));
    if (!id.ok()) return id.status();
    st.master_port = PortForSlurmJob(*id);
  } else if (st.world_size > 1) {
    return Status::NotFound("no MASTER_PORT and no SLURM_JOB_ID to derive it from");
  }
  return st;
}

}  // namespace imagepack::trainer
