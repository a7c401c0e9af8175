// The job's secret and the challenge-response every store and transport connection runs with
// it. Every job has a secret of 32 random bytes (launchers create it and hand it to their ranks
// privately: MPI, the environment of a child, or a 0600 file); a connection proves it knows the
// secret without sending it: each side sends a fresh nonce and answers the other's with
// HMAC-SHA256(secret, purpose | nonces). Crypto is OpenSSL's libcrypto. The data itself is not
// encrypted or signed.
#pragma once

#include <cstddef>
#include <string>

namespace ringbench::auth {

constexpr size_t kSecretBytes = 32;  // 256 bits; at least 16 are required
constexpr size_t kNonceBytes = 32;
constexpr size_t kMacBytes = 32;

// `n` bytes from the OS's random generator (RAND_bytes); throws Error when it fails.
std::string random_bytes(size_t n);
std::string new_secret();  // random_bytes(kSecretBytes)

// HMAC-SHA256(secret, purpose || 0 || a || b): the answer to a challenge. `purpose` names the
// protocol and direction ("store client", "tcp server"...), so one answer never serves another.
std::string mac(const std::string& secret, const std::string& purpose, const std::string& a,
                const std::string& b);
// Compares two MACs in constant time.
bool same_mac(const std::string& x, const std::string& y);

// SHA-256 of `data`, in hex (the config hash every sweep rank compares).
std::string sha256_hex(const std::string& data);

// Hex, for the environment and secret files; from_hex throws Error naming `what` on bad input
// or on a secret shorter than 16 bytes.
std::string to_hex(const std::string& bytes);
std::string secret_from_hex(const std::string& hex, const std::string& what);

// The secret of a rank started by hand: the file `secret_file` if given (it must not be
// readable by others), else RINGBENCH_SECRET, else "" (none). Throws Error on a bad one.
std::string secret_from_env_or_file(const std::string& secret_file);

// Writes `secret` as hex to a new file only its owner can read, in a new private directory;
// returns the file's path. The caller removes it (remove_secret_file).
std::string write_secret_file(const std::string& secret);
void remove_secret_file(const std::string& path);

}  // namespace ringbench::auth
