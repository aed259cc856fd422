#include "plugin_api.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include "nccl_abi.hpp"

namespace strata::plugin_test {

namespace abi = strata::nccl_net::abi;

namespace {

std::mutex g_log_mu;
std::vector<std::string> g_log;

void harness_logger(int level, unsigned long /*flags*/, const char* /*file*/, int /*line*/,
                    const char* fmt, ...) {
  char buf[2048];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  if (std::getenv("PLUGIN_TEST_VERBOSE") || level == abi::log_warn)
    std::fprintf(stderr, "[pid %d] %s %s\n", static_cast<int>(getpid()),
                 level == abi::log_warn ? "WARN" : "INFO", buf);
  std::lock_guard lock(g_log_mu);
  g_log.emplace_back(buf);
}

template <class P>
void copy_props(const P& p, Props* out) {
  out->name = p.name ? p.name : "";
  out->has_pci_path = p.pciPath != nullptr;
  out->ptr_support = p.ptrSupport;
  out->reg_is_global = p.regIsGlobal;
  out->speed = p.speed;
  out->latency = p.latency;
  out->max_comms = p.maxComms;
  out->max_recvs = p.maxRecvs;
  out->device_type = p.netDeviceType;
  out->device_version = p.netDeviceVersion;
  if constexpr (requires(P q) { q.maxP2pBytes; }) {
    out->max_p2p_bytes = p.maxP2pBytes;
    out->vdev_count = p.vProps.ndevs;
  }
  if constexpr (requires(P q) { q.maxMultiRequestSize; }) out->max_multi_request_size = p.maxMultiRequestSize;
}

template <class T, int V>
class TableApi final : public NetApi {
 public:
  TableApi(void* lib, const T* t) : lib_(lib), t_(t) {}
  ~TableApi() override { dlclose(lib_); }
  int version() const override { return V; }
  const char* name() const override { return t_->name; }

  int init(void** ctx) override {
    if (ctx) *ctx = nullptr;
    if constexpr (V == 8 || V == 9) return t_->init(harness_logger);
    else if constexpr (V == 10) return t_->init(harness_logger, nullptr);
    else {
      abi::CommConfig config{-1};
      return t_->init(ctx, 0x5eed, &config, harness_logger, nullptr);
    }
  }
  int finalize(void* ctx) override {
    if constexpr (V == 11) return t_->finalize(ctx);
    else return 0;
  }
  int devices(int* ndev) override { return t_->devices(ndev); }
  int properties(int dev, Props* props) override {
    using P = std::remove_pointer_t<typename FirstArg<decltype(t_->getProperties)>::type>;
    if (!props) return t_->getProperties(dev, nullptr);
    P p{};
    const int r = t_->getProperties(dev, &p);
    if (r == 0) copy_props(p, props);
    return r;
  }
  int listen(void* ctx, int dev, void* handle, void** comm) override {
    if constexpr (V == 11) return t_->listen(ctx, dev, handle, comm);
    else return t_->listen(dev, handle, comm);
  }
  int connect(void* ctx, int dev, void* handle, void** comm) override {
    abi::DeviceHandle* dev_comm = nullptr;
    if constexpr (V == 11) return t_->connect(ctx, dev, handle, comm, &dev_comm);
    else if constexpr (V == 10) {
      abi::CommConfig config{-1};
      return t_->connect(dev, &config, handle, comm, &dev_comm);
    } else {
      return t_->connect(dev, handle, comm, &dev_comm);
    }
  }
  int accept(void* listen_comm, void** comm) override {
    abi::DeviceHandle* dev_comm = nullptr;
    return t_->accept(listen_comm, comm, &dev_comm);
  }
  int reg_mr(void* comm, void* data, std::size_t size, int type, void** mhandle) override {
    return t_->regMr(comm, data, size, type, mhandle);
  }
  int dereg_mr(void* comm, void* mhandle) override { return t_->deregMr(comm, mhandle); }
  int isend(void* comm, void* data, std::size_t size, int tag, void* mhandle, void** request) override {
    if constexpr (V == 8) return t_->isend(comm, data, static_cast<int>(size), tag, mhandle, request);
    else if constexpr (V == 9) return t_->isend(comm, data, size, tag, mhandle, request);
    else return t_->isend(comm, data, size, tag, mhandle, nullptr, request);
  }
  int irecv(void* comm, int n, void** data, std::size_t* sizes, int* tags, void** mhandles,
            void** request) override {
    if constexpr (V == 8) {
      int narrow[64] = {};
      for (int i = 0; i < n && i < 64; ++i) narrow[i] = static_cast<int>(sizes[i]);
      return t_->irecv(comm, n, data, sizes ? narrow : nullptr, tags, mhandles, request);
    } else if constexpr (V == 9) {
      return t_->irecv(comm, n, data, sizes, tags, mhandles, request);
    } else {
      void* phandles[64] = {};
      return t_->irecv(comm, n, data, sizes, tags, mhandles, phandles, request);
    }
  }
  int test(void* request, int* done, int* sizes) override { return t_->test(request, done, sizes); }
  int close_send(void* comm) override { return t_->closeSend(comm); }
  int close_recv(void* comm) override { return t_->closeRecv(comm); }
  int close_listen(void* comm) override { return t_->closeListen(comm); }

 private:
  template <class F>
  struct FirstArg;
  template <class R, class A, class... Rest>
  struct FirstArg<R (*)(int, A, Rest...)> {
    using type = A;
  };
  void* lib_;
  const T* t_;
};

void* open_lib(const std::string& path) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) throw std::runtime_error(std::string("dlopen: ") + dlerror());
  return lib;
}

template <class T, int V>
std::unique_ptr<NetApi> make(void* lib) {
  const std::string symbol = "ncclNetPlugin_v" + std::to_string(V);
  auto* table = static_cast<const T*>(dlsym(lib, symbol.c_str()));
  if (!table) {
    dlclose(lib);
    throw std::runtime_error("the plugin does not export " + symbol);
  }
  return std::make_unique<TableApi<T, V>>(lib, table);
}

}  // namespace

std::unique_ptr<NetApi> load_plugin(const std::string& path, int version) {
  void* lib = open_lib(path);
  switch (version) {
    case 8: return make<abi::NetV8, 8>(lib);
    case 9: return make<abi::NetV9, 9>(lib);
    case 10: return make<abi::NetV10, 10>(lib);
    case 11: return make<abi::NetV11, 11>(lib);
    default: dlclose(lib); throw std::runtime_error("no such ABI version " + std::to_string(version));
  }
}

bool exports_version(const std::string& path, int version) {
  void* lib = open_lib(path);
  const bool found = dlsym(lib, ("ncclNetPlugin_v" + std::to_string(version)).c_str()) != nullptr;
  dlclose(lib);
  return found;
}

std::vector<std::string> logged_lines() {
  std::lock_guard lock(g_log_mu);
  return g_log;
}

std::string logged_line(const std::string& needle) {
  std::lock_guard lock(g_log_mu);
  for (const auto& l : g_log)
    if (l.find(needle) != std::string::npos) return l;
  return "";
}

bool logged(const std::string& needle) {
  std::lock_guard lock(g_log_mu);
  for (const auto& l : g_log)
    if (l.find(needle) != std::string::npos) return true;
  return false;
}

}  // namespace strata::plugin_test
