// Listeners in a port range (STRATA_PORT_RANGE): parsing, every listener of a range on a
// port of its own, and exhaustion as an error that names the range.
#include <gtest/gtest.h>
#include <gmock/gmock.h>
#include <unistd.h>

#include <set>
#include <vector>

#include "base/listener.hpp"
#include "strata/errors.hpp"

namespace strata::net {
namespace {

using ::testing::HasSubstr;

TEST(PortRange, Parses) {
  EXPECT_TRUE(parse_port_range("").any());
  EXPECT_TRUE(parse_port_range("0").any());
  EXPECT_TRUE(parse_port_range("any").any());
  EXPECT_EQ(parse_port_range("40000"), (PortRange{40000, 40000}));
  EXPECT_EQ(parse_port_range("40000-40100"), (PortRange{40000, 40100}));
  EXPECT_EQ(parse_port_range("1-65535").size(), 65535u);
  EXPECT_EQ(parse_port_range("40000-40100").text(), "40000-40100");
}

TEST(PortRange, RefusesWhatIsNotARange) {
  for (const char* bad : {"40100-40000", "0-10", "40000-70000", "abc", "40000-", "-5", "4e4", "40000 - 40100", "1-2-3"}) {
    try {
      parse_port_range(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.what(), HasSubstr("STRATA_PORT_RANGE='" + std::string(bad) + "'"));
    }
  }
}

// A free stretch of ports on loopback: the kernel's pick, and the few above it.
PortRange free_stretch(int n) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    const auto probe = listen_in_range("127.0.0.1", {}, "probe");
    ::close(probe.fd);
    if (probe.port + n > 65535) continue;
    return PortRange{probe.port, static_cast<std::uint16_t>(probe.port + n - 1)};
  }
  return {};
}

TEST(Listener, EveryListenerOfARangeGetsAPortOfItsOwnThenItIsExhausted) {
  const PortRange range = free_stretch(3);
  ASSERT_FALSE(range.any());
  std::vector<Listening> open;
  std::set<std::uint16_t> ports;
  try {
    for (int i = 0; i < 3; ++i) open.push_back(listen_in_range("127.0.0.1", range, "test listener"));
  } catch (const TransportError& e) {
    // Another process took a port of the stretch meanwhile: nothing to conclude.
    for (auto& l : open) ::close(l.fd);
    GTEST_SKIP() << e.what();
  }
  for (const auto& l : open) {
    EXPECT_GE(l.port, range.lo);
    EXPECT_LE(l.port, range.hi);
    ports.insert(l.port);
  }
  EXPECT_EQ(ports.size(), 3u);
  try {
    listen_in_range("127.0.0.1", range, "the fourth");
    ADD_FAILURE() << "a fourth listener found a port in a range of three";
  } catch (const TransportError& e) {
    EXPECT_THAT(e.what(), HasSubstr("the fourth"));
    EXPECT_THAT(e.what(), HasSubstr("STRATA_PORT_RANGE=" + range.text()));
    EXPECT_THAT(e.what(), HasSubstr("all 3 taken"));
  }
  // A port whose listener closed is free again at once.
  ::close(open[1].fd);
  const auto again = listen_in_range("127.0.0.1", range, "again");
  EXPECT_EQ(again.port, open[1].port);
  ::close(again.fd);
  ::close(open[0].fd);
  ::close(open[2].fd);
}

TEST(Listener, NamesAnAddressItCannotUse) {
  try {
    listen_in_range("not-an-ip", {}, "test listener");
    ADD_FAILURE();
  } catch (const TransportError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'not-an-ip': not an IP address"));
  }
  try {  // an address this host does not have
    listen_in_range("192.0.2.1", PortRange{40000, 40001}, "test listener");
    ADD_FAILURE();
  } catch (const TransportError& e) {
    EXPECT_THAT(e.what(), HasSubstr("192.0.2.1"));
    EXPECT_THAT(e.what(), HasSubstr("Cannot assign requested address"));
  }
}

}  // namespace
}  // namespace strata::net
