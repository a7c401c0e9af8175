// Typed reads of one field of a JSON object, as raw.jsonl records and results files are read:
// `_or` gives the default when the field is missing or of another type; `required_` throws an
// Error naming `where` and the key.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace ringbench {

std::string str_or(const nlohmann::json& j, const char* key, const std::string& def);
int int_or(const nlohmann::json& j, const char* key, int def);
uint64_t uint_or(const nlohmann::json& j, const char* key, uint64_t def);
bool bool_or(const nlohmann::json& j, const char* key, bool def);
std::string required_str(const nlohmann::json& j, const char* key, const std::string& where);
int required_int(const nlohmann::json& j, const char* key, const std::string& where);

}  // namespace ringbench
