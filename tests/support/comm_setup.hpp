// The Setup of a CommImpl that a multiprocess test creates directly (to read its plan,
// selector or tuner): rank 0 serves the rendezvous at `root`, over TCP unless told.
#pragma once

#include <string>

#include "core/comm_impl.hpp"

namespace strata::test {

inline detail::CommImpl::Setup comm_setup(int rank, int size, const std::string& root,
                                          TransportKind transport = TransportKind::tcp) {
  detail::CommImpl::Setup s;
  s.rank = rank;
  s.size = size;
  s.root = root;
  s.key_prefix = "strata/";
  s.serve_root = true;
  s.options.transport = transport;
  return s;
}

}  // namespace strata::test
