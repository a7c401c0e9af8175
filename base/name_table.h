// An enum's names as one table that serves both directions: name_of() for output, parse_name()
// for input. Each value and its name are written once, so the printer and the parser cannot
// drift apart (a value missing from the table prints as `unknown` and never parses).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace ringbench {

template <class E>
struct EnumName {
  E value;
  const char* name;
};

template <class E, size_t N>
constexpr const char* name_of(const EnumName<E> (&table)[N], E value, const char* unknown) {
  for (const EnumName<E>& e : table)
    if (e.value == value) return e.name;
  return unknown;
}

// The value named `name` exactly; nullopt for any other text (the caller words the error).
template <class E, size_t N>
constexpr std::optional<E> parse_name(const EnumName<E> (&table)[N], std::string_view name) {
  for (const EnumName<E>& e : table)
    if (name == e.name) return e.value;
  return std::nullopt;
}

}  // namespace ringbench
