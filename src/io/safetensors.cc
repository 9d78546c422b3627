// safetensors reader/writer; format described in the header.
#include "headprune/io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

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

SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& source) {
  if (!host_is_little_endian()) throw std::runtime_error(source + ": big-endian hosts are not supported");
  auto fail = [&](const std::string& msg) -> std::runtime_error { return std::runtime_error(source + ": " + msg); };
  if (bytes.size() < 8)
    throw fail("file is too short (" + std::to_string(bytes.size()) + " bytes) to hold a safetensors header");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > kMaxHeader) throw fail("header length " + std::to_string(n) + " is implausibly large (not a safetensors file?)");
  if (8 + n > bytes.size())
    throw fail("header length " + std::to_string(n) + " exceeds the file size " + std::to_string(bytes.size()) +
               " (truncated file?)");
  const nlohmann::json header = parse_json(bytes.substr(8, n), source + ": header");
  if (!header.is_object()) throw fail("header must be a JSON object, got " + std::string(header.type_name()));

  const char* data = bytes.data() + 8 + n;
  const uint64_t data_size = bytes.size() - 8 - n;
  SafetensorsFile out;
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
    auto t = torch::empty(shape, torch::TensorOptions().dtype(d->second));
    if (en > b) std::memcpy(t.data_ptr(), data + b, en - b);
    out.tensors[name] = t;
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].first < spans[i - 1].second) throw fail("tensor data regions overlap");
  return out;
}

SafetensorsFile read_safetensors(const std::string& path) { return parse_safetensors(read_file(path), path); }

std::string serialize_safetensors(const TensorMap& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<torch::Tensor> blobs;
  uint64_t offset = 0;
  for (const auto& kv : tensors) {  // std::map: sorted names, deterministic files
    auto t = kv.second.detach().to(torch::kCPU).contiguous();
    const uint64_t nbytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    header[kv.first] = {{"dtype", safetensors_dtype_name(t.scalar_type())},
                        {"shape", t.sizes().vec()},
                        {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    blobs.push_back(t);
  }
  std::string h = header.dump();
  while (h.size() % 8 != 0) h.push_back(' ');  // align the data section
  std::string out;
  out.reserve(8 + h.size() + offset);
  const uint64_t n = h.size();
  out.append(reinterpret_cast<const char*>(&n), 8);
  out += h;
  for (const auto& t : blobs)
    out.append(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel()) * t.element_size());
  return out;
}

void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, serialize_safetensors(tensors, metadata));
}

}  // namespace hp
