// Umbrella header for the C++ API.
#pragma once

#include "strata/communicator.hpp"
#include "strata/errors.hpp"
#include "strata/locality.hpp"
#include "strata/options.hpp"
#include "strata/server.hpp"
#include "strata/store.hpp"
#include "strata/types.hpp"
#include "strata/work.hpp"
