// The process group and its collectives (see header). Only this file sees c10d and Gloo.
#include "headprune/util/dist.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <stdexcept>

#include "headprune/util/log.h"

#ifdef HP_HAVE_GLOO
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

namespace hp::dist {
namespace {

struct State {
  Env env;
  bool joined = false;
#ifdef HP_HAVE_GLOO
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
#endif
};

State& state() {
  static State s;
  return s;
}

// An integer launch variable; `fallback` when unset.
int env_int(const char* name, int fallback, int lo, int hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  if (errno || *end || x < lo || x > hi)
    throw std::invalid_argument(std::string(name) + "='" + v + "': expected an integer in [" + std::to_string(lo) +
                                ", " + std::to_string(hi) + "]");
  return static_cast<int>(x);
}

[[noreturn]] void collective_failed(const char* what, const std::exception& e) {
  std::string msg = e.what();
  msg = msg.substr(0, msg.find('\n'));  // c10::Error appends a C++ backtrace
  throw std::runtime_error("dist: rank " + std::to_string(rank()) + " of " + std::to_string(world_size()) + ": " +
                           what + " failed (another process has probably exited or stopped answering): " + msg);
}

// Packs tensors of one dtype into a flat CPU buffer and back.
struct Packed {
  torch::Tensor flat;
  std::vector<torch::Tensor> parts;
  explicit Packed(const std::vector<torch::Tensor>& ts) : parts(ts) {
    std::vector<torch::Tensor> flats;
    for (const auto& t : ts) flats.push_back(t.detach().reshape({-1}).to(torch::kCPU));
    flat = torch::cat(flats).contiguous();
  }
  void unpack() {
    int64_t at = 0;
    torch::NoGradGuard no_grad;
    for (auto& t : parts) {
      const int64_t n = t.numel();
      t.copy_(flat.slice(0, at, at + n).view(t.sizes()));
      at += n;
    }
  }
};

std::map<c10::ScalarType, std::vector<torch::Tensor>> by_dtype(const std::vector<torch::Tensor>& ts) {
  std::map<c10::ScalarType, std::vector<torch::Tensor>> m;
  for (const auto& t : ts) {
    if (!t.defined()) throw std::invalid_argument("dist: an undefined tensor cannot take part in a collective");
    if (t.numel() > 0) m[t.scalar_type()].push_back(t);
  }
  return m;
}

}  // namespace

Env env_from_environment() {
  Env e;
  e.world_size = env_int("WORLD_SIZE", 1, 1, 1 << 20);
  if (e.world_size > 1 && !std::getenv("RANK"))
    throw std::invalid_argument("WORLD_SIZE=" + std::to_string(e.world_size) + " but RANK is not set");
  e.rank = env_int("RANK", 0, 0, e.world_size - 1);
  e.local_world_size = env_int("LOCAL_WORLD_SIZE", e.world_size, 1, e.world_size);
  e.local_rank = env_int("LOCAL_RANK", e.rank % e.local_world_size, 0, e.local_world_size - 1);
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) e.master_addr = a;
  e.master_port = env_int("MASTER_PORT", 29500, 1, 65535);
  if (const char* f = std::getenv(kStoreFileVariable); f && *f) e.store_file = f;
  return e;
}

bool available() {
#ifdef HP_HAVE_GLOO
  return true;
#else
  return false;
#endif
}

void init(const Env& env, std::chrono::milliseconds timeout) {
  auto& s = state();
  if (s.joined) {
    if (env.rank != s.env.rank || env.world_size != s.env.world_size)
      throw std::logic_error("dist: already in a process group as rank " + std::to_string(s.env.rank) + " of " +
                             std::to_string(s.env.world_size));
    return;
  }
  if (env.world_size <= 1) {
    s.env = env;
    return;
  }
#ifdef HP_HAVE_GLOO
  const bool local = !env.store_file.empty();
  const std::string where = local ? "the file store " + env.store_file
                                  : env.master_addr + ":" + std::to_string(env.master_port) + " (MASTER_ADDR:MASTER_PORT)";
  try {
    c10::intrusive_ptr<c10d::Store> store;
    if (local) {
      // headprune launch, one machine: a file in the launcher's private directory; no socket.
      store = c10::make_intrusive<c10d::FileStore>(env.store_file, env.world_size);
      store->setTimeout(timeout);
    } else {
      c10d::TCPStoreOptions o;
      o.port = static_cast<std::uint16_t>(env.master_port);
      // Under torchrun the agent already serves the store at MASTER_PORT; every rank is a client.
      const char* agent_store = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
      o.isServer = env.rank == 0 && !(agent_store && std::string(agent_store) == "True");
      o.numWorkers = static_cast<std::size_t>(env.world_size);
      o.waitWorkers = true;
      o.timeout = timeout;
      store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, o);
    }
    s.store = c10::make_intrusive<c10d::PrefixStore>("headprune", store);  // apart from others' keys
    auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
    // Where each process's Gloo connections listen: the interface named, else (one machine) the
    // launch's address, else loopback when that is the master's, else the host name's interface.
    const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
    const bool loopback = env.master_addr == "127.0.0.1" || env.master_addr == "localhost";
    opts->devices.push_back(ifname && *ifname ? c10d::ProcessGroupGloo::createDeviceForInterface(ifname)
                            : local           ? c10d::ProcessGroupGloo::createDeviceForHostname(env.master_addr)
                            : loopback        ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                              : c10d::ProcessGroupGloo::createDefaultDevice());
    s.group = c10::make_intrusive<c10d::ProcessGroupGloo>(s.store, env.rank, env.world_size, opts);
  } catch (const std::exception& e) {
    s.store.reset();
    std::string msg = e.what();
    throw std::runtime_error("dist: rank " + std::to_string(env.rank) + " of " + std::to_string(env.world_size) +
                             " could not join the process group at " + where + " within " +
                             std::to_string(timeout.count() / 1000) + " s: " + msg.substr(0, msg.find('\n')));
  }
  s.env = env;
  s.joined = true;
  log_debug("dist", "rank " + std::to_string(env.rank) + " of " + std::to_string(env.world_size) + " joined at " + where);
