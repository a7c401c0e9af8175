#include "runner/backends/collective.h"

#include <algorithm>

#include "base/errors.h"

namespace ringbench {
namespace {

std::vector<Collective>& registry() {  // filled before main, whichever file initializes first
  static std::vector<Collective> r;
  return r;
}
bool frozen = false;

}  // namespace

bool register_collective(Collective c) {
  if (frozen) throw Error("collective " + c.name + " registered after the registry was in use");
  registry().push_back(std::move(c));
  return true;
}

const std::vector<const Collective*>& collectives() {
  static const std::vector<const Collective*> sorted = [] {
    frozen = true;
    std::vector<const Collective*> v;
    for (const Collective& c : registry()) v.push_back(&c);
    std::stable_sort(v.begin(), v.end(), [](const Collective* a, const Collective* b) { return a->order < b->order; });
    return v;
  }();
  return sorted;
}

const Collective& find_collective(const std::string& name) {
  std::string known;
  for (const Collective* c : collectives()) {
    if (c->name == name) return *c;
    known += (known.empty() ? "" : ", ") + c->name;
  }
  throw Error("no collective '" + name + "': use " + known);
}

size_t round_to_ranks(size_t count, int ranks) { return count / static_cast<size_t>(ranks) * static_cast<size_t>(ranks); }
size_t keep_count(size_t count, int) { return count; }

}  // namespace ringbench
