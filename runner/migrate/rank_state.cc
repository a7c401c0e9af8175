#include "runner/migrate/rank_state.h"

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/errors.h"
#include "runner/migrate/framebuffer.h"

namespace ringbench::migrate {
namespace {

using json = nlohmann::json;
constexpr double kMiB = 1 << 20;

std::string mib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MiB", bytes / kMiB);
  return b;
}

void write_floats(Framebuffer& fb, size_t offset, const std::vector<float>& v) {
  fb.write(offset, v.data(), v.size() * sizeof(float));
}
std::vector<float> read_floats(const Framebuffer& fb, size_t offset, size_t count) {
  std::vector<float> v(count);
  fb.read(offset, v.data(), count * sizeof(float));
  return v;
}

// The per-step numbers of a record, in one order for encoding and decoding.
constexpr const char* kFields[] = {"step_s",      "compute_s", "allreduce_s", "exposed_s",  "optimizer_s",
                                   "device_s",    "device_wait_s", "forward_s", "backward_s", "loss", "cpu_s"};
double* field(models::StepRecord& r, size_t i) {
  double* p[] = {&r.step_s,   &r.compute_s,     &r.allreduce_s, &r.exposed_s,  &r.optimizer_s,
                 &r.device_s, &r.device_wait_s, &r.forward_s,   &r.backward_s, &r.loss, &r.cpu_s};
  return p[i];
}

json record_json(models::StepRecord r) {
  json j = {{"step", r.step}, {"correct", r.correct}, {"bucket_ready_s", r.bucket_ready_s},
            {"bucket_allreduce_s", r.bucket_allreduce_s}};
  for (size_t i = 0; i < std::size(kFields); ++i) j[kFields[i]] = *field(r, i);
  return j;
}

std::vector<double> times(const json& j, const char* key, size_t buckets) {
  const json& a = j.at(key);
  if (!a.is_array() || a.size() != buckets) throw Error(std::string(key) + " must hold one time per bucket");
  std::vector<double> v;
  for (const json& x : a) {
    if (!x.is_number() || !std::isfinite(x.get<double>()) || x.get<double>() < 0) throw Error(std::string(key) + " holds " + x.dump());
    v.push_back(x.get<double>());
  }
  return v;
}

models::StepRecord record_of(const json& j, size_t buckets) {
  models::StepRecord r;
  r.step = j.at("step").get<int64_t>();
  r.correct = j.at("correct").get<int>();
  for (size_t i = 0; i < std::size(kFields); ++i) {
    const json& v = j.at(kFields[i]);
    if (!v.is_number() || !std::isfinite(v.get<double>())) throw Error(std::string(kFields[i]) + " is " + v.dump());
    *field(r, i) = v.get<double>();
  }
  r.bucket_ready_s = times(j, "bucket_ready_s", buckets);
  r.bucket_allreduce_s = times(j, "bucket_allreduce_s", buckets);
  return r;
}

}  // namespace

uint64_t StateLayout::signature(uint64_t framebuffer_bytes) const {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t v : {uint64_t(param_count), uint64_t(state_count), uint64_t(activation_bytes), framebuffer_bytes})
    h = (h ^ v) * 1099511628211ull;
  return h;
}

StateLayout layout_state(size_t param_count, size_t state_count, size_t activation_bytes, uint64_t framebuffer_bytes) {
  StateLayout l;
  l.param_count = param_count;
  l.state_count = state_count;
  l.activation_bytes = activation_bytes;
  l.params = 0;
  l.momentum = l.params + param_count * sizeof(float);
  l.state = l.momentum + param_count * sizeof(float);
  l.activations = l.state + state_count * sizeof(float);
  l.end = l.activations + activation_bytes;
  if (l.end > framebuffer_bytes)
    throw Error("the rank's state (" + mib(double(l.end)) + ": parameters and momentum " +
                mib(double(2 * param_count * sizeof(float))) + ", activations " + mib(double(activation_bytes)) +
                ") does not fit its framebuffer of " + mib(double(framebuffer_bytes)) + ": use a larger --framebuffer");
  return l;
}

void write_state(Framebuffer& fb, const StateLayout& l, const models::Trainer& t, int64_t step,
                 std::vector<char>& scratch) {
  write_floats(fb, l.params, t.host_params());
  write_floats(fb, l.momentum, t.host_momentum());
  write_floats(fb, l.state, t.host_state());
  scratch.resize(l.activation_bytes);
  std::memset(scratch.data(), int(step & 0xff), scratch.size());
  fb.write(l.activations, scratch.data(), scratch.size());
}

void restore_state(const Framebuffer& fb, const StateLayout& l, models::Trainer& t, int64_t steps_done) {
  t.restore(read_floats(fb, l.params, l.param_count), read_floats(fb, l.momentum, l.param_count),
            read_floats(fb, l.state, l.state_count), steps_done);
}

std::string encode(const LoopState& s) {
  json records = json::array();
  for (const auto& r : s.measured) records.push_back(record_json(r));
  return json{{"steps_done", s.steps_done}, {"cursor", s.cursor}, {"measured", records}, {"traced", s.traced},
              {"begin_ns", s.begin_ns}, {"stun_ns", s.stun_ns}, {"cpu_s", s.cpu_s}}
      .dump();
}

LoopState decode_loop_state(const std::string& bytes, int64_t total_steps, size_t buckets) {
  const json j = json::parse(bytes, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error("the migrated rank's state record is not a JSON object");
  try {
    LoopState s;
    s.steps_done = j.at("steps_done").get<int64_t>();
    if (s.steps_done < 1 || s.steps_done >= total_steps)
      throw Error("steps_done " + std::to_string(s.steps_done) + " is outside 1.." + std::to_string(total_steps - 1));
    s.cursor = j.at("cursor").get<std::vector<uint64_t>>();
    s.traced = j.at("traced").get<int>();
    s.begin_ns = j.at("begin_ns").get<int64_t>();
    s.stun_ns = j.at("stun_ns").get<int64_t>();
    s.cpu_s = j.at("cpu_s").get<double>();
    if (!std::isfinite(s.cpu_s) || s.cpu_s < 0) throw Error("cpu_s " + j.at("cpu_s").dump() + " is not a CPU time");
    const json& m = j.at("measured");
    if (!m.is_array() || int64_t(m.size()) > s.steps_done) throw Error("more measured steps than steps done");
    for (const json& r : m) s.measured.push_back(record_of(r, buckets));
    return s;
  } catch (const json::exception& e) {
    throw Error(std::string("the migrated rank's state record: ") + e.what());
  } catch (const Error& e) {
    throw Error(std::string("the migrated rank's state record: ") + e.what());
  }
}

}  // namespace ringbench::migrate
