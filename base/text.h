// Small ASCII text helpers that parsers of names and tool output share (vGPU profile names,
// nvidia-smi output, tc rates): case folding and trimming, byte by byte in the "C" locale's
// classes.
#pragma once

#include <cctype>
#include <string>
#include <string_view>

namespace ringbench {

inline std::string lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

inline std::string upper(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return out;
}

// `s` without leading and trailing white space.
inline std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace ringbench
