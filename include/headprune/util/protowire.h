// Protocol Buffers' wire format, read field by field: enough to take apart a message whose schema the
// caller knows (SentencePiece's ModelProto: data/sentencepiece.h), and written field by field (ONNX
// models: io/onnx.h). No protobuf library: Debian's
// libprotobuf clashes with the copy inside LibTorch. Every read is bounds-checked; a truncated or
// malformed message is std::runtime_error "WHAT: byte N: PROBLEM". Plain C++ (no LibTorch).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hp {

class ProtoReader {
 public:
  enum class Wire { Varint = 0, Fixed64 = 1, Bytes = 2, Fixed32 = 5 };
  // `data` must outlive the reader; `what` names the message in errors ("tokenizer.model: pieces[3]").
  ProtoReader(std::string_view data, std::string what);

  // Reads the next field's tag; false at the end of the message. Groups (wire types 3, 4) and field
  // number 0 are errors.
  bool next();
  uint32_t field() const { return field_; }
  Wire wire() const { return wire_; }

  // The current field's value, read as the given type; a wire type that does not fit is an error
  // naming the field number.
  uint64_t varint();
  int64_t int_value();         // int32/int64/enum (two's complement of the varint)
  bool boolean() { return varint() != 0; }
  float float32();             // fixed32
  std::string_view bytes();    // length-delimited: a string, bytes or an embedded message
  void skip();                 // any wire type

  const std::string& what() const { return what_; }
  size_t offset() const { return pos_; }
  [[noreturn]] void fail(const std::string& problem) const;

 private:
  uint64_t raw_varint();
  void expect(Wire w, const char* type);
  std::string_view data_;
  std::string what_;
  size_t pos_ = 0;
  uint32_t field_ = 0;
  Wire wire_ = Wire::Varint;
};

// Appends fields to a message held in memory. A large embedded message can instead be streamed by the
// caller: its tag and length (header()) then its bytes, the length computed beforehand (the sizes
// below say how many bytes each field takes).
class ProtoWriter {
 public:
  void varint(uint32_t field, uint64_t v);
  void int_value(uint32_t field, int64_t v) { varint(field, static_cast<uint64_t>(v)); }
  void float32(uint32_t field, float v);
  void bytes(uint32_t field, std::string_view b);  // a string, bytes or an embedded message
  void message(uint32_t field, const ProtoWriter& m) { bytes(field, m.data()); }
  const std::string& data() const { return out_; }

  // The tag and length prefix of a length-delimited field of `length` bytes.
  static std::string header(uint32_t field, uint64_t length);
  static size_t varint_size(uint64_t v);

 private:
  void raw_varint(uint64_t v);
  std::string out_;
};

}  // namespace hp
