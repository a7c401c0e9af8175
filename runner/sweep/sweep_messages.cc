#include "runner/sweep/sweep_messages.h"

#include "base/errors.h"
#include "collectives/store.h"

namespace ringbench {

using json = nlohmann::json;

json point_result(const std::string& raw, const std::string& key, int sender) {
  const json res = json::parse(raw, nullptr, /*allow_exceptions=*/false);
  const auto bad = [&](const std::string& why) {
    return Error("sweep rank " + std::to_string(sender) + " sent a bad " + key + ": " + why);
  };
  if (!res.is_object()) throw bad("not a JSON object");
  if (!res.contains("code") || !res["code"].is_number_integer() ||
      res["code"].get<int64_t>() < -255 || res["code"].get<int64_t>() > 255)
    throw bad("\"code\" is not an exit code");
  for (const char* k : {"timed_out", "interrupted"})
    if (!res.contains(k) || !res[k].is_boolean()) throw bad(std::string("\"") + k + "\" is not true or false");
  if (!res.contains("wall_s") || !res["wall_s"].is_number() || !(res["wall_s"].get<double>() >= 0))
    throw bad("\"wall_s\" is not a duration");
  if (!res.contains("log") || !res["log"].is_string() || res["log"].get_ref<const std::string&>().size() > (1u << 20))
    throw bad("\"log\" is not a string of at most 1 MiB");
  return res;
}

PointCommand parse_command(const json& cmd, int64_t seq, size_t points) {
  const std::string from = "sweep command " + std::to_string(seq) + " from rank 0: ";
  PointCommand pc;
  const json op = cmd.value("op", json());
  if (op == "done") {
    pc.done = true;
    return pc;
  }
  if (op != "run") throw Error(from + "unknown op " + op.dump());
  const json idx = cmd.value("point", json()), store = cmd.value("store", json()), job = cmd.value("job", json());
  // Unsigned as parsed from text, signed as built in memory: both name an index when in range.
  const bool index_ok = idx.is_number_unsigned() ? idx.get<uint64_t>() < points
                        : idx.is_number_integer() && idx.get<int64_t>() >= 0 && uint64_t(idx.get<int64_t>()) < points;
  if (!index_ok)
    throw Error(from + "point " + idx.dump() + " is not one of this sweep's " + std::to_string(points));
  if (!store.is_string()) throw Error(from + "no store address");
  parse_host_port(store.get<std::string>());  // throws, naming it, when malformed
  if (!job.is_string() || job.get<std::string>().size() != 16 ||
      job.get<std::string>().find_first_not_of("0123456789abcdef") != std::string::npos)
    throw Error(from + "job id " + job.dump() + " is not 16 hex digits");
  pc.index = idx.get<size_t>();
  pc.store = store;
  pc.job = job;
  return pc;
}

bool valid_host_name(const std::string& h) {
  return !h.empty() && h.size() <= 253 && h[0] != '-' &&
         h.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") == std::string::npos;
}

}  // namespace ringbench
