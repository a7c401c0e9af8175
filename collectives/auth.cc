#include "collectives/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/errors.h"

namespace ringbench::auth {

std::string random_bytes(size_t n) {
  std::string out(n, '\0');
  if (n > 0 && RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1)
    throw Error("cannot draw random bytes for the job's secret (OpenSSL RAND_bytes failed)");
  return out;
}

std::string new_secret() { return random_bytes(kSecretBytes); }

std::string mac(const std::string& secret, const std::string& purpose, const std::string& a,
                const std::string& b) {
  std::string msg = purpose;
  msg.push_back('\0');
  msg += a;
  msg += b;
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // An empty secret (a loopback job started by hand without one) is a key of zero bytes.
  static const unsigned char kNoKey = 0;
  const void* key = secret.empty() ? static_cast<const void*>(&kNoKey) : secret.data();
  if (!HMAC(EVP_sha256(), key, static_cast<int>(secret.size()), reinterpret_cast<const unsigned char*>(msg.data()),
            msg.size(), out, &len) ||
      len != kMacBytes)
    throw Error("HMAC-SHA256 failed (OpenSSL)");
  return std::string(reinterpret_cast<const char*>(out), len);
}

bool same_mac(const std::string& x, const std::string& y) {
  return x.size() == y.size() && CRYPTO_memcmp(x.data(), y.data(), x.size()) == 0;
}

std::string sha256_hex(const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), out, &len, EVP_sha256(), nullptr) != 1) throw Error("SHA-256 failed (OpenSSL)");
  return to_hex(std::string(reinterpret_cast<const char*>(out), len));
}

std::string to_hex(const std::string& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::string secret_from_hex(const std::string& hex_in, const std::string& what) {
  std::string hex = hex_in;
  while (!hex.empty() && (hex.back() == '\n' || hex.back() == '\r' || hex.back() == ' ')) hex.pop_back();
  auto digit = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) throw Error(what + ": not a hex string");
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  if (hex.size() % 2 != 0) throw Error(what + ": not a hex string (odd length)");
  if (out.size() < 16)
    throw Error(what + ": a secret needs at least 128 bits (32 hex digits), got " + std::to_string(out.size() * 8));
  return out;
}

std::string secret_from_env_or_file(const std::string& secret_file) {
  if (!secret_file.empty()) {
    struct stat st {};
    if (::stat(secret_file.c_str(), &st) != 0)
      throw Error("--secret-file " + secret_file + ": " + std::strerror(errno));
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%03o", st.st_mode & 0777);
      throw Error("--secret-file " + secret_file + " can be read by others (mode " + mode + "): chmod 600 it");
    }
    std::ifstream in(secret_file);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in) throw Error("--secret-file " + secret_file + ": cannot read it");
    return secret_from_hex(ss.str(), "--secret-file " + secret_file);
  }
  if (const char* v = std::getenv("RINGBENCH_SECRET"); v && *v) return secret_from_hex(v, "RINGBENCH_SECRET");
  return "";
}

std::string write_secret_file(const std::string& secret) {
  char dir[] = "/tmp/ringbench-secret-XXXXXX";  // mkdtemp: mode 0700
  if (!::mkdtemp(dir)) throw Error(std::string("cannot create a private directory for the job's secret: ") + std::strerror(errno));
  const std::string path = std::string(dir) + "/secret";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) throw Error("cannot create " + path + ": " + std::strerror(errno));
  const std::string hex = to_hex(secret) + "\n";
  const bool ok = ::write(fd, hex.data(), hex.size()) == ssize_t(hex.size());
  ::close(fd);
  if (!ok) {
    remove_secret_file(path);
    throw Error("cannot write " + path);
  }
  return path;
}

void remove_secret_file(const std::string& path) {
  if (path.empty()) return;
  ::unlink(path.c_str());
  ::rmdir(std::filesystem::path(path).parent_path().c_str());
}

}  // namespace ringbench::auth
