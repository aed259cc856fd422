// A job's rendezvous store (a UniqueId) served by a child process, so that the test
// process itself starts no threads before fork_ranks. UCX hooks mmap and munmap behind
// one process-wide lock from the moment it is loaded; a rank forked while another thread
// of the parent (a store serving the ranks forked before it) was inside one of them
// inherits that lock held, and its first ucp_init waits for it forever.
#pragma once

#include <sys/types.h>

#include "strata/strata.h"
#include "strata/strata.hpp"

namespace strata::test {

class StoreProcess {
 public:
  StoreProcess();   // forks; the child creates the id and serves its store until destroyed
  ~StoreProcess();  // ends the child and reaps it
  StoreProcess(const StoreProcess&) = delete;
  StoreProcess& operator=(const StoreProcess&) = delete;

  const UniqueId& id() const { return id_; }
  strataUniqueId c_id() const;

 private:
  void stop();

  pid_t pid_ = -1;
  int keep_alive_ = -1;  // the child serves until this pipe closes
  UniqueId id_;
};

}  // namespace strata::test
