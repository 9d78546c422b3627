// GGUF reader and writer (see header).
#include "headprune/io/gguf.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <numeric>
#include <set>
#include <stdexcept>

#include "headprune/io/files.h"

namespace hp {

std::string to_string(GgufType t) {
  switch (t) {
    case GgufType::U8: return "uint8";
    case GgufType::I8: return "int8";
    case GgufType::U16: return "uint16";
    case GgufType::I16: return "int16";
    case GgufType::U32: return "uint32";
    case GgufType::I32: return "int32";
    case GgufType::F32: return "float32";
    case GgufType::Bool: return "bool";
    case GgufType::String: return "string";
    case GgufType::Array: return "array";
    case GgufType::U64: return "uint64";
    case GgufType::I64: return "int64";
    case GgufType::F64: return "float64";
  }
  return "type " + std::to_string(static_cast<uint32_t>(t));
}

namespace {

bool is_float(GgufType t) { return t == GgufType::F32 || t == GgufType::F64; }
bool is_known(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::F64); }

// Bytes of one scalar of the type (0 for strings and arrays).
uint64_t scalar_bytes(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::Bool: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    default: return 0;
  }
}

torch::ScalarType torch_type_of(GgmlType t) {
  switch (t) {
    case GgmlType::F16: return torch::kFloat16;
    case GgmlType::BF16: return torch::kBFloat16;
    default: return torch::kFloat32;  // F32, and the block types once dequantized
  }
}

bool is_read(uint32_t type) { return type == 0 || type == 1 || type == 2 || type == 8 || type == 30; }

// ---- writing ----

template <typename T>
void put(std::ostream& out, T v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof v);
}

void put_string(std::ostream& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.write(s.data(), static_cast<std::streamsize>(s.size()));
}

void put_scalar(std::ostream& out, GgufType t, int64_t i, double f) {
  switch (t) {
    case GgufType::U8: put<uint8_t>(out, static_cast<uint8_t>(i)); break;
    case GgufType::I8: put<int8_t>(out, static_cast<int8_t>(i)); break;
    case GgufType::Bool: put<uint8_t>(out, i != 0 ? 1 : 0); break;
    case GgufType::U16: put<uint16_t>(out, static_cast<uint16_t>(i)); break;
    case GgufType::I16: put<int16_t>(out, static_cast<int16_t>(i)); break;
    case GgufType::U32: put<uint32_t>(out, static_cast<uint32_t>(i)); break;
    case GgufType::I32: put<int32_t>(out, static_cast<int32_t>(i)); break;
    case GgufType::U64: put<uint64_t>(out, static_cast<uint64_t>(i)); break;
    case GgufType::I64: put<int64_t>(out, i); break;
    case GgufType::F32: put<float>(out, static_cast<float>(f)); break;
    case GgufType::F64: put<double>(out, f); break;
    default: throw std::logic_error("GGUF writer: " + to_string(t) + " is not a scalar type");
  }
}

void put_value(std::ostream& out, const GgufValue& v) {
  put<uint32_t>(out, static_cast<uint32_t>(v.type));
  if (v.type == GgufType::String) return put_string(out, v.s);
  if (v.type != GgufType::Array) return put_scalar(out, v.type, v.i, v.f);
  put<uint32_t>(out, static_cast<uint32_t>(v.elem));
  put<uint64_t>(out, v.size());
  if (v.elem == GgufType::String) {
    for (const auto& s : v.strings) put_string(out, s);
  } else if (is_float(v.elem)) {
    for (double f : v.floats) put_scalar(out, v.elem, 0, f);
  } else {
    for (int64_t i : v.ints) put_scalar(out, v.elem, i, 0);
  }
}

void pad_to(std::ostream& out, uint64_t& at, uint64_t alignment) {
  static const char zeros[64] = {};
  while (at % alignment != 0) {
    const uint64_t k = std::min<uint64_t>(alignment - at % alignment, sizeof zeros);
    out.write(zeros, static_cast<std::streamsize>(k));
    at += k;
  }
}

