// Writes the seed corpus of every fuzz target (tests/fuzz/corpus/<target>/): small valid
// inputs made with the library's own encoders, so each fuzzer starts past the magic
// numbers and checksums. The seeds are committed; run this again when a format changes:
//   build/tests/fuzz/make_fuzz_seeds tests/fuzz/corpus
#include <netinet/in.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "bootstrap.pb.h"
#include "bootstrap/handshake.hpp"
#include "bootstrap/store_protocol.hpp"
#include "handle.hpp"
#include "collectives/ps_protocol.hpp"
#include "quant/codec.hpp"
#include "quant/error_feedback.hpp"
#include "topology/figures.hpp"
#include "link/crc32c.hpp"
#include "link/frame.hpp"

namespace fs = std::filesystem;
using namespace strata;
using Bytes = std::string;

namespace {

fs::path root;

void seed(const std::string& target, const std::string& name, const Bytes& bytes) {
  const fs::path dir = root / target;
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <class T>
Bytes raw(const T& v) {
  return Bytes(reinterpret_cast<const char*>(&v), sizeof v);
}

Bytes store_frame(bootstrap::wire::StoreRequest::Op op, const std::vector<std::string>& keys,
                  const std::string& value = "", std::int64_t delta = 0, std::uint32_t timeout_ms = 0) {
  bootstrap::wire::StoreRequest r;
  r.set_op(op);
  for (const auto& k : keys) r.add_keys(k);
  r.set_value(value);
  r.set_delta(delta);
  r.set_timeout_ms(timeout_ms);
  return bootstrap::encode_frame(r);
}

void store_seeds() {
  using R = bootstrap::wire::StoreRequest;
  seed("store_protocol", "set_get", store_frame(R::SET, {"rank/0"}, "record") + store_frame(R::GET, {"rank/0"}));
  seed("store_protocol", "get_missing", store_frame(R::GET, {"rank/0", "rank/1"}, "", 0, 50));
  seed("store_protocol", "add", store_frame(R::ADD, {"counter"}, "", 3) + store_frame(R::ADD, {"counter"}, "", -1));
  seed("store_protocol", "overwrite", store_frame(R::SET, {"k"}, std::string(3000, 'a')) +
                                          store_frame(R::SET, {"k"}, "b") + store_frame(R::GET, {"k", "k", "k"}));
}

// A well-formed hello of the job's handshake, from a dialer that guessed the secret.
Bytes stranger_hello(bootstrap::auth::Channel ch) {
  bootstrap::auth::Dialer d(bootstrap::JobSecret::from_text("a guess"), ch, {});
  return Bytes(reinterpret_cast<const char*>(d.hello().data()), d.hello().size());
}

// The handshake target: selector byte (channel, payload size), hello, proof, challenge.
void handshake_seeds() {
  using bootstrap::auth::Channel;
  seed("handshake", "tcp_hello", Bytes(1, '\x21') + stranger_hello(Channel::tcp) + Bytes(36, 'p') + Bytes(48, 'c'));
  seed("handshake", "store_hello", Bytes(1, '\x00') + stranger_hello(Channel::store) + Bytes(32, 'p'));
  seed("handshake", "short", Bytes(1, '\x42') + stranger_hello(Channel::wan).substr(0, 10));
}

// TCP transport: flags byte, then frames of (tag, bytes) + payload (the harness proves
// itself first); with flag 8, bytes for the job's handshake as a stranger sends them.
Bytes tcp_frame(std::uint64_t tag, const std::string& payload) {
  return raw(tag) + raw(static_cast<std::uint64_t>(payload.size())) + payload;
}

void tcp_seeds() {
  seed("tcp_transport", "matched", Bytes(1, '\x07') + tcp_frame(0, "") + tcp_frame(1, "hello") +
                                       tcp_frame(2, std::string(1000, 'x')));
  seed("tcp_transport", "unexpected", Bytes(1, '\x00') + tcp_frame(9, "abc") + tcp_frame(9, "defg"));
  seed("tcp_transport", "truncated", Bytes(1, '\x02') + tcp_frame(1, std::string(200, 'y')));
  seed("tcp_transport", "huge_header", Bytes(1, '\x05') + raw(std::uint64_t{3}) + raw(std::uint64_t{1} << 40));
  seed("tcp_transport", "stranger", Bytes(1, '\x08') + stranger_hello(bootstrap::auth::Channel::tcp) + Bytes(36, '\x01'));
}

// WAN link, sealed mode: selector, kind, length, seq, msg_id, offset, total, tag (49 bytes).
Bytes wan_record(std::uint8_t kind, std::uint32_t length, std::uint64_t seq, std::uint64_t msg, std::uint64_t offset,
                 std::uint64_t total, std::uint64_t tag, const std::string& payload = "") {
  return Bytes(1, static_cast<char>(kind)) + raw(std::uint32_t{0}) + raw(length) + raw(seq) + raw(msg) + raw(offset) +
         raw(total) + raw(tag) + payload;
}

void wan_seeds() {
  const std::string a(100, 'a'), b(60, 'b');
  // Inbound: a message in two stripes, then a second message, then a goodbye.
  seed("wan_link", "inbound", Bytes("\x05\x00", 2) + wan_record(0, 100, 1, 0, 0, 160, 0, a) +
                                  wan_record(0, 60, 2, 0, 100, 160, 0, b) + wan_record(0, 5, 3, 1, 0, 5, 4, "hello") +
                                  wan_record(2, 0, 0, 2, 0, 0, 0));
  seed("wan_link", "inbound_out_of_order", Bytes("\x01\x01", 2) + wan_record(0, 5, 1, 3, 0, 5, 0, "later") +
                                               wan_record(0, 5, 2, 0, 0, 5, 0, "first"));
  seed("wan_link", "huge_total", Bytes("\x01\x00", 2) + wan_record(0, 16, 1, 1, 0, std::uint64_t{1} << 40, 0,
                                                                   std::string(16, 'z')));
  // Outbound: acknowledgements for the transport's two stripes, then goodbyes.
  seed("wan_link", "acks", Bytes("\x03\x00", 2) + wan_record(1, 0, 1, 0, 0, 0, 0) + wan_record(1, 0, 2, 0, 0, 0, 0) +
                               wan_record(1, 0, 1, 0, 0, 0, 0) + wan_record(2, 0, 0, 0, 0, 0, 0));
  seed("wan_link", "acks_delayed", Bytes("\x0b\x00", 2) + wan_record(1, 0, 1, 0, 0, 0, 0) + wan_record(2, 0, 0, 1, 0, 0, 0));
  // Raw mode: one frame sealed here, after the harness proved itself.
  link::FrameHeader h;
  h.kind = link::FrameKind::data;
  h.length = 4;
  h.seq = 1;
  h.total = 4;
  const auto header = link::seal(h, link::crc32c("data", 4));
  seed("wan_link", "raw", Bytes("\x04\x00", 2) + Bytes(reinterpret_cast<const char*>(header.data()), header.size()) + "data");
  // A stranger: a hello for the WAN link, then a proof made with a secret it guessed.
  seed("wan_link", "stranger", Bytes("\x10\x00", 2) + stranger_hello(bootstrap::auth::Channel::wan) + Bytes(40, '\x02'));
}

void codec_seeds() {
  std::mt19937 gen(7);
  std::normal_distribution<float> d(0, 1);
  std::vector<float> v(1500);
  for (auto& x : v) x = d(gen);
  for (const char* spec : {"fp16", "bf16", "int8", "int4,stochastic", "topk:0.01", "topk:0.05+int8",
                           "topk:0.2+fp16,exact", "topk:0.5+int4", "topk:1+bf16"}) {
    std::vector<std::byte> out;
    quant::make_codec(spec)->encode(v, out, 3);
    std::string name = spec;
    for (auto& c : name)
      if (c == ':' || c == '+' || c == ',' || c == '.') c = '_';
    seed("codec", name, Bytes(reinterpret_cast<const char*>(out.data()), out.size()));
  }
}

void residual_seeds() {
  quant::ErrorFeedback ef;
  std::vector<float> sent(64, 1.5f), decoded(64, 1.0f);
  ef.update("layer1.weight", {0, 64}, sent, decoded);
  ef.update("layer1.weight", {64, 32}, std::span<const float>(sent).first(32), std::span<const float>(decoded).first(32));
  ef.update("bias", {0, 8}, std::span<const float>(sent).first(8), std::span<const float>(decoded).first(8));
  const auto snap = ef.save();
  const Bytes body(reinterpret_cast<const char*>(snap.data()), snap.size());
  seed("residuals", "snapshot_exact", Bytes(1, '\x00') + body);
  seed("residuals", "snapshot_fixed_sum", Bytes(1, '\x01') + body);
  quant::ErrorFeedback empty;
  const auto e = empty.save();
  seed("residuals", "empty", Bytes(1, '\x00') + Bytes(reinterpret_cast<const char*>(e.data()), e.size()));
}

void topology_seeds(const fs::path& topologies) {
  for (const auto& f : fs::directory_iterator(topologies)) {
    std::ifstream in(f.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    seed("topology_file", f.path().stem().string(), Bytes(1, '\x09') + text);  // world size 8
    seed("topology_file", f.path().stem().string() + "_any", Bytes(1, '\x00') + text);
  }
}

void config_seeds() {
  const char* strings[] = {"rate=200mbit,delay=25ms,window=4m,loss=0.001", "cut=5,corrupt=0.01",
                           "topk:0.01+int8", "topk:0.001+fp16,exact", "int4,stochastic", "none",
                           "allreduce:0-64k:recursive_doubling#64k-inf:ring", "hier", "flat",
                           "127.0.0.1:29500", "[::1]:80", "strata1|127.0.0.1:4000|0123456789abcdef"};
  int i = 0;
  for (const char* s : strings) seed("config_strings", "s" + std::to_string(i++), s);
}

void record_seeds() {
  topology::Measured m;
  m.gamma = 2.5e-10;
  topology::PairResult shm;
  shm.pair = {topology::LinkClass::shm, 0, 1, -1, -1, {}};
  shm.cost = {1e-6, 1e-10, 2e-7};
  shm.beta_measured = shm.gap_measured = true;
  shm.small_iters = 40;
  shm.large_iters = 4;
  topology::PairResult wan = shm;
  wan.pair = {topology::LinkClass::wan, 0, 4, 0, 1, {}};
  wan.cost = {0.025, 4e-8, 1e-5};
  m.pairs = {shm, wan};
  seed("bootstrap_records", "measured", topology::serialize(m));
  bootstrap::wire::RankRecord rec;
  rec.set_rank(3);
  rec.set_host("node0");
  rec.set_region("us-east");
  rec.set_pid(1234);
  seed("bootstrap_records", "rank_record", rec.SerializeAsString());
}

void ps_seeds() {
  ps::PushHeader h;
  h.op = ps::Op::allreduce;
  h.dtype = DataType::f32;
  h.count = 100003;
  h.chunk_bytes = 1 << 16;
  seed("ps_header", "allreduce", raw(h) + Bytes("\x03\x01", 2));
  h.op = ps::Op::reduce_scatter;
  h.dtype = DataType::f16;
  h.reduce = ReduceOp::avg;
  h.count = 7;
  h.chunk_bytes = 4;
  seed("ps_header", "reduce_scatter", raw(h) + Bytes("\x05\x02", 2));
}

void plugin_seeds() {
  sockaddr_storage addr{};
  auto* in4 = reinterpret_cast<sockaddr_in*>(&addr);
  in4->sin_family = AF_INET;
  in4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const nccl_net::ListenHandle handle = nccl_net::make_handle(addr, 5000, 0x1234, "us-east");
  nccl_net::Hello hello{};
  hello.magic = nccl_net::Hello::kMagic;
  hello.version = nccl_net::Hello::kVersion;
  hello.flags = nccl_net::kChecksum | nccl_net::kAcks;
  hello.stream_count = 4;
  hello.stream_index = 2;
  hello.listen_nonce = 0x1234;
  hello.conn_id = 99;
  const nccl_net::UcxAddressHeader answer{nccl_net::UcxAddressHeader::kMagic, 7, 300, 0};
  seed("nccl_plugin", "striped", raw(handle) + raw(hello) + raw(answer));
  hello.flags = nccl_net::kUcx;
  hello.stream_count = 1;
  hello.stream_index = 0;
  seed("nccl_plugin", "ucx", raw(handle) + raw(hello) + raw(answer));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: make_fuzz_seeds CORPUS_DIR TOPOLOGY_DIR\n";
    return 2;
  }
  root = argv[1];
  store_seeds();
  handshake_seeds();
  tcp_seeds();
  wan_seeds();
  codec_seeds();
  residual_seeds();
  topology_seeds(argv[2]);
  config_seeds();
  record_seeds();
  ps_seeds();
  plugin_seeds();
  std::cout << "seeds written under " << root << "\n";
  return 0;
}
