// Protocol Buffers' wire format (see header).
#include "headprune/util/protowire.h"

#include <cstring>
#include <stdexcept>

namespace hp {

ProtoReader::ProtoReader(std::string_view data, std::string what) : data_(data), what_(std::move(what)) {}

void ProtoReader::fail(const std::string& problem) const {
  throw std::runtime_error(what_ + ": byte " + std::to_string(pos_) + ": " + problem);
}

uint64_t ProtoReader::raw_varint() {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos_ >= data_.size()) fail("the message ends inside a varint");
    const auto b = static_cast<unsigned char>(data_[pos_++]);
    v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
  fail("a varint longer than 10 bytes");
}

bool ProtoReader::next() {
  if (pos_ >= data_.size()) return false;
  const uint64_t tag = raw_varint();
  const uint64_t wire = tag & 7, field = tag >> 3;
  if (field == 0 || field > 0x1FFFFFFF) fail("field number " + std::to_string(field) + " is invalid");
  if (wire != 0 && wire != 1 && wire != 2 && wire != 5)
    fail("field " + std::to_string(field) + " has wire type " + std::to_string(wire) +
         " (groups and unknown wire types are not read)");
  field_ = static_cast<uint32_t>(field);
  wire_ = static_cast<Wire>(wire);
  return true;
}

void ProtoReader::expect(Wire w, const char* type) {
  if (wire_ != w)
    fail("field " + std::to_string(field_) + " should be a " + type + ", its wire type is " +
         std::to_string(static_cast<int>(wire_)));
}

uint64_t ProtoReader::varint() {
  expect(Wire::Varint, "varint");
  return raw_varint();
}

int64_t ProtoReader::int_value() { return static_cast<int64_t>(varint()); }

float ProtoReader::float32() {
  expect(Wire::Fixed32, "32-bit float");
  if (data_.size() - pos_ < 4) fail("the message ends inside a 32-bit value");
  uint32_t bits = 0;
  for (int k = 3; k >= 0; --k) bits = (bits << 8) | static_cast<unsigned char>(data_[pos_ + static_cast<size_t>(k)]);
  pos_ += 4;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

std::string_view ProtoReader::bytes() {
  expect(Wire::Bytes, "length-delimited value");
  const uint64_t n = raw_varint();
  if (n > data_.size() - pos_)
    fail("field " + std::to_string(field_) + " claims " + std::to_string(n) + " bytes, " +
         std::to_string(data_.size() - pos_) + " are left");
  const std::string_view v = data_.substr(pos_, static_cast<size_t>(n));
  pos_ += static_cast<size_t>(n);
  return v;
}

void ProtoReader::skip() {
  switch (wire_) {
    case Wire::Varint: raw_varint(); return;
    case Wire::Bytes: bytes(); return;
    case Wire::Fixed64:
    case Wire::Fixed32: {
      const size_t n = wire_ == Wire::Fixed64 ? 8 : 4;
      if (data_.size() - pos_ < n) fail("the message ends inside a fixed-size value");
      pos_ += n;
      return;
    }
  }
}

// ---- writing ----

namespace {
void append_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
}  // namespace

void ProtoWriter::raw_varint(uint64_t v) { append_varint(out_, v); }

void ProtoWriter::varint(uint32_t field, uint64_t v) {
  raw_varint(static_cast<uint64_t>(field) << 3);
  raw_varint(v);
}

void ProtoWriter::float32(uint32_t field, float v) {
  raw_varint((static_cast<uint64_t>(field) << 3) | 5);
  char b[4];
  std::memcpy(b, &v, 4);  // little-endian hosts only (x86-64, aarch64), as everything here
  out_.append(b, 4);
}

void ProtoWriter::bytes(uint32_t field, std::string_view b) {
  out_ += header(field, b.size());
  out_.append(b.data(), b.size());
}

std::string ProtoWriter::header(uint32_t field, uint64_t length) {
  std::string h;
  append_varint(h, (static_cast<uint64_t>(field) << 3) | 2);
  append_varint(h, length);
  return h;
}

size_t ProtoWriter::varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) v >>= 7, ++n;
  return n;
}

}  // namespace hp
