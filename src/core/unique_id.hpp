#pragma once

#include <string>

#include "bootstrap/job_secret.hpp"
#include "strata/communicator.hpp"

namespace strata::detail {

struct ParsedId {
  std::string root;   // host:port of the store the id's creator serves
  std::string nonce;  // separates communicators created from different ids
  bootstrap::JobSecret secret;
};

// Throws InvalidArgument when the bytes are not an id made by UniqueId::create.
ParsedId parse_unique_id(const UniqueId& id);

}  // namespace strata::detail
