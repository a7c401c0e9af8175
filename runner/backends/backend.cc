#include "runner/backends/backend.h"

#include <CLI/CLI.hpp>
#include <algorithm>

#include "base/errors.h"

namespace ringbench {
namespace {

// Filled during static initialization, before main: a function-local static, so that it exists
// whichever backend's file initializes first.
std::vector<Backend>& registry() {
  static std::vector<Backend> r;
  return r;
}

bool frozen = false;  // once backends() has handed out pointers into the registry

}  // namespace

bool register_backend(Backend b) {
  if (frozen) throw Error("backend " + b.name + " registered after the registry was in use");
  registry().push_back(std::move(b));
  return true;
}

const std::vector<const Backend*>& backends() {
  static const std::vector<const Backend*> sorted = [] {
    frozen = true;
    std::vector<const Backend*> v;
    for (const Backend& b : registry()) v.push_back(&b);
    std::stable_sort(v.begin(), v.end(), [](const Backend* a, const Backend* b) { return a->order < b->order; });
    return v;
  }();
  if (sorted.empty()) throw Error("no backend is registered: this program was linked without ringbench_backends");
  return sorted;
}

const Backend* find_backend(const std::string& name) {
  for (const Backend* b : backends())
    if (b->name == name) return b;
  return nullptr;
}

bool any_backend(const Backend&) { return true; }
bool is_ring(const Backend& b) { return b.ring; }

std::string backend_names(const std::function<bool(const Backend&)>& accept, const std::string& last) {
  std::vector<std::string> names;
  for (const Backend* b : backends())
    if (accept(*b)) names.push_back(b->name);
  std::string s;
  for (size_t i = 0; i < names.size(); ++i)
    s += (i == 0 ? "" : i + 1 == names.size() ? last : ", ") + names[i];
  return s;
}

const Backend& backend_for(const std::string& option, const std::string& name,
                           const std::function<bool(const Backend&)>& accept) {
  const Backend* b = find_backend(name);
  if (!b || !accept(*b)) throw Error(option + " " + name + " is not known: use " + backend_names(accept));
  return *b;
}

void add_backend_options(CLI::App& cmd) {
  for (const Backend* b : backends())
    if (b->options.add) b->options.add(cmd);
}

void validate_backend_options() {
  for (const Backend* b : backends())
    if (b->options.validate) b->options.validate();
}

void Communicator::set_gradient_segment(size_t) {
  throw Error("this transport has no segment size to set (our ring transports have)");
}

std::string options_line(const std::vector<OptionAsRun>& options) {
  std::string line;
  for (const OptionAsRun& o : options)
    line += " " + o.flag + " " + (o.value.is_string() ? o.value.get<std::string>() : o.value.dump());
  return line;
}

nlohmann::json options_json(const std::vector<OptionAsRun>& options) {
  nlohmann::json j = nlohmann::json::object();
  for (const OptionAsRun& o : options) j[o.key] = o.value;
  return j;
}

std::string backend_lacks(const Backend& b, const Collective& c) { return b.lacks ? b.lacks(c) : ""; }

std::string backend_unavailable(const std::string& name) {
  if (name == "none") return "";
  const Backend* b = find_backend(name);
  if (!b) return "unknown transport '" + name + "'";
  const std::string why = b->unavailable ? b->unavailable() : "";
  return why.empty() ? "" : name + ": " + why;
}

}  // namespace ringbench