uint64_t padded(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

// ---- reading ----

class Reader {
 public:
  Reader(const std::string& path) : path_(path), in_(path, std::ios::binary) {
    if (!in_) throw std::runtime_error(path + ": cannot open");
    in_.seekg(0, std::ios::end);
    size_ = static_cast<uint64_t>(in_.tellg());
    in_.seekg(0);
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error(path_ + ": not a valid GGUF file: " + what + " (at byte " + std::to_string(at_) + ")");
  }
  void need(uint64_t n, const std::string& what) {
    if (n > size_ - at_) fail(what + " runs past the end of the file (" + std::to_string(size_) + " bytes)");
  }
  template <typename T>
  T get(const std::string& what) {
    need(sizeof(T), what);
    T v;
    in_.read(reinterpret_cast<char*>(&v), sizeof v);
    at_ += sizeof v;
    return v;
  }
  std::string get_string(const std::string& what) {
    const auto n = get<uint64_t>(what + " length");
    need(n, what);
    std::string s(n, '\0');
    in_.read(s.data(), static_cast<std::streamsize>(n));
    at_ += n;
    return s;
  }
  void get_scalar(GgufType t, int64_t& i, double& f, const std::string& what) {
    switch (t) {
      case GgufType::U8: i = get<uint8_t>(what); break;
      case GgufType::I8: i = get<int8_t>(what); break;
      case GgufType::Bool: i = get<uint8_t>(what) != 0; break;
      case GgufType::U16: i = get<uint16_t>(what); break;
      case GgufType::I16: i = get<int16_t>(what); break;
      case GgufType::U32: i = get<uint32_t>(what); break;
      case GgufType::I32: i = get<int32_t>(what); break;
      case GgufType::U64: i = static_cast<int64_t>(get<uint64_t>(what)); break;
      case GgufType::I64: i = get<int64_t>(what); break;
      case GgufType::F32: f = get<float>(what); break;
      case GgufType::F64: f = get<double>(what); break;
      default: fail(what + ": " + to_string(t) + " is not a scalar type");
    }
  }
  GgufValue get_value(const std::string& key) {
    GgufValue v;
    const auto t = get<uint32_t>("type of '" + key + "'");
    if (!is_known(t)) fail("metadata '" + key + "' has unknown type " + std::to_string(t));
    v.type = static_cast<GgufType>(t);
    if (v.type == GgufType::String) {
      v.s = get_string("metadata '" + key + "'");
    } else if (v.type != GgufType::Array) {
      get_scalar(v.type, v.i, v.f, "metadata '" + key + "'");
    } else {
      const auto e = get<uint32_t>("element type of '" + key + "'");
      if (!is_known(e) || e == static_cast<uint32_t>(GgufType::Array))
        fail("metadata '" + key + "' is an array of unsupported type " + std::to_string(e));
      v.elem = static_cast<GgufType>(e);
      const auto n = get<uint64_t>("length of '" + key + "'");
      // Every element takes at least one byte (a string: eight): a hostile length fails here.
      need(n * (v.elem == GgufType::String ? 8 : scalar_bytes(v.elem)), "array '" + key + "'");
      for (uint64_t k = 0; k < n; ++k) {
        if (v.elem == GgufType::String) {
          v.strings.push_back(get_string("'" + key + "'[" + std::to_string(k) + "]"));
        } else {
          int64_t i = 0;
          double f = 0;
          get_scalar(v.elem, i, f, "'" + key + "'");
          if (is_float(v.elem))
            v.floats.push_back(f);
          else
            v.ints.push_back(i);
        }
      }
    }
    return v;
  }
  uint64_t at() const { return at_; }
  uint64_t size() const { return size_; }

 private:
  std::string path_;
  std::ifstream in_;
  uint64_t size_ = 0, at_ = 0;
};

}  // namespace

GgufValue GgufValue::u32(int64_t v) { GgufValue x; x.type = GgufType::U32; x.i = v; return x; }
GgufValue GgufValue::i32(int64_t v) { GgufValue x; x.type = GgufType::I32; x.i = v; return x; }
GgufValue GgufValue::f32(double v) { GgufValue x; x.type = GgufType::F32; x.f = v; return x; }
GgufValue GgufValue::boolean(bool v) { GgufValue x; x.type = GgufType::Bool; x.i = v; return x; }
GgufValue GgufValue::str(std::string v) { GgufValue x; x.type = GgufType::String; x.s = std::move(v); return x; }
GgufValue GgufValue::array(GgufType elem, std::vector<int64_t> v) {
  GgufValue x;
  x.type = GgufType::Array;
  x.elem = elem;
  x.ints = std::move(v);
  return x;
}
GgufValue GgufValue::f32s(std::vector<double> v) {
  GgufValue x;
  x.type = GgufType::Array;
  x.elem = GgufType::F32;
  x.floats = std::move(v);
  return x;
}
GgufValue GgufValue::strs(std::vector<std::string> v) {
  GgufValue x;
  x.type = GgufType::Array;
  x.elem = GgufType::String;
  x.strings = std::move(v);
  return x;
}
size_t GgufValue::size() const {
  if (type != GgufType::Array) return 1;
  if (elem == GgufType::String) return strings.size();
  return is_float(elem) ? floats.size() : ints.size();
}

