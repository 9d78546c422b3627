// Several processes working as one (data parallelism): the process group, and the few collectives
// the library needs, on LibTorch's c10d (Gloo on the CPU). Launch follows PyTorch's convention:
// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT as torchrun (or
// `headprune launch`) sets them.
//
// The rendezvous: a TCP store that rank 0 serves at MASTER_ADDR:MASTER_PORT (torchrun, several
// machines, variables set by hand). LibTorch 1.13's TCPStore listens on every interface, whatever
// MASTER_ADDR says, so `headprune launch` (one machine) gives its children a file store instead
// (HP_DIST_STORE_FILE, in a directory only its user can open) and their Gloo connections listen on
// MASTER_ADDR alone: nothing of a launched job listens on another interface.
//
// Without those variables (or with WORLD_SIZE=1) there is one process and every collective is a
// no-op, so library code calls them unconditionally. With several, every rank must make the same
// calls in the same order. The policy the library follows:
//   - data are split by whole batches: batch k belongs to rank k mod world (owns(k)); sums are
//     all-reduced, so a result does not depend on the number of processes (up to float rounding);
//   - training splits each global batch into per-rank slices and all-reduces the gradients;
//   - only rank 0 writes files; the others wait for each write and can then read it (io/files.h);
//   - a rank that dies makes the others fail at their next collective (the peer's connection
//     closes) or, at the latest, after the timeout given to init().
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace hp::dist {

struct Env {
  int rank = 0, world_size = 1;
  int local_rank = 0, local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string store_file;  // HP_DIST_STORE_FILE: rendezvous in this file (one machine), not over TCP
};

// The variable `headprune launch` sets for its children's file store (util/launch.h).
inline constexpr const char* kStoreFileVariable = "HP_DIST_STORE_FILE";

// Reads the launch variables; absent ones take the single-process defaults. A malformed or
// inconsistent value is std::invalid_argument naming the variable and what was expected.
Env env_from_environment();

// Whether this build can run several processes (LibTorch's Gloo backend and its headers were found).
bool available();

// Joins the process group `env` describes (rendezvous through env.store_file, or a TCP store at
// master_addr:port that rank 0 serves); nothing for a world of one. `timeout` bounds the rendezvous
// and every collective.
// Calling it again with the same env does nothing; a second, different group is an error.
void init(const Env& env, std::chrono::milliseconds timeout);
// Leaves the group (also at exit).
void shutdown();

int rank();
int world_size();
inline bool is_main() { return rank() == 0; }
inline bool active() { return world_size() > 1; }
// Batch (or item) k is this rank's share of a split by whole batches.
inline bool owns(int64_t k) { return k % world_size() == rank(); }
// Rows [begin, end) of an n-row global batch that are this rank's slice (contiguous, sizes differ by
// at most one; empty when n < world and this rank comes last).
std::pair<int64_t, int64_t> slice(int64_t n);

// Point to point (a pipeline of layers): send blocks until `dst` has received; recv_like receives a
// tensor of the shape, dtype and device of `like` from `src`.
void send(const torch::Tensor& t, int dst);
torch::Tensor recv_like(const torch::Tensor& like, int src);

// Sums every tensor over the ranks, in place (any dtype and device; the tensors are packed into one
// buffer per dtype, so one call costs one round per dtype).
void all_reduce_sum(std::vector<torch::Tensor> tensors);
double all_reduce_sum(double v);
// Copies rank `root`'s values into every rank's tensors, in place.
void broadcast(std::vector<torch::Tensor> tensors, int root = 0);
// Every rank's string, in rank order.
std::vector<std::string> all_gather(const std::string& mine);
void barrier();

}  // namespace hp::dist
