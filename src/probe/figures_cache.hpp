// Rank 0's cache of measured figures: one file per key (the layout, the fabric and what
// shapes it), so creating the same communicator again does not probe again. A cache is an
// optimisation: any failure to read or write it reads as a miss. Only a directory that is
// this user's own and private is used, and only a regular file of at most kMaxCacheFile
// bytes is read (rank 0 hands it to every rank through the store); a warning says why not.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "topology/figures.hpp"

namespace strata::probe {

// Far above any real cache (a few KiB even with a WAN matrix of many regions), and well
// under the store's largest value.
inline constexpr std::size_t kMaxCacheFile = 256u << 10;

// Where key's figures live: $XDG_CACHE_HOME/strata, else /tmp/strata-cache-<uid>.
std::string cache_path(const std::string& key);
// The figures stored under key at path, unless older than max_age_s, written for another
// key (a hash collision) or malformed.
std::optional<topology::Measured> read_cache(const std::string& path, const std::string& key, double max_age_s);
// Written aside and renamed, so a concurrent reader sees the old file or the new one.
void write_cache(const std::string& path, const std::string& key, const topology::Measured& m);

}  // namespace strata::probe
