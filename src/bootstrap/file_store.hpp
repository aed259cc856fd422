// A Store over a directory every rank can see (a local temp dir for tests, or a shared
// file system for peers that cannot reach a TCP store). One file per key; a value
// appears whole or not at all because it is written to a temp file and renamed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bootstrap/store.hpp"

namespace strata::bootstrap {

class FileStore : public Store {
 public:
  // The directory must exist; it is not removed on destruction (it is shared).
  explicit FileStore(std::string dir);

  void set(const std::string& key, const std::string& value) override;
  // Polls until every key exists; throws TimeoutError naming the missing keys.
  std::vector<std::string> get(const std::vector<std::string>& keys,
                               Clock::time_point deadline) override;
  // The counter is an ordinary key holding a decimal number, so get() can read it.
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  using Store::get;

  const std::string& dir() const { return dir_; }

 private:
  std::string path_of(const std::string& key) const;
  void publish(const std::string& key, const std::string& value);

  std::string dir_;
};

// Key → file name that keeps [A-Za-z0-9_-] and '.' (not leading) and writes every other
// byte as %XX, so "ucx/3" and "ucx%2F3" cannot collide and no key escapes the directory.
std::string encode_key(const std::string& key);

}  // namespace strata::bootstrap