GgmlType ggml_type_of(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat32: return GgmlType::F32;
    case torch::kFloat16: return GgmlType::F16;
    case torch::kBFloat16: return GgmlType::BF16;
    default: throw std::invalid_argument(std::string("GGUF: tensors of dtype ") + c10::toString(t) +
                                         " are not written (F32, F16, BF16)");
  }
}

GgufTensor quantized_gguf_tensor(std::string name, GgmlType type, std::vector<int64_t> shape,
                                 std::function<torch::Tensor()> make_values) {
  if (!is_block_type(type) || shape.size() != 2)
    throw std::logic_error("GGUF writer: '" + name + "': only 2-D tensors are quantized, to Q8_0 or Q4_0");
  const std::vector<int64_t> blocks_shape{shape[0], static_cast<int64_t>(ggml_row_bytes(type, shape[1]))};
  GgufTensor t{std::move(name), LazyTensor{torch::kUInt8, blocks_shape, {}}, type, std::move(shape)};
  t.data.make = [make_values = std::move(make_values), type] { return quantize_blocks(make_values(), type); };
  return t;
}

void write_gguf(std::ostream& out, const GgufFile& file) {
  std::set<std::string> keys, names;
  for (const auto& [k, v] : file.metadata)
    if (!keys.insert(k).second) throw std::logic_error("GGUF writer: metadata key '" + k + "' twice");
  for (const auto& t : file.tensors) {
    if (!names.insert(t.name).second) throw std::logic_error("GGUF writer: tensor '" + t.name + "' twice");
    t.type();  // a dtype GGUF has no type for fails here
  }
  uint64_t at = 0;
  auto counted = [&](auto&& write) {  // writes and counts the bytes (the stream may not be seekable)
    const auto before = out.tellp();
    write();
    at += static_cast<uint64_t>(out.tellp() - before);
  };
  counted([&] {
    out.write("GGUF", 4);
    put<uint32_t>(out, 3);
    put<uint64_t>(out, file.tensors.size());
    put<uint64_t>(out, file.metadata.size());
    for (const auto& [k, v] : file.metadata) {
      put_string(out, k);
      put_value(out, v);
    }
    uint64_t offset = 0;
    for (const auto& t : file.tensors) {
      put_string(out, t.name);
      const auto& dims = t.dims();
      put<uint32_t>(out, static_cast<uint32_t>(dims.size()));
      for (auto d = dims.rbegin(); d != dims.rend(); ++d) put<uint64_t>(out, static_cast<uint64_t>(*d));
      put<uint32_t>(out, static_cast<uint32_t>(t.type()));
      put<uint64_t>(out, offset);
      offset = padded(offset + t.data.nbytes(), file.alignment);
    }
  });
  pad_to(out, at, file.alignment);
  for (const auto& t : file.tensors) {
    t.data.write_to(out, t.name);
    at += t.data.nbytes();
    pad_to(out, at, file.alignment);
  }
}

