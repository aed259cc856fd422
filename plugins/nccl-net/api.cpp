#include "api.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "config.hpp"
#include "comm.hpp"
#include "connector.hpp"
#include "devices.hpp"
#include "errors.hpp"
#include "listen_comm.hpp"
#include "log.hpp"
#include "socket.hpp"
#include "wire.hpp"

namespace strata::nccl_net::api {

namespace {

// Process-wide, read-only after the first successful init.
struct Global {
  std::mutex mu;
  bool ready = false;
  Config config;
  std::vector<Device> devices;
};

Global& global() {
  static Global* g = new Global;  // never destroyed: proxy threads may outlive static destructors
  return *g;
}

const Global& initialized() {
  Global& g = global();
  std::lock_guard lock(g.mu);
  if (!g.ready) misuse("called before init");
  return g;
}

const Device& device(int dev) {
  const Global& g = initialized();
  if (dev < 0 || static_cast<std::size_t>(dev) >= g.devices.size())
    throw NetError(abi::invalid_argument, "device " + std::to_string(dev) + " does not exist (" +
                                              std::to_string(g.devices.size()) + " devices)");
  return g.devices[static_cast<std::size_t>(dev)];
}

struct Context {  // v11's per-communicator ctx
  static constexpr std::uint32_t kLive = 0x43525453;  // "STRC"
  std::uint32_t magic = kLive;
  std::uint64_t comm_id;
  int traffic_class;
};

struct MemHandle {  // regMr's token: host memory needs no pinning or keys
  static constexpr std::uint32_t kLive = 0x4D525453;  // "STRM"
  std::uint32_t magic = kLive;
  void* data;
  std::size_t size;
};

template <class T>
T& comm_of(void* p, Comm::Kind kind, const char* what) {
  if (!Comm::is(p, kind)) misuse(std::string("not a live ") + what + " comm");
  return *static_cast<T*>(p);
}

void clear_dev_comm(abi::DeviceHandle** dev_comm) {
  if (dev_comm) *dev_comm = nullptr;  // host plugin: no device offload
}

}  // namespace

abi::Result init(void** ctx, std::uint64_t comm_id, int traffic_class, abi::Logger logger) noexcept {
  log::set_logger(logger);
  return guarded("init", [&] {
    if (ctx) *ctx = nullptr;
    Global& g = global();
    {
      std::lock_guard lock(g.mu);
      if (!g.ready) {
        g.config = read_config();
        keep_sockets_alive(g.config.keepalive, g.config.stall);
        plugin_tls();  // a TLS setting that cannot be used fails init, not the first connection
        g.devices = discover_devices(g.config);
        g.ready = true;
        log::info("initialized: %zu device(s), region '%s', %d stream(s) to other regions, "
                  "host memory only", g.devices.size(), g.config.region.c_str(), g.config.wan_streams);
      }
    }
    if (ctx) *ctx = new Context{Context::kLive, comm_id, traffic_class};
  });
}

abi::Result finalize(void* ctx) noexcept {
  return guarded("finalize", [&] {
    // NCCL also finalizes after a failed init, with whatever ctx that left: null here.
    if (!ctx) return;
    auto* c = static_cast<Context*>(ctx);
    if (c->magic != Context::kLive) misuse("finalize of an unknown context");
    c->magic = 0;
    delete c;
  });
}

abi::Result devices(int* ndev) noexcept {
  return guarded("devices", [&] {
    if (!ndev) misuse("devices(nullptr)");
    *ndev = static_cast<int>(initialized().devices.size());
  });
}

abi::Result get_properties(int dev, abi::PropertiesV11* props) noexcept {
  return guarded("getProperties", [&] {
    if (!props) misuse("getProperties with a null properties pointer");
    *props = device(dev).props;
  });
}

abi::Result listen(void* /*ctx*/, int dev, void* handle, void** listen_comm) noexcept {
  return guarded("listen", [&] {
    if (!handle || !listen_comm) misuse("listen with a null handle or comm pointer");
    *listen_comm = nullptr;
    const Device& d = device(dev);
    auto comm = std::make_unique<ListenComm>(d, initialized().config);
    std::memset(handle, 0, abi::kHandleMaxSize);
    std::memcpy(handle, &comm->handle(), sizeof(ListenHandle));
    *listen_comm = comm.release();
  });
}

abi::Result connect(void* /*ctx*/, int dev, void* handle, void** send_comm,
                    abi::DeviceHandle** dev_comm) noexcept {
  return guarded("connect", [&] {
    if (!handle || !send_comm) misuse("connect with a null handle or comm pointer");
    *send_comm = nullptr;
    clear_dev_comm(dev_comm);
    (void)device(dev);  // the kernel routes; the device only has to exist
    ListenHandle h;
    std::memcpy(&h, handle, sizeof h);
    check_handle(h);
    auto comm = connect_step(h, initialized().config);
    std::memcpy(handle, &h, sizeof h);  // carries connect_id to the next call
    *send_comm = comm.release();
  });
}

abi::Result accept(void* listen_comm, void** recv_comm, abi::DeviceHandle** dev_comm) noexcept {
  return guarded("accept", [&] {
    if (!recv_comm) misuse("accept with a null comm pointer");
    *recv_comm = nullptr;
    clear_dev_comm(dev_comm);
    auto& l = comm_of<ListenComm>(listen_comm, Comm::Kind::listen, "listen");
    std::lock_guard lock(l.mu);
    *recv_comm = l.accept().release();
  });
}

abi::Result reg_mr(void* /*comm*/, void* data, std::size_t size, int type, void** mhandle) noexcept {
  return guarded("regMr", [&] {
    if (!mhandle) misuse("regMr with a null handle pointer");
    *mhandle = nullptr;
    if (type != abi::kPtrHost)
      misuse("regMr of memory type " + std::to_string(type) + ": only host memory (NCCL_PTR_HOST) is supported");
    *mhandle = new MemHandle{MemHandle::kLive, data, size};
  });
}

abi::Result reg_mr_dmabuf(void*, void*, std::size_t, int, std::uint64_t, int, void** mhandle) noexcept {
  return guarded("regMrDmaBuf", [&] {
    if (mhandle) *mhandle = nullptr;
    misuse("regMrDmaBuf: DMA-BUF is not supported (ptrSupport is host only)");
  });
}

abi::Result dereg_mr(void* /*comm*/, void* mhandle) noexcept {
  return guarded("deregMr", [&] {
    if (!mhandle) return;
    auto* m = static_cast<MemHandle*>(mhandle);
    if (m->magic != MemHandle::kLive) misuse("deregMr of an unknown handle");
    m->magic = 0;
    delete m;
  });
}

abi::Result isend(void* send_comm, void* data, std::size_t size, int tag, void* /*mhandle*/,
                  void** request) noexcept {
  return guarded("isend", [&] {
    if (!request) misuse("isend with a null request pointer");
    *request = nullptr;
    auto& c = comm_of<TransferComm>(send_comm, Comm::Kind::send, "send");
    std::lock_guard lock(c.mu);
    *request = post_send(c, data, size, tag);
  });
}

abi::Result irecv(void* recv_comm, int n, void** data, const std::size_t* sizes, int* tags,
                  void** /*mhandles*/, void** request) noexcept {
  return guarded("irecv", [&] {
    if (!request) misuse("irecv with a null request pointer");
    // *request may hold NCCL_NET_OPTIONAL_RECV_COMPLETION on entry; a real request is
    // always returned and completes when the data is in place, which is always correct.
    *request = nullptr;
    auto& c = comm_of<TransferComm>(recv_comm, Comm::Kind::recv, "receive");
    std::lock_guard lock(c.mu);
    *request = post_recv(c, n, data, sizes, tags);
  });
}

abi::Result iflush(void* recv_comm, int /*n*/, void** /*data*/, int* /*sizes*/, void** /*mhandles*/,
                   void** request) noexcept {
  return guarded("iflush", [&] {
    // Only called after GPUDirect receives, which a host-only plugin never does. Host
    // memory needs no flush, so answer with a request that is already complete.
    if (!request) misuse("iflush with a null request pointer");
    *request = nullptr;
    auto& c = comm_of<TransferComm>(recv_comm, Comm::Kind::recv, "receive");
    std::lock_guard lock(c.mu);
    c.check();
    *request = c.flush_request();
  });
}

abi::Result test(void* request, int* done, int* sizes) noexcept {
  return guarded("test", [&] {
    if (!done) misuse("test with a null done pointer");
    *done = 0;
    auto* r = static_cast<Request*>(request);
    if (!r || r->magic != Request::kLive) misuse("test of an unknown or finished request");
    TransferComm& c = *r->owner;
    std::lock_guard lock(c.mu);
    if (!r->done) c.poll();
    if (!r->done) {
      c.check();
      return;
    }
    // NCCL passes an int array for receives, &size for sends, and null for flushes.
    if (sizes) {
      if (r->n == 0)
        sizes[0] = static_cast<int>(r->size);
      else
        for (int i = 0; i < r->n; ++i) sizes[i] = static_cast<int>(r->slots[i].bytes);
    }
    *done = 1;
    c.release(r);  // NCCL never tests a request again after done
  });
}

abi::Result close_send(void* send_comm) noexcept {
  return guarded("closeSend", [&] {
    if (!send_comm) return;
    auto* c = &comm_of<TransferComm>(send_comm, Comm::Kind::send, "send");
    { std::lock_guard lock(c->mu); }  // let a call in progress on another thread finish
    destroy(c);
  });
}

abi::Result close_recv(void* recv_comm) noexcept {
  return guarded("closeRecv", [&] {
    if (!recv_comm) return;
    auto* c = &comm_of<TransferComm>(recv_comm, Comm::Kind::recv, "receive");
    { std::lock_guard lock(c->mu); }
    destroy(c);
  });
}

abi::Result close_listen(void* listen_comm) noexcept {
  return guarded("closeListen", [&] {
    if (!listen_comm) return;
    auto* c = &comm_of<ListenComm>(listen_comm, Comm::Kind::listen, "listen");
    { std::lock_guard lock(c->mu); }
    delete c;
  });
}

}  // namespace strata::nccl_net::api
