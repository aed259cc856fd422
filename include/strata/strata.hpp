// Umbrella header for the C++ API.
#pragma once

#include "strata/communicator.hpp"
#include "strata/errors.hpp"
#include "strata/options.hpp"
#include "strata/server.hpp"
#include "strata/types.hpp"
#include "strata/work.hpp"
