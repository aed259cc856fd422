// The settings registry's check of the environment: a STRATA_* variable nothing reads is
// named, with the new name of a renamed setting or the setting a typo resembles.
#include <gtest/gtest.h>

#include <string>

#include "core/config.hpp"
#include "collectives/dispatch.hpp"
#include "topology/cost_model.hpp"

namespace strata::config {
namespace {

TEST(UnknownVariables, SettingsAndTheLaunchersVariablesPassInSilence) {
  EXPECT_TRUE(unknown_variables({"STRATA_TIMEOUT_S=5", "STRATA_RANK=0", "STRATA_WORLD_SIZE=2", "PATH=/bin",
                                 "STRATA_BENCH_KEEP=1", "STRATA_TEST_STAGES=main", "HOME="})
                  .empty());
}

TEST(UnknownVariables, ARenamedSettingNamesItsNewName) {
  const auto lines = unknown_variables({"STRATA_SINGLE_COPY=0"});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "STRATA_SINGLE_COPY is set but strata reads no such variable: it was renamed STRATA_SHARED_MEMORY");
}

TEST(UnknownVariables, ATypoNamesTheSettingItResembles) {
  const auto lines = unknown_variables({"STRATA_HEARTBEAT=2", "STRATA_TIMOUT_S=9", "STRATA_NONSENSE_THING=1"});
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "STRATA_HEARTBEAT is set but strata reads no such variable; did you mean STRATA_HEARTBEAT_S?");
  EXPECT_EQ(lines[1], "STRATA_TIMOUT_S is set but strata reads no such variable; did you mean STRATA_TIMEOUT_S?");
  EXPECT_EQ(lines[2], "STRATA_NONSENSE_THING is set but strata reads no such variable");
}

TEST(UnknownVariables, EveryVariableTheRegistryNamesIsKnown) {
  std::vector<std::string> env;
  for (const auto& s : registry()) env.push_back(std::string(s.env) + "=x");
  EXPECT_TRUE(unknown_variables(env).empty());
}

// Code without a communicator's settings takes the registry's default as small.
TEST(Defaults, TheSmallSizeOutsideACommunicatorIsTheRegistrysDefault) {
  EXPECT_EQ(std::to_string(collectives::kDefaultSmallBytes),
            registry()[static_cast<std::size_t>(Id::small_bytes)].default_value);
  EXPECT_EQ(topology::default_figures().small_bytes, collectives::kDefaultSmallBytes);
  EXPECT_EQ(std::to_string(topology::default_figures().chunk_bytes),
            registry()[static_cast<std::size_t>(Id::chunk_bytes)].default_value);
}

}  // namespace
}  // namespace strata::config
