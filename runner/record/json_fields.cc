#include "runner/record/json_fields.h"

#include "base/errors.h"

namespace ringbench {

using json = nlohmann::json;

std::string str_or(const json& j, const char* key, const std::string& def) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : def;
}

int int_or(const json& j, const char* key, int def) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int>() : def;
}

uint64_t uint_or(const json& j, const char* key, uint64_t def) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number_unsigned() ? it->get<uint64_t>() : def;
}

bool bool_or(const json& j, const char* key, bool def) {
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : def;
}

std::string required_str(const json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string())
    throw Error(where + ": \"" + key + "\" is missing or not a string");
  return it->get<std::string>();
}

int required_int(const json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer())
    throw Error(where + ": \"" + key + "\" is missing or not an integer");
  return it->get<int>();
}

}  // namespace ringbench
