// The harness's view of a loaded plugin: one interface over whichever ncclNetPlugin_vN
// table was dlsym'd, so every test drives every version the same way. It calls the
// table exactly as NCCL 2.28 would for that version (v8: int sizes; v10: a connect
// config; v11: a per-communicator ctx and finalize).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace strata::plugin_test {

struct Props {
  std::string name;
  bool has_pci_path = false;
  int ptr_support = 0, reg_is_global = 0, speed = 0, max_comms = 0, max_recvs = 0;
  int device_type = -1, device_version = -1;
  float latency = -1;
  std::size_t max_p2p_bytes = 0;   // v9+ (0 before)
  int max_multi_request_size = -1;  // v11 (-1 before)
  int vdev_count = -1;              // v9+
};

class NetApi {
 public:
  virtual ~NetApi() = default;
  virtual int version() const = 0;
  virtual const char* name() const = 0;
  // ctx is set for v11 only; finalize is a no-op before v11.
  virtual int init(void** ctx) = 0;
  virtual int finalize(void* ctx) = 0;
  virtual int devices(int* ndev) = 0;
  virtual int properties(int dev, Props* props) = 0;  // props == nullptr passes null on
  virtual int listen(void* ctx, int dev, void* handle, void** comm) = 0;
  virtual int connect(void* ctx, int dev, void* handle, void** comm) = 0;
  virtual int accept(void* listen_comm, void** comm) = 0;
  virtual int reg_mr(void* comm, void* data, std::size_t size, int type, void** mhandle) = 0;
  virtual int dereg_mr(void* comm, void* mhandle) = 0;
  virtual int isend(void* comm, void* data, std::size_t size, int tag, void* mhandle, void** request) = 0;
  virtual int irecv(void* comm, int n, void** data, std::size_t* sizes, int* tags, void** mhandles,
                    void** request) = 0;
  virtual int test(void* request, int* done, int* sizes) = 0;
  virtual int close_send(void* comm) = 0;
  virtual int close_recv(void* comm) = 0;
  virtual int close_listen(void* comm) = 0;
};

// dlopen(path, RTLD_NOW | RTLD_LOCAL) as NCCL does, then the table for `version`.
// Throws std::runtime_error naming what is missing.
std::unique_ptr<NetApi> load_plugin(const std::string& path, int version);

// Whether the plugin exports ncclNetPlugin_v<version> at all.
bool exports_version(const std::string& path, int version);

// Lines the plugin logged through the logger the harness passed to init.
std::vector<std::string> logged_lines();
// The first line the plugin logged that contains needle, or "".
std::string logged_line(const std::string& needle);
bool logged(const std::string& needle);

}  // namespace strata::plugin_test
