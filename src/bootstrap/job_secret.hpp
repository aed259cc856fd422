// The job's secret: 32 bytes every process of a job holds and nothing else does. Each
// connection between them proves knowledge of it (bootstrap/handshake.hpp), and the WAN
// link's TLS can be keyed by it. It comes from a UniqueId, STRATA_JOB_SECRET(_FILE), or
// rank 0 through a framework's store; a job that has none uses the open key (all zero),
// which any strata process knows, and says so at creation.
#pragma once

#include <array>
#include <optional>
#include <string>

namespace strata::bootstrap {

struct JobSecret {
  std::array<unsigned char, 32> key{};
  bool open = true;  // no secret was given: the all-zero key

  // 32 bytes from the system's random source.
  static JobSecret random();
  // Any text (a passphrase, a hex string): its SHA-256 is the key.
  static JobSecret from_text(const std::string& text);
  // The file's contents, less a trailing newline, as text. Throws InvalidArgument naming
  // `variable` (the setting that named the file) when it cannot be read or is empty.
  static JobSecret from_file(const std::string& path, const std::string& variable);
  // 64 lowercase hex digits, to carry the key in a UniqueId or a store value.
  std::string hex() const;
  static std::optional<JobSecret> from_hex(const std::string& hex);
};

}  // namespace strata::bootstrap
