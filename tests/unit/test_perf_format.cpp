// strata-perf's parsing, bandwidth arithmetic, nccl-tests table layout, JSON, and the
// data patterns behind its correctness check.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/half.hpp"
#include "perf_data.hpp"
#include "perf_options.hpp"
#include "perf_report.hpp"

using namespace strata;
using namespace strata::perf;

TEST(PerfSize, ParsesPlainAndSuffixedSizes) {
  EXPECT_EQ(parse_size("8"), 8u);
  EXPECT_EQ(parse_size("0"), 0u);
  EXPECT_EQ(parse_size("1K"), 1024u);
  EXPECT_EQ(parse_size("1k"), 1024u);
  EXPECT_EQ(parse_size("32M"), 32ull << 20);
  EXPECT_EQ(parse_size("1G"), 1ull << 30);
  EXPECT_EQ(parse_size("2T"), 2ull << 40);
  EXPECT_EQ(parse_size("4KB"), 4096u);
  EXPECT_EQ(parse_size("4KiB"), 4096u);
  EXPECT_EQ(parse_size("16B"), 16u);
}

TEST(PerfSize, RejectsMalformedSizes) {
  for (const char* bad : {"", "K", "-1", "1.5M", "1X", "1MM", "12 ", " 12", "0x10", "1Mx"})
    EXPECT_FALSE(parse_size(bad).has_value()) << bad;
  EXPECT_FALSE(parse_size("99999999999999999999").has_value());
  EXPECT_FALSE(parse_size("17179869184G").has_value());  // 2^34 GiB overflows 64 bits
}

