// The WAN link's emulation spec and the token bucket that paces a shaped link.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "strata/errors.hpp"
#include "wan/emulation.hpp"

namespace strata::wan {
namespace {

using namespace std::chrono_literals;

TEST(Emulation, ParsesEveryField) {
  const Emulation e = parse_emulation("rate=200mbit,delay=25ms,window=4m,loss=0.001,cut=7");
  EXPECT_DOUBLE_EQ(e.rate_bytes_per_s, 25e6);
  EXPECT_EQ(e.delay, 25ms);
  EXPECT_EQ(e.window, 4u << 20);
  EXPECT_DOUBLE_EQ(e.loss, 0.001);
  EXPECT_EQ(e.cut_after, 7u);
  EXPECT_DOUBLE_EQ(parse_emulation("corrupt=0.25").corrupt, 0.25);
  const Emulation f = parse_emulation("delay=500us,window=256k,rate=1gbit");
  EXPECT_EQ(f.delay, 500us);
  EXPECT_EQ(f.window, 256u << 10);
  EXPECT_DOUBLE_EQ(f.rate_bytes_per_s, 125e6);
  const Emulation none = parse_emulation("");
  EXPECT_EQ(none.rate_bytes_per_s, 0);
  EXPECT_EQ(none.delay, 0ns);
  EXPECT_EQ(none.window, 0u);
}

TEST(Emulation, ErrorsNameTheBadField) {
  auto message = [](const std::string& spec) {
    try {
      parse_emulation(spec);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message("rate=200mb").find("rate"), std::string::npos);
  EXPECT_NE(message("rate=fast").find("rate"), std::string::npos);
  EXPECT_NE(message("delay=25").find("delay"), std::string::npos);
  EXPECT_NE(message("window=4x").find("window"), std::string::npos);
  EXPECT_NE(message("loss=1.5").find("loss"), std::string::npos);
  EXPECT_NE(message("loss=-0.1").find("loss"), std::string::npos);
  EXPECT_NE(message("cut=2.5").find("cut"), std::string::npos);
  EXPECT_NE(message("corrupt=2").find("corrupt"), std::string::npos);
  EXPECT_NE(message("jitter=5ms").find("jitter"), std::string::npos);
  EXPECT_NE(message("delay").find("field=value"), std::string::npos);
}

TEST(TokenBucket, LimitsToItsRate) {
  using C = TokenBucket::Clock;
  const auto t0 = C::now();
  TokenBucket b(1000.0, 100.0, t0);  // 1000 B/s, burst 100
  C::time_point ready;
  EXPECT_TRUE(b.take(100, t0, &ready));
  EXPECT_FALSE(b.take(50, t0, &ready));
  EXPECT_NEAR(std::chrono::duration<double>(ready - t0).count(), 0.05, 1e-6);
  EXPECT_TRUE(b.take(50, t0 + 50ms, &ready));
  // A frame beyond the burst passes once the bucket is full, leaving a debt.
  EXPECT_TRUE(b.take(500, t0 + 150ms, &ready));
  EXPECT_FALSE(b.take(1, t0 + 200ms, &ready));
  EXPECT_TRUE(TokenBucket().take(1e12, t0, &ready));  // unlimited
}

}  // namespace
}  // namespace strata::wan
