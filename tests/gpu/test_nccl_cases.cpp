// strata-nccl-perf's layouts and references, checked without a GPU: the device run is
// rare, so a wrong reference must be found here rather than read as a transport bug there.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <set>

#include "nccl_cases.hpp"

namespace strata::gpu_check {
namespace {

TEST(NcclCases, ShapesFollowNcclTestsLayout) {
  // 1 MiB over 4 ranks: all_gather's size is its whole output, reduce_scatter's its input.
  const Shape ag = shape(Coll::all_gather, 1 << 20, 4);
  EXPECT_EQ(ag.count, 65536u);
  EXPECT_EQ(ag.send, 65536u);
  EXPECT_EQ(ag.recv, 262144u);
  EXPECT_EQ(ag.bytes, 1u << 20);
  const Shape rs = shape(Coll::reduce_scatter, 1 << 20, 4);
  EXPECT_EQ(rs.count, 65536u);
  EXPECT_EQ(rs.send, 262144u);
  EXPECT_EQ(rs.recv, 65536u);
  const Shape ar = shape(Coll::all_reduce, 1 << 20, 4);
  EXPECT_EQ(ar.count, 262144u);
  EXPECT_EQ(ar.send, ar.recv);
  // Sizes that do not divide: the size column is what was really moved.
  const Shape odd = shape(Coll::all_gather, 40, 3);  // 10 elements over 3 ranks
  EXPECT_EQ(odd.count, 3u);
  EXPECT_EQ(odd.bytes, 36u);
  EXPECT_EQ(shape(Coll::reduce_scatter, 8, 4).count, 0u);
  EXPECT_EQ(shape(Coll::sendrecv, 6, 2).count, 1u);
}

TEST(NcclCases, InPlaceOffsetsAreTheRanksBlock) {
  const Shape s = shape(Coll::all_gather, 96, 3);
  EXPECT_EQ(in_place_offset(Coll::all_gather, s, 2), 16u);
  EXPECT_EQ(in_place_offset(Coll::reduce_scatter, shape(Coll::reduce_scatter, 96, 3), 1), 8u);
  EXPECT_EQ(in_place_offset(Coll::all_reduce, shape(Coll::all_reduce, 96, 3), 2), 0u);
  EXPECT_FALSE(has_in_place(Coll::sendrecv));
}

TEST(NcclCases, InputsAreSmallWholeNumbersThatDifferByRankAndRow) {
  std::set<float> seen;
  int differ = 0;
  for (std::size_t i = 0; i < 1000; ++i) {
    const float v = input_value(row_seed(Coll::all_reduce, 4096), 1, i);
    EXPECT_EQ(v, static_cast<float>(static_cast<int>(v)));
    EXPECT_LE(std::abs(v), 4.0f);
    seen.insert(v);
    differ += v != input_value(row_seed(Coll::all_reduce, 4096), 2, i);
    differ += v != input_value(row_seed(Coll::all_reduce, 8192), 1, i);
  }
  EXPECT_EQ(seen.size(), 9u);
  EXPECT_GT(differ, 1600);  // about 8/9 of each comparison
}

// Every collective's reference against a direct simulation of what each rank holds.
TEST(NcclCases, ExpectedValuesMatchASimulation) {
  const int n = 3;
  for (const Coll c : parse_coll_list("all")) {
    const Shape s = shape(c, 4 * 7 * n, n);  // 7 elements per rank's block
    const std::uint64_t seed = row_seed(c, s.bytes);
    std::vector<std::vector<float>> in(n);
    for (int r = 0; r < n; ++r)
      for (std::size_t i = 0; i < s.send; ++i) in[r].push_back(input_value(seed, r, i));
    for (int r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < s.recv; ++i) {
        float want = 0;
        if (c == Coll::all_reduce) {
          for (int q = 0; q < n; ++q) want += in[q][i];
        } else if (c == Coll::reduce_scatter) {
          for (int q = 0; q < n; ++q) want += in[q][r * s.count + i];
        } else if (c == Coll::all_gather) {
          want = in[i / s.count][i % s.count];
        } else if (c == Coll::broadcast) {
          want = in[0][i];
        } else {
          want = in[(r + n - 1) % n][i];
        }
        ASSERT_EQ(expected_value(c, s, seed, r, n, i), want) << coll_name(c) << " rank " << r << " element " << i;
      }
    }
  }
}

TEST(NcclCases, CollectiveListsNameTheUnknownWord) {
  EXPECT_EQ(parse_coll_list("all").size(), 5u);
  EXPECT_EQ(parse_coll_list("sendrecv,broadcast"), (std::vector<Coll>{Coll::sendrecv, Coll::broadcast}));
  try {
    parse_coll_list("all_reduce,alltoall");
    FAIL() << "alltoall was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'alltoall'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata::gpu_check