TEST(PerfBusBw, FactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(*bus_bw_factor("all_reduce", 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(*bus_bw_factor("all_reduce", 2), 1.0);
  EXPECT_DOUBLE_EQ(*bus_bw_factor("all_reduce", 1), 0.0);
  EXPECT_DOUBLE_EQ(*bus_bw_factor("reduce_scatter", 4), 0.75);
  EXPECT_DOUBLE_EQ(*bus_bw_factor("all_gather", 3), 2.0 / 3);
  EXPECT_DOUBLE_EQ(*bus_bw_factor("alltoall", 4), 0.75);
  for (const char* one : {"broadcast", "reduce", "sendrecv"}) EXPECT_DOUBLE_EQ(*bus_bw_factor(one, 16), 1.0);
  EXPECT_FALSE(bus_bw_factor("allreduce_typo", 4).has_value());
}

TEST(PerfBusBw, TimingUsesDecimalGigabytes) {
  // 1e9 bytes in 1e6 us is 1 GB/s.
  const Timing t = make_timing(1.0e6, 1000000000ull, 1.5, std::int64_t{0});
  EXPECT_DOUBLE_EQ(t.alg_bw, 1.0);
  EXPECT_DOUBLE_EQ(t.bus_bw, 1.5);
  EXPECT_EQ(make_timing(0.0, 100, 1.0, std::nullopt).alg_bw, 0.0);
}

TEST(PerfSweep, VisitsSizesLikeNcclTests) {
  EXPECT_EQ(sweep_sizes(8, 64, 0, 2), (std::vector<std::uint64_t>{8, 16, 32, 64}));
  EXPECT_EQ(sweep_sizes(8, 100, 0, 4), (std::vector<std::uint64_t>{8, 32}));
  EXPECT_EQ(sweep_sizes(1024, 4096, 1024, 1), (std::vector<std::uint64_t>{1024, 2048, 3072, 4096}));
  EXPECT_EQ(sweep_sizes(32 << 20, 32 << 20, 1 << 20, 1), (std::vector<std::uint64_t>{32 << 20}));
  EXPECT_TRUE(sweep_sizes(64, 8, 1, 1).empty());
  EXPECT_TRUE(sweep_sizes(0, 8, 0, 2).empty());
  EXPECT_TRUE(sweep_sizes(8, 64, 0, 1).empty());
  EXPECT_EQ(sweep_sizes(~0ull - 1, ~0ull, 0, 2).size(), 1u);  // no wrap-around
}

TEST(PerfTable, HeaderMatchesNcclTestsColumns) {
  const std::string expected =
      "#\n"
      "#                                                              out-of-place                       in-place          \n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong   wanB/rank\n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)                (B)\n";
  EXPECT_EQ(format_table_header(), expected);
}

TEST(PerfTable, ConfigHeader) {
  SweepConfig c{8, 67108864, 1048576, 4, 1, 20, 1, 0};
  EXPECT_EQ(format_config_header(c),
            "# nThread 1 nGpus 1 minBytes 8 maxBytes 67108864 step: 4(factor) warmup iters: 1 "
            "iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n");
  c.step_factor = 1;
  c.blocking = 1;
  EXPECT_EQ(format_config_header(c),
            "# nThread 1 nGpus 1 minBytes 8 maxBytes 67108864 step: 1048576(bytes) warmup iters: 1 "
            "iters: 20 agg iters: 1 validation: 1 graph: 0\n"
            "# Blocking Enabled: wait for completion and barrier after each collective \n#\n");
}

TEST(PerfTable, RankLines) {
  EXPECT_EQ(format_rank_lines("strata 0.1.0 transport ucx ranks 2",
                              {{0, 1234, "node1", ""}, {1, 1235, "node1", "region eu"}}),
            "# strata 0.1.0 transport ucx ranks 2\n"
            "#  Rank  0 Group  0 Pid   1234 on      node1\n"
            "#  Rank  1 Group  0 Pid   1235 on      node1 region eu\n");
}

TEST(PerfTable, TimeColumnPrecisionDependsOnMagnitude) {
  EXPECT_EQ(format_time_us(12.346), "  12.35");
  EXPECT_EQ(format_time_us(99.99), "  99.99");
  EXPECT_EQ(format_time_us(123.46), "  123.5");
  EXPECT_EQ(format_time_us(9999.94), " 9999.9");
  EXPECT_EQ(format_time_us(12345.6), "  12346");
}

TEST(PerfTable, RowLayout) {
  ResultRow row;
  row.size = 33554432;
  row.count = 8388608;
  row.type = "float";
  row.redop = "sum";
  row.root = -1;
  row.out_of_place = make_timing(6543.21, row.size, 1.0, std::int64_t{0});
  row.in_place = make_timing(6400.0, row.size, 1.0, std::int64_t{3});
  EXPECT_EQ(format_row(row),
            "    33554432       8388608     float     sum      -1   6543.2    5.13    5.13      0"
            "   6400.0    5.24    5.24      3           -\n");
  row.out_of_place.nwrong.reset();
  row.in_place.nwrong.reset();
  EXPECT_EQ(format_row(row),
            "    33554432       8388608     float     sum      -1   6543.2    5.13    5.13    N/A"
            "   6400.0    5.24    5.24    N/A           -\n");
  row.wan = WanBytes{33554455.6, 33554456, 34000000};
  EXPECT_EQ(format_row(row),
            "    33554432       8388608     float     sum      -1   6543.2    5.13    5.13    N/A"
            "   6400.0    5.24    5.24    N/A    33554456\n");
  row.wan = WanBytes{};  // spans regions but nothing crossed (STRATA_WAN_LINK=0)
  EXPECT_EQ(format_row(row).substr(format_row(row).size() - 13), "           0\n");
  row.rel_error = 0.0123;  // --compress: after the columns, so column parsers are unaffected
  EXPECT_EQ(format_row(row).substr(format_row(row).size() - 31), "           0  relErr 1.230e-02\n");
  EXPECT_NE(format_json(RunInfo{}, {row}).find("\"rel_error\":0.0123"), std::string::npos);
}

TEST(PerfTable, WanSummaryUsesTheLargestMeasuredSize) {
  std::vector<ResultRow> rows(3);
  EXPECT_EQ(format_wan_summary(rows), "");
  rows[0].size = 1024;
  rows[0].wan = WanBytes{1000, 1100, 2000};
  rows[1].size = 4096;
  rows[1].wan = WanBytes{4000, 4096, 4100};
  rows[2].size = 8192;  // unmeasured rows are skipped
  EXPECT_EQ(format_wan_summary(rows),
            "# WAN bytes sent per rank per call: max 4096, mean 4000 (payload), wire overhead 2.50% "
            "(size 4096)\n");
}

TEST(PerfTable, FooterAndAverages) {
  std::vector<ResultRow> rows(2);
  rows[0].out_of_place = make_timing(1.0e6, 1000000000ull, 1.0, std::int64_t{0});
  rows[0].in_place = make_timing(1.0e6, 2000000000ull, 1.0, std::int64_t{1});
  rows[1].out_of_place = make_timing(1.0e6, 3000000000ull, 1.0, std::int64_t{0});
  rows[1].in_place = make_timing(1.0e6, 6000000000ull, 1.0, std::nullopt);
  EXPECT_DOUBLE_EQ(average_bus_bw(rows), 3.0);
  EXPECT_EQ(total_wrong(rows), 1);
  EXPECT_EQ(average_bus_bw({}), 0.0);
  EXPECT_EQ(format_footer(0, 3.0),
            "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 3 \n#\n");
  EXPECT_EQ(format_footer(2, 0.125),
            "# Out of bounds values : 2 FAILED\n# Avg bus bandwidth    : 0.125 \n#\n");
}

TEST(PerfJson, DocumentShape) {
  ResultRow row;
  row.size = 1000;
  row.count = 250;
  row.type = "float";
  row.redop = "sum";
  row.root = -1;
  row.out_of_place = make_timing(1.0, 1000, 1.0, std::int64_t{0});
  row.in_place = make_timing(4.0, 1000, 1.0, std::nullopt);
  const RunInfo info{"strata-perf", "all_reduce", 2, "tcp", "float", "sum"};
  EXPECT_EQ(format_json(info, {row}),
            "{\"tool\":\"strata-perf\",\"collective\":\"all_reduce\",\"ranks\":2,\"transport\":\"tcp\","
            "\"dtype\":\"float\",\"op\":\"sum\",\"results\":[\n"
            "{\"size\":1000,\"count\":250,\"type\":\"float\",\"redop\":\"sum\",\"root\":-1,"
            "\"wan_bytes_per_rank\":null,\"out_of_place\":{\"time\":1,\"alg_bw\":1,\"bus_bw\":1,\"nwrong\":0},"
            "\"in_place\":{\"time\":4,\"alg_bw\":0.25,\"bus_bw\":0.25,\"nwrong\":null}}],\n"
            "\"average_bus_bandwidth\":0.625}\n");
  row.wan = WanBytes{2048.5, 4096, 3000};
  EXPECT_NE(format_json(info, {row}).find("\"root\":-1,\"wan_bytes_per_rank\":2048.5,\"out_of_place\""),
            std::string::npos);
  const RunInfo odd{"t\"ool", "x", 1, "a\\b", "c\nd", ""};
  const std::string doc = format_json(odd, {});
  EXPECT_NE(doc.find("\"t\\\"ool\""), std::string::npos);
  EXPECT_NE(doc.find("\"a\\\\b\""), std::string::npos);
  EXPECT_NE(doc.find("\"c\\nd\""), std::string::npos);
}

namespace {

// Combines every rank's filled buffer the way the library's kernels do (16-bit floats
// widen to f32 and round after each step; integers wrap), then counts wrong elements.
std::int64_t simulate_allreduce(DataType dt, ReduceOp op, int nranks, std::size_t count,
                                bool corrupt_one = false) {
  const Pattern p(nranks, op, 3);
  const std::size_t ts = dtype_size(dt);
  std::vector<std::vector<std::byte>> in(static_cast<std::size_t>(nranks), std::vector<std::byte>(count * ts));
  for (int r = 0; r < nranks; ++r) fill(in[static_cast<std::size_t>(r)].data(), dt, count, p, r, 0);
  std::vector<std::byte> out(count * ts);
  for (std::size_t i = 0; i < count; ++i) {
    double acc = 0;
    for (int r = 0; r < nranks; ++r) {
      const std::byte* e = in[static_cast<std::size_t>(r)].data() + i * ts;
      double v = 0;
      switch (dt) {
        case DataType::f32: { float f; std::memcpy(&f, e, 4); v = f; break; }
        case DataType::f16: { std::uint16_t h; std::memcpy(&h, e, 2); v = core::f16_to_float(h); break; }
        case DataType::bf16: { std::uint16_t h; std::memcpy(&h, e, 2); v = core::bf16_to_float(h); break; }
        case DataType::i8: v = static_cast<double>(static_cast<std::int8_t>(*e)); break;
        default: ADD_FAILURE() << "type not simulated"; return -1;
      }
      if (r == 0) { acc = v; continue; }
      switch (op) {
        case ReduceOp::sum: case ReduceOp::avg: acc += v; break;
        case ReduceOp::prod: acc *= v; break;
        case ReduceOp::min: acc = std::min(acc, v); break;
        case ReduceOp::max: acc = std::max(acc, v); break;
      }
      if (dt == DataType::i8) acc = static_cast<std::int8_t>(static_cast<std::int64_t>(acc));
      if (dt == DataType::f16) acc = core::f16_to_float(core::float_to_f16(static_cast<float>(acc)));
      if (dt == DataType::bf16) acc = core::bf16_to_float(core::float_to_bf16(static_cast<float>(acc)));
    }
    if (op == ReduceOp::avg) acc = static_cast<float>(acc) / static_cast<float>(nranks);
    std::byte* o = out.data() + i * ts;
    switch (dt) {
      case DataType::f32: { const float f = static_cast<float>(acc); std::memcpy(o, &f, 4); break; }
      case DataType::f16: { const auto h = core::float_to_f16(static_cast<float>(acc)); std::memcpy(o, &h, 2); break; }
      case DataType::bf16: { const auto h = core::float_to_bf16(static_cast<float>(acc)); std::memcpy(o, &h, 2); break; }
      default: *o = static_cast<std::byte>(static_cast<std::int8_t>(static_cast<std::int64_t>(acc))); break;
    }
  }
  if (corrupt_one) out[ts * (count / 2)] ^= std::byte{0x40};
  return count_wrong(out.data(), dt, count, p, Expect{});
}

}  // namespace

TEST(PerfData, ReductionsOfThePatternAreExactInEveryType) {
  for (const DataType dt : {DataType::f32, DataType::f16, DataType::bf16, DataType::i8}) {
    for (const ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max}) {
      for (const int n : {1, 2, 3, 7, 8, 33, 64, 200}) {
        EXPECT_EQ(simulate_allreduce(dt, op, n, 1000), 0)
            << to_string(dt) << " " << to_string(op) << " n=" << n;
      }
    }
  }
  for (const DataType dt : {DataType::f32, DataType::f16, DataType::bf16})
    for (const int n : {2, 3, 6, 64}) EXPECT_EQ(simulate_allreduce(dt, ReduceOp::avg, n, 1000), 0);
}

TEST(PerfData, CorruptionIsCounted) {
  EXPECT_EQ(simulate_allreduce(DataType::f32, ReduceOp::sum, 4, 100, true), 1);
  EXPECT_EQ(simulate_allreduce(DataType::i8, ReduceOp::max, 4, 100, true), 1);
  std::vector<float> poisoned(10);
  std::memset(poisoned.data(), 0xff, sizeof(float) * poisoned.size());
  EXPECT_EQ(count_wrong(poisoned.data(), DataType::f32, 10, Pattern(2, ReduceOp::sum, 0), Expect{}), 10);
}

TEST(PerfData, GatheredAndFromRankExpectations) {
  const Pattern p(3, ReduceOp::sum, 1);
  const std::size_t block = 17;
  std::vector<std::int32_t> gathered(3 * block);
  for (int r = 0; r < 3; ++r) fill(gathered.data() + r * block, DataType::i32, block, p, r, 0);
  Expect e;
  e.kind = Expect::Kind::gathered;
  e.block = block;
  EXPECT_EQ(count_wrong(gathered.data(), DataType::i32, gathered.size(), p, e), 0);
  std::swap(gathered[0], gathered[block]);  // blocks in the wrong order
  EXPECT_GT(count_wrong(gathered.data(), DataType::i32, gathered.size(), p, e), 0);

  std::vector<std::int64_t> from(block);
  fill(from.data(), DataType::i64, block, p, 2, 5);
  Expect f;
  f.kind = Expect::Kind::from_rank;
  f.rank = 2;
  f.first = 5;
  EXPECT_EQ(count_wrong(from.data(), DataType::i64, block, p, f), 0);
  f.rank = 1;
  EXPECT_GT(count_wrong(from.data(), DataType::i64, block, p, f), 0);
}

TEST(PerfData, ExchangedExpectationIsAlltoallsLayout) {
  // Rank 1 of 3 after an alltoall: block j holds rank j's elements [block, 2 block).
  const Pattern p(3, ReduceOp::sum, 1);
  const std::size_t block = 11;
  std::vector<float> recv(3 * block);
  for (int j = 0; j < 3; ++j) fill(recv.data() + j * block, DataType::f32, block, p, j, block);
  Expect e;
  e.kind = Expect::Kind::exchanged;
  e.block = block;
  e.first = block;
  EXPECT_EQ(count_wrong(recv.data(), DataType::f32, recv.size(), p, e), 0);
  e.first = 0;  // what rank 0 would expect
  EXPECT_GT(count_wrong(recv.data(), DataType::f32, recv.size(), p, e), 0);
  EXPECT_EQ(parse_collective("all_to_all"), Collective::alltoall);
  EXPECT_STREQ(collective_name(Collective::alltoall), "alltoall");
}

TEST(PerfData, TypeNamesAndExpansions) {
  EXPECT_STREQ(nccl_type_name(DataType::f32), "float");
  EXPECT_STREQ(nccl_type_name(DataType::bf16), "bfloat16");
  EXPECT_EQ(all_dtypes().size(), static_cast<std::size_t>(kNumDataTypes));
  EXPECT_EQ(all_ops().size(), static_cast<std::size_t>(kNumReduceOps));
  EXPECT_FALSE(op_supported(ReduceOp::avg, DataType::i32));
  EXPECT_TRUE(op_supported(ReduceOp::avg, DataType::f16));
  EXPECT_TRUE(op_supported(ReduceOp::prod, DataType::u8));
}

// A later flag overrides an earlier one (getopt's rule in nccl-tests): scripts/demo.sh puts
// its defaults first and the user's flags after them, which CLI11 refused by default
// ("--iters: At Most 1 required but received 2").
TEST(PerfOptions, LaterFlagsOverrideEarlierOnes) {
  std::vector<std::string> args = {"strata-perf", "-n", "5", "-w", "1", "-b", "4", "--transport", "ucx",
                                   "-n", "20", "--transport", "tcp", "-b", "1M"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  const ParsedOptions p = parse_perf_options(static_cast<int>(argv.size()), argv.data());
  ASSERT_TRUE(p.options.has_value()) << "exit code " << p.exit_code;
  EXPECT_EQ(p.options->iters, 20);
  EXPECT_EQ(p.options->warmup_iters, 1);
  EXPECT_EQ(p.options->min_bytes, 1u << 20);
  EXPECT_EQ(p.options->transport, "tcp");
}

TEST(PerfOptions, BySizeTakesTheAlgorithmsInTurns) {
  std::vector<std::string> args = {"strata-perf", "--algo", "all+auto", "--by-size"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  const ParsedOptions p = parse_perf_options(static_cast<int>(argv.size()), argv.data());
  ASSERT_TRUE(p.options.has_value()) << "exit code " << p.exit_code;
  EXPECT_TRUE(p.options->by_size);
  EXPECT_FALSE(p.options->interleave);  // --interleave places ranks in regions: another flag
  const auto algos = algorithms_to_run(*p.options, [](CollectiveKind, DataType) {
    return std::vector<std::string>{"ring", "direct"};
  });
  EXPECT_EQ(algos, (std::vector<std::string>{"ring", "direct", ""}));  // the library's choice last at each size
}