GgufInfo read_gguf_info(const std::string& path) {
  Reader r(path);
  GgufInfo info;
  info.file_size = r.size();
  if (r.size() < 4) r.fail("shorter than its magic");
  char magic[4];
  for (char& c : magic) c = static_cast<char>(r.get<uint8_t>("magic"));
  if (std::memcmp(magic, "GGUF", 4) != 0) r.fail("no GGUF magic");
  info.version = r.get<uint32_t>("version");
  if (info.version != 2 && info.version != 3) r.fail("version " + std::to_string(info.version) + " (2 or 3 read)");
  const auto n_tensors = r.get<uint64_t>("tensor count");
  const auto n_kv = r.get<uint64_t>("metadata count");
  r.need(n_kv * 12, "metadata");  // a key's length and a type at least
  for (uint64_t k = 0; k < n_kv; ++k) {
    const std::string key = r.get_string("metadata key");
    if (info.metadata.count(key)) r.fail("metadata key '" + key + "' twice");
    info.metadata.emplace(key, r.get_value(key));
  }
  uint64_t alignment = 32;
  if (const auto a = info.metadata.find("general.alignment"); a != info.metadata.end()) {
    if (a->second.type != GgufType::U32 || a->second.i <= 0 || (a->second.i & (a->second.i - 1)) != 0)
      r.fail("general.alignment must be a uint32 power of two");
    alignment = static_cast<uint64_t>(a->second.i);
  }
  r.need(n_tensors * 24, "tensor records");
  std::set<std::string> names;
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufInfo::Tensor t;
    t.name = r.get_string("tensor name");
    if (!names.insert(t.name).second) r.fail("tensor '" + t.name + "' twice");
    const auto dims = r.get<uint32_t>("dimensions of '" + t.name + "'");
    if (dims == 0 || dims > 4) r.fail("tensor '" + t.name + "' has " + std::to_string(dims) + " dimensions (1 to 4)");
    for (uint32_t d = 0; d < dims; ++d) {
      const auto n = r.get<uint64_t>("dimension of '" + t.name + "'");
      if (n > (1ull << 40)) r.fail("tensor '" + t.name + "' has a dimension of " + std::to_string(n));
      t.ne.push_back(static_cast<int64_t>(n));
    }
    const auto type = r.get<uint32_t>("type of '" + t.name + "'");
    if (!is_read(type))
      r.fail("tensor '" + t.name + "' has ggml type " + std::to_string(type) +
             " (F32 0, F16 1, Q4_0 2, Q8_0 8 and BF16 30 are read)");
    t.type = static_cast<GgmlType>(type);
    if (is_block_type(t.type) && (t.ne[0] == 0 || t.ne[0] % kGgmlBlockValues != 0))
      r.fail("tensor '" + t.name + "' is " + to_string(t.type) + " with rows of " + std::to_string(t.ne[0]) +
             " values, not whole blocks of " + std::to_string(kGgmlBlockValues));
    t.offset = r.get<uint64_t>("offset of '" + t.name + "'");
    if (t.offset % alignment != 0) r.fail("tensor '" + t.name + "' is not aligned to " + std::to_string(alignment));
    info.tensors.push_back(std::move(t));
  }
  info.data_offset = padded(r.at(), alignment);
  for (const auto& t : info.tensors) {
    uint64_t n = ggml_row_bytes(t.type, t.ne[0]);  // each dimension at most 2^40, at most four: a row fits
    for (size_t d = 1; d < t.ne.size(); ++d) {
      if (t.ne[d] != 0 && n > info.file_size / static_cast<uint64_t>(t.ne[d])) {
        n = info.file_size + 1;  // past the end whatever the offset: no overflow below
        break;
      }
      n *= static_cast<uint64_t>(t.ne[d]);
    }
    if (info.data_offset > info.file_size || t.offset > info.file_size - info.data_offset ||
        n > info.file_size - info.data_offset - t.offset)
      r.fail("tensor '" + t.name + "' runs past the end of the file (" + std::to_string(info.file_size) + " bytes)");
  }
  return info;
}

torch::Tensor gguf_tensor(const std::string& path, const GgufInfo& info, const std::string& name) {
  const auto it = std::find_if(info.tensors.begin(), info.tensors.end(), [&](const auto& t) { return t.name == name; });
  if (it == info.tensors.end()) throw std::runtime_error(path + ": no tensor '" + name + "'");
  std::vector<int64_t> shape(it->ne.rbegin(), it->ne.rend());
  const bool blocks = is_block_type(it->type);
  const int64_t cols = it->ne[0], rows = cols == 0 ? 0 : std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>()) / cols;
  torch::Tensor t = blocks ? torch::empty({rows, static_cast<int64_t>(ggml_row_bytes(it->type, cols))}, torch::kUInt8)
                           : torch::empty(shape, torch::TensorOptions().dtype(torch_type_of(it->type)));
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(info.data_offset + it->offset));
  in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
  if (!in) throw std::runtime_error(path + ": cannot read tensor '" + name + "'");
  return blocks ? dequantize_blocks(t, it->type, cols).reshape(shape) : t;
}

}  // namespace hp
