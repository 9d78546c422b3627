// safetensors reader/writer; format described in the header.
#include "headprune/io/safetensors.h"
#include "headprune/util/mapped_files.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "headprune/io/files.h"

namespace hp {
namespace {

static_assert(sizeof(uint64_t) == 8, "need 64-bit integers");

bool host_is_little_endian() {
  const uint16_t one = 1;
  uint8_t b;
  std::memcpy(&b, &one, 1);
  return b == 1;
}

const std::vector<std::pair<std::string, torch::ScalarType>>& dtype_table() {
  static const std::vector<std::pair<std::string, torch::ScalarType>> t = {
      {"F64", torch::kDouble}, {"F32", torch::kFloat},  {"F16", torch::kHalf},  {"BF16", torch::kBFloat16},
      {"I64", torch::kLong},   {"I32", torch::kInt},    {"I16", torch::kShort}, {"I8", torch::kChar},
      {"U8", torch::kByte},    {"BOOL", torch::kBool}};
  return t;
}

// Largest header we accept; real headers are kilobytes (the reference reader uses 100 MB).
constexpr uint64_t kMaxHeader = 100ull * 1024 * 1024;

}  // namespace

std::string safetensors_dtype_name(torch::ScalarType t) {
  for (const auto& kv : dtype_table())
    if (kv.second == t) return kv.first;
  throw std::invalid_argument(std::string("safetensors: unsupported dtype ") + c10::toString(t));
}

namespace {

// A parsed and checked header: every tensor's dtype, shape and byte span inside the data section.
struct HeaderEntry {
  std::string name;
  torch::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};
struct Header {
  std::vector<HeaderEntry> entries;
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // 8 + header length: where the data section begins in the file
};

// The header length from the file's first 8 bytes, checked against the file size.
uint64_t header_length(const char* first8, uint64_t file_size, const std::string& source) {
  if (!host_is_little_endian()) throw std::runtime_error(source + ": big-endian hosts are not supported");
  if (file_size < 8)
    throw std::runtime_error(source + ": file is too short (" + std::to_string(file_size) +
                             " bytes) to hold a safetensors header");
  uint64_t n = 0;
  std::memcpy(&n, first8, 8);
  if (n > kMaxHeader)
    throw std::runtime_error(source + ": header length " + std::to_string(n) +
                             " is implausibly large (not a safetensors file?)");
  if (8 + n > file_size)
    throw std::runtime_error(source + ": header length " + std::to_string(n) + " exceeds the file size " +
                             std::to_string(file_size) + " (truncated file?)");
  return n;
}

// `json` is the header's n bytes; the file is file_size bytes long. Every span is checked against it.
Header parse_header(const std::string& json, uint64_t file_size, const std::string& source) {
  auto fail = [&](const std::string& msg) -> std::runtime_error { return std::runtime_error(source + ": " + msg); };
  const nlohmann::json header = parse_json(json, source + ": header");
  if (!header.is_object()) throw fail("header must be a JSON object, got " + std::string(header.type_name()));
  const uint64_t data_size = file_size - 8 - json.size();
  Header out;
  out.data_start = 8 + json.size();
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const auto& e = it.value();
    if (name == "__metadata__") {
      if (!e.is_object()) throw fail("__metadata__ must be an object of strings");
      for (auto m = e.begin(); m != e.end(); ++m) {
        if (!m.value().is_string()) throw fail("__metadata__ value '" + m.key() + "' must be a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      throw fail(where + ": entry must have dtype, shape and data_offsets");
    if (!e["dtype"].is_string()) throw fail(where + ": dtype must be a string");
    const std::string dt = e["dtype"].get<std::string>();
    auto d = std::find_if(dtype_table().begin(), dtype_table().end(), [&](const auto& kv) { return kv.first == dt; });
    if (d == dtype_table().end())
      throw fail(where + ": unknown dtype '" + dt + "' (supported: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)");
    if (!e["shape"].is_array()) throw fail(where + ": shape must be a list of non-negative integers");
    std::vector<int64_t> shape;
    const uint64_t elem = c10::elementSize(d->second);
    // The shape's byte count is checked against the data section as it is multiplied, so no product
    // overflows and nothing is allocated for a shape the file cannot hold.
    uint64_t numel = 1;
    bool too_big = false;
    for (const auto& s : e["shape"]) {
      if (!s.is_number_unsigned()) throw fail(where + ": shape must be a list of non-negative integers, got " + e["shape"].dump());
      const uint64_t dim = s.get<uint64_t>();
      if (dim > (1ull << 48))
        throw fail(where + ": shape " + e["shape"].dump() + " has a dimension above 2^48 (not a real tensor)");
      shape.push_back(static_cast<int64_t>(dim));
      if (dim != 0 && numel > (1ull << 62) / elem / dim) too_big = true;  // the byte count would overflow
      numel = too_big ? 0 : numel * dim;
    }
    if (shape.size() > 64) throw fail(where + ": shape has " + std::to_string(shape.size()) + " dimensions (at most 64)");
    bool empty = false;
    for (int64_t s : shape) empty = empty || s == 0;
    if (too_big && !empty)
      throw fail(where + ": shape " + e["shape"].dump() + " of " + dt + " needs more than 2^62 bytes (the data section holds " +
                 std::to_string(data_size) + ")");
    if (empty) numel = 0;
    const auto& off = e["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw fail(where + ": data_offsets must be [begin, end], got " + off.dump());
    const uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
    if (en < b) throw fail(where + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(en) + "] end before begin");
    if (en - b != numel * elem)
      throw fail(where + ": shape " + shape_str(shape) + " of " + dt + " needs " + std::to_string(numel * elem) +
                 " bytes but data_offsets span " + std::to_string(en - b));
    if (en > data_size)
      throw fail(where + ": data [" + std::to_string(b) + ", " + std::to_string(en) +
                 ") lies beyond the end of the data section (" + std::to_string(data_size) + " bytes; truncated file?)");
    spans.push_back({b, en});
    out.entries.push_back({name, d->second, shape, b, en});
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].first < spans[i - 1].second) throw fail("tensor data regions overlap");
  return out;
}

// A read-only view of a whole file in memory (MAP_PRIVATE with write permission: an in-place change
// to a tensor stays in this process, the file is never written). Unmapped with its last tensor.
struct Mapping;
std::mutex g_mappings_mu;
std::set<const Mapping*> g_mappings;  // the live mappings, for release_mapped_pages

struct Mapping {
  void* addr = nullptr;
  size_t len = 0;
  int slot = -1;  // util/mapped_files.h: a truncation while mapped is an error, not a SIGBUS
  Mapping() {
    std::lock_guard<std::mutex> lock(g_mappings_mu);
    g_mappings.insert(this);
  }
  ~Mapping() {
    {
      std::lock_guard<std::mutex> lock(g_mappings_mu);
      g_mappings.erase(this);
    }
    unregister_mapping(slot);
    if (addr) ::munmap(addr, len);
  }
};

// Drops the whole pages inside [p, p + n) from this process's memory: they are clean pages of the
// file (a private mapping nobody wrote to here), read again from the page cache or the disk if they
// are touched again. Pages shared with a neighbouring tensor are kept.
void drop_pages(const char* p, size_t n) {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t a = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (b > a) ::madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
}

}  // namespace

SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& source) {
  const uint64_t n = header_length(bytes.data(), bytes.size(), source);
  const Header h = parse_header(bytes.substr(8, n), bytes.size(), source);
  SafetensorsFile out;
  out.metadata = h.metadata;
  const char* data = bytes.data() + h.data_start;
  for (const auto& e : h.entries) {
    auto t = torch::empty(e.shape, torch::TensorOptions().dtype(e.dtype));
    if (e.end > e.begin) std::memcpy(t.data_ptr(), data + e.begin, e.end - e.begin);
    out.tensors[e.name] = t;
  }
  return out;
}

namespace {
struct OpenFile {
  int fd = -1;
  uint64_t size = 0;
  std::string header_json;
  ~OpenFile() {
    if (fd >= 0) ::close(fd);
  }
};

// Opens `path` and reads (only) its header.
void open_header(const std::string& path, OpenFile& f) {
  if (is_directory(path)) throw std::runtime_error(path + ": is a directory, expected a safetensors file");
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) throw std::runtime_error(path + ": cannot open for reading (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) throw std::runtime_error(path + ": not a regular file");
  f.size = static_cast<uint64_t>(st.st_size);
  char first8[8] = {0};
  const ssize_t got = f.size >= 8 ? ::pread(f.fd, first8, 8, 0) : 0;
  if (f.size >= 8 && got != 8) throw std::runtime_error(path + ": read error (" + std::strerror(errno) + ")");
  const uint64_t n = header_length(first8, f.size, path);
  f.header_json.resize(n);
  uint64_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(f.fd, f.header_json.data() + done, n - done, static_cast<off_t>(8 + done));
    if (r <= 0) throw std::runtime_error(path + ": read error in the header (" + std::strerror(errno) + ")");
    done += static_cast<uint64_t>(r);
  }
}
}  // namespace

SafetensorsFile read_safetensors(const std::string& path) {
  OpenFile f;
  open_header(path, f);
  const Header h = parse_header(f.header_json, f.size, path);
  auto map = std::make_shared<Mapping>();
  map->len = static_cast<size_t>(f.size);
  void* addr = ::mmap(nullptr, map->len, PROT_READ | PROT_WRITE, MAP_PRIVATE, f.fd, 0);
  if (addr == MAP_FAILED) throw std::runtime_error(path + ": cannot map the file (" + std::strerror(errno) + ")");
  map->addr = addr;
  map->slot = register_mapping(addr, map->len, path);
  const bool copy = map->slot < 0;  // no slot left to guard it: copies, and the mapping goes with this call
  SafetensorsFile out;
  out.metadata = h.metadata;
  char* data = static_cast<char*>(addr) + h.data_start;
  for (const auto& e : h.entries) {
    const auto opts = torch::TensorOptions().dtype(e.dtype);
    char* p = data + e.begin;
    if (e.end == e.begin) {
      out.tensors[e.name] = torch::empty(e.shape, opts);
    } else if (copy || reinterpret_cast<uintptr_t>(p) % c10::elementSize(e.dtype) != 0) {  // unaligned: a copy
      auto t = torch::empty(e.shape, opts);
      std::memcpy(t.data_ptr(), p, e.end - e.begin);
      out.tensors[e.name] = t;
    } else {  // a view into the mapping, which lives as long as any of its tensors; a tensor that dies
              // takes its pages out of the process's memory (the file keeps them)
      const size_t n = e.end - e.begin;
      out.tensors[e.name] = torch::from_blob(p, e.shape, [map, p, n](void*) { drop_pages(p, n); }, opts);
    }
  }
  return out;
}

bool release_mapped_pages(const torch::Tensor& t) {
  if (!t.defined() || !t.device().is_cpu() || !t.is_contiguous() || t.numel() == 0) return false;
  const char* p = static_cast<const char*>(t.data_ptr());
  const size_t n = static_cast<size_t>(t.numel()) * t.element_size();
  {
    std::lock_guard<std::mutex> lock(g_mappings_mu);
    const bool inside = std::any_of(g_mappings.begin(), g_mappings.end(), [&](const Mapping* m) {
      const char* a = static_cast<const char*>(m->addr);
      return p >= a && p + n <= a + m->len;
    });
    if (!inside) return false;
  }
  drop_pages(p, n);
  return true;
}

SafetensorsHeader read_safetensors_header(const std::string& path) {
  OpenFile f;
  open_header(path, f);
  const Header h = parse_header(f.header_json, f.size, path);
  SafetensorsHeader out;
  out.metadata = h.metadata;
  out.file_bytes = f.size;
  for (const auto& e : h.entries) out.tensors[e.name] = {e.dtype, e.shape};
  return out;
}

LazyTensor LazyTensor::of(const torch::Tensor& t) {
  const torch::Tensor held = t.detach();
  return {held.scalar_type(), held.sizes().vec(), [held] { return held; }};
}

uint64_t LazyTensor::nbytes() const {
  uint64_t n = c10::elementSize(dtype);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

void LazyTensor::write_to(std::ostream& out, const std::string& name) const {
  const torch::Tensor t = make().detach().to(torch::kCPU).contiguous();
  if (t.scalar_type() != dtype || t.sizes().vec() != shape)
    throw std::logic_error("model file writer: tensor '" + name + "' is not the declared " + c10::toString(dtype) +
                           " " + shape_str(shape));
  // In pieces of at most 1 GiB (a stream's write takes a signed size).
  const char* p = static_cast<const char*>(t.data_ptr());
  uint64_t left = nbytes();
  while (left > 0 && out) {
    const uint64_t k = std::min<uint64_t>(left, 1ull << 30);
    out.write(p, static_cast<std::streamsize>(k));
    p += k;
    left -= k;
  }
}

namespace {

// One file: the header, then each tensor's bytes in name order, made one at a time.
void write_stream(std::ostream& out, const std::map<std::string, LazyTensor>& tensors,
                  const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {  // std::map: sorted names, deterministic files
    const uint64_t n = t.nbytes();
    header[name] = {{"dtype", safetensors_dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string h = header.dump();
  while (h.size() % 8 != 0) h.push_back(' ');  // align the data section
  const uint64_t hn = h.size();
  out.write(reinterpret_cast<const char*>(&hn), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto& [name, lazy] : tensors) lazy.write_to(out, name);
}

std::map<std::string, LazyTensor> lazies(const TensorMap& tensors) {
  std::map<std::string, LazyTensor> m;
  for (const auto& [name, t] : tensors) m.emplace(name, LazyTensor::of(t));
  return m;
}
}  // namespace

std::string serialize_safetensors(const TensorMap& tensors, const std::map<std::string, std::string>& metadata) {
  std::ostringstream out;
  write_stream(out, lazies(tensors), metadata);
  return out.str();
}

void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const auto m = lazies(tensors);
  write_file_atomic(path, [&](std::ostream& out) { write_stream(out, m, metadata); });
}

std::vector<std::string> write_safetensors_sharded(const std::string& dir, const std::string& stem,
                                                   const std::map<std::string, LazyTensor>& tensors,
                                                   const std::map<std::string, std::string>& metadata,
                                                   uint64_t max_shard_bytes) {
  // Shards in name order, a new one when the next tensor would pass the limit (a larger tensor gets
  // one of its own), as HF's save_pretrained splits.
  std::vector<std::map<std::string, LazyTensor>> shards(1);
  uint64_t in_shard = 0, total = 0;
  for (const auto& [name, t] : tensors) {
    const uint64_t n = t.nbytes();
    if (in_shard > 0 && in_shard + n > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().emplace(name, t);
    in_shard += n;
    total += n;
  }
  std::vector<std::string> files;
  if (shards.size() == 1) {
    files.push_back(stem + ".safetensors");
    write_file_atomic(join_path(dir, files.back()), [&](std::ostream& out) { write_stream(out, shards[0], metadata); });
    return files;
  }
  nlohmann::json map = nlohmann::json::object();
  char name[64];
  for (size_t i = 0; i < shards.size(); ++i) {
    std::snprintf(name, sizeof name, "-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    files.push_back(stem + name);
    write_file_atomic(join_path(dir, files.back()), [&](std::ostream& out) { write_stream(out, shards[i], metadata); });
    for (const auto& kv : shards[i]) map[kv.first] = files.back();
  }
  write_json_file(join_path(dir, stem + ".safetensors.index.json"),
                  {{"metadata", {{"total_size", total}}}, {"weight_map", map}});
  files.push_back(stem + ".safetensors.index.json");
  return files;
}

}  // namespace hp