#else
  throw std::runtime_error("WORLD_SIZE=" + std::to_string(env.world_size) +
                           ": this headprune was built without multi-process support (Gloo); install libgloo-dev "
                           "and rebuild");
#endif
}

void shutdown() {
  auto& s = state();
#ifdef HP_HAVE_GLOO
  s.group.reset();
  s.store.reset();
#endif
  s.joined = false;
  s.env = Env{};
}

int rank() { return state().env.rank; }
int world_size() { return state().env.world_size; }

std::pair<int64_t, int64_t> slice(int64_t n) {
  const int64_t w = world_size(), r = rank();
  return {n * r / w, n * (r + 1) / w};
}

void all_reduce_sum(std::vector<torch::Tensor> tensors) {
  if (!active()) return;
#ifdef HP_HAVE_GLOO
  for (auto& [dtype, ts] : by_dtype(tensors)) {
    Packed p(ts);
    std::vector<at::Tensor> io = {p.flat};
    try {
      state().group->allreduce(io)->wait();
    } catch (const std::exception& e) {
      collective_failed("all-reduce", e);
    }
    p.unpack();
  }
#endif
}

double all_reduce_sum(double v) {
  auto t = torch::tensor({v}, torch::kDouble);
  all_reduce_sum(std::vector<torch::Tensor>{t});
  return t.item<double>();
}

void broadcast(std::vector<torch::Tensor> tensors, int root) {
  if (!active()) return;
#ifdef HP_HAVE_GLOO
  for (auto& [dtype, ts] : by_dtype(tensors)) {
    Packed p(ts);
    std::vector<at::Tensor> io = {p.flat};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    try {
      state().group->broadcast(io, o)->wait();
    } catch (const std::exception& e) {
      collective_failed("broadcast", e);
    }
    p.unpack();
  }
#endif
}

void send(const torch::Tensor& t, int dst) {
  if (!active()) throw std::logic_error("dist::send outside a multi-process run");
#ifdef HP_HAVE_GLOO
  // As bytes: any dtype travels, and the receiver knows the shape.
  std::vector<at::Tensor> io = {t.detach().to(torch::kCPU).contiguous().flatten().view(torch::kUInt8)};
  try {
    state().group->send(io, dst, /*tag=*/0)->wait();
  } catch (const std::exception& e) {
    collective_failed("send", e);
  }
#else
  (void)t, (void)dst;
#endif
}

torch::Tensor recv_like(const torch::Tensor& like, int src) {
  if (!active()) throw std::logic_error("dist::recv_like outside a multi-process run");
  auto bytes = torch::empty({like.numel() * static_cast<int64_t>(like.element_size())}, torch::kUInt8);
#ifdef HP_HAVE_GLOO
  std::vector<at::Tensor> io = {bytes};
  try {
    state().group->recv(io, src, /*tag=*/0)->wait();
  } catch (const std::exception& e) {
    collective_failed("recv", e);
  }
#else
  (void)src;
#endif
  return bytes.view(like.scalar_type()).view(like.sizes()).to(like.device());
}

std::vector<std::string> all_gather(const std::string& mine) {
  if (!active()) return {mine};
  const int w = world_size();
  auto sizes = torch::zeros({w}, torch::kLong);
  sizes[rank()] = static_cast<int64_t>(mine.size());
  all_reduce_sum(std::vector<torch::Tensor>{sizes});
  const int64_t longest = std::max<int64_t>(1, sizes.max().item<int64_t>());
  auto buf = torch::zeros({longest}, torch::kUInt8);
  std::copy(mine.begin(), mine.end(), reinterpret_cast<char*>(buf.data_ptr<uint8_t>()));
  std::vector<std::string> out;
#ifdef HP_HAVE_GLOO
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < w; ++r) outputs[0].push_back(torch::empty({longest}, torch::kUInt8));
  std::vector<at::Tensor> in = {buf};
  try {
    state().group->allgather(outputs, in)->wait();
  } catch (const std::exception& e) {
    collective_failed("all-gather", e);
  }
  for (int r = 0; r < w; ++r) {
    const auto* p = reinterpret_cast<const char*>(outputs[0][r].data_ptr<uint8_t>());
    out.emplace_back(p, p + sizes[r].item<int64_t>());
  }
#endif
  return out;
}

void barrier() {
  if (!active()) return;
#ifdef HP_HAVE_GLOO
  try {
    state().group->barrier()->wait();
  } catch (const std::exception& e) {
    collective_failed("barrier", e);
  }
#endif
}

}  // namespace hp::dist
