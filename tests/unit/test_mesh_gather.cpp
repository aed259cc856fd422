// Creation's exchange over the control mesh (core/mesh_gather.hpp): the dissemination's
// steps reach every rank along mesh links only, and a set of values survives its
// encoding while malformed ones are refused, naming the sender.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/mesh_overlay.hpp"
#include "core/mesh_gather.hpp"
#include "strata/errors.hpp"

namespace strata::detail {
namespace {

// Runs the steps on sets of ranks, as every rank would at once.
TEST(MeshGather, StepsGiveEveryRankEveryValueOverLinksOnly) {
  for (int n : {1, 2, 3, 5, 7, 16, 17, 24, 100, 255, 256, 257, 1000, 4097}) {
    const auto steps = gather_steps(n);
    int log2 = 0;
    while ((1 << log2) < n) ++log2;
    EXPECT_EQ(static_cast<int>(steps.size()), log2) << n;
    std::vector<std::vector<bool>> known(static_cast<std::size_t>(n), std::vector<bool>(static_cast<std::size_t>(n)));
    for (int r = 0; r < n; ++r) known[static_cast<std::size_t>(r)][static_cast<std::size_t>(r)] = true;
    for (int d : steps) {
      for (int r = 0; r < std::min(n, 40); ++r) {  // every d is a link of the overlay
        const auto nb = bootstrap::overlay_neighbours(r, n, 0);
        EXPECT_TRUE(std::binary_search(nb.begin(), nb.end(), (r + d) % n)) << n << " step " << d;
      }
      if (n > 300) continue;  // the links suffice there; the sets are checked below 300
      auto next = known;
      for (int r = 0; r < n; ++r) {
        const auto& from = known[static_cast<std::size_t>((r - d + n) % n)];
        for (int x = 0; x < n; ++x)
          if (from[static_cast<std::size_t>(x)]) next[static_cast<std::size_t>(r)][static_cast<std::size_t>(x)] = true;
      }
      known = std::move(next);
    }
    if (n > 300) continue;
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(std::count(known[static_cast<std::size_t>(r)].begin(), known[static_cast<std::size_t>(r)].end(), true), n)
          << "rank " << r << " of " << n;
  }
}

TEST(MeshGather, SetsOfValuesRoundTripAndMalformedOnesAreRefused) {
  std::vector<std::optional<std::string>> sent(5);
  sent[0] = "zero";
  sent[3] = std::string("with\0nul", 8);
  sent[4] = "";
  const std::string bytes = encode_known(sent);
  std::vector<std::optional<std::string>> got(5);
  got[4] = "kept";  // a value already known is not replaced
  parse_known(bytes, 5, 2, got);
  EXPECT_EQ(got[0], sent[0]);
  EXPECT_FALSE(got[1]);
  EXPECT_EQ(got[3], sent[3]);
  EXPECT_EQ(got[4], "kept");

  std::vector<std::optional<std::string>> out(5);
  EXPECT_THROW(parse_known(bytes, 3, 2, out), TransportError);  // rank 3 of 3
  try {
    parse_known(bytes.substr(0, bytes.size() - 1), 5, 2, out);  // a value cut short
    FAIL();
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_known(bytes.substr(0, 6), 5, 2, out), TransportError);  // a header cut short
  parse_known("", 5, 2, out);  // nothing: fine
}

}  // namespace
}  // namespace strata::detail
