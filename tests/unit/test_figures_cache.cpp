// The probe's cache of figures (probe/figures_cache.hpp) is used only where it is this
// user's own and private, and a file that is not a cache of figures is ignored.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "probe/figures_cache.hpp"
#include "temp_dir.hpp"

namespace strata::probe {
namespace {

class FiguresCache : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("XDG_CACHE_HOME", home.path().c_str(), 1);
    m.gamma = 1.5e-10;
  }
  void TearDown() override { ::unsetenv("XDG_CACHE_HOME"); }
  std::string dir() const { return home.path() + "/strata"; }

  test::TempDir home;
  topology::Measured m;
  const std::string key = "size=2 transport=tcp";
};

TEST_F(FiguresCache, RoundTripsInAPrivateDirectoryItMakes) {
  const std::string path = cache_path(key);
  write_cache(path, key, m);
  struct stat st {};
  ASSERT_EQ(::stat(dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const auto back = read_cache(path, key, 3600);
  ASSERT_TRUE(back.has_value());
  EXPECT_DOUBLE_EQ(back->gamma, m.gamma);
  EXPECT_FALSE(read_cache(path, "size=3 transport=tcp", 3600).has_value());  // another key
}

TEST_F(FiguresCache, ADirectoryOthersCanWriteIsNeitherReadNorWritten) {
  const std::string path = cache_path(key);
  write_cache(path, key, m);
  ASSERT_EQ(::chmod(dir().c_str(), 0777), 0);
  EXPECT_FALSE(read_cache(path, key, 3600).has_value());
  std::filesystem::remove(path);
  write_cache(path, key, m);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(FiguresCache, ADirectoryOfAnotherUserIsNotUsed) {
  if (::getuid() != 0) GTEST_SKIP() << "only root can give a directory to another user";
  const std::string path = cache_path(key);
  write_cache(path, key, m);
  ASSERT_EQ(::chown(dir().c_str(), 12345, 12345), 0);
  EXPECT_FALSE(read_cache(path, key, 3600).has_value());
}

TEST_F(FiguresCache, OversizedGarbageAndLinksAreIgnored) {
  const std::string path = cache_path(key);
  write_cache(path, key, m);
  std::ofstream(path, std::ios::app) << std::string(kMaxCacheFile, 'x');
  EXPECT_FALSE(read_cache(path, key, 3600).has_value());
  std::ofstream(path, std::ios::trunc) << "strata-probe 6\n" << key << "\nnot figures at all\n";
  EXPECT_FALSE(read_cache(path, key, 3600).has_value());
  const std::string elsewhere = home.path() + "/elsewhere.txt";
  write_cache(path, key, m);
  std::filesystem::rename(path, elsewhere);
  std::filesystem::create_symlink(elsewhere, path);
  EXPECT_FALSE(read_cache(path, key, 3600).has_value());
}

}  // namespace
}  // namespace strata::probe
