// Protocol Buffers' wire format, read field by field: enough to take apart a message whose schema the
// caller knows (SentencePiece's ModelProto: data/sentencepiece.h). No protobuf library: Debian's
// libprotobuf clashes with the copy inside LibTorch. Every read is bounds-checked; a truncated or
// malformed message is std::runtime_error "WHAT: byte N: PROBLEM". Plain C++ (no LibTorch).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

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

}  // namespace hp
