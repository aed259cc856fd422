// A certificate authority for TLS tests, made with the openssl command line in a
// directory removed afterwards: "ca" signs "rank"; a second authority, "rogue-ca", signs
// "rogue", a certificate no rank of the job should accept. P-256 keys, valid a day.
// Header-only, so the plugin harness (which links no test library) can use it too.
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "temp_dir.hpp"

namespace strata::test {

class Pki {
 public:
  Pki() {
    const std::string d = dir_.path();
    run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + d +
        "/ca.key -out " + d + "/ca.pem -days 1 -subj /CN=strata-test-ca");
    run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + d +
        "/rogue-ca.key -out " + d + "/rogue-ca.pem -days 1 -subj /CN=strata-rogue-ca");
    issue("rank", "ca");
    issue("rogue", "rogue-ca");
  }
  Pki(const Pki&) = delete;
  Pki& operator=(const Pki&) = delete;
  // "<who>.pem", "<who>.key", "ca.pem", ...
  std::string path(const std::string& name) const { return dir_.path() + "/" + name; }

 private:
  static void run(const std::string& cmd) {
    if (std::system((cmd + " >/dev/null 2>&1").c_str()) != 0) throw std::runtime_error("failed: " + cmd);
  }
  void issue(const std::string& who, const std::string& ca) {
    const std::string d = dir_.path();
    run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + d + "/" + who +
        ".key -out " + d + "/" + who + ".csr -subj /CN=" + who);
    run("openssl x509 -req -in " + d + "/" + who + ".csr -CA " + d + "/" + ca + ".pem -CAkey " + d + "/" + ca +
        ".key -CAcreateserial -out " + d + "/" + who + ".pem -days 1");
  }
  TempDir dir_{"strata-pki"};
};

}  // namespace strata::test
