// safetensors reader/writer: round trip of every dtype, and malformed files.
#include <cstring>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "headprune/io/files.h"
#include "headprune/io/safetensors.h"
#include "test_util.h"

namespace hp {
namespace {

std::string parse_error_of(const std::string& bytes) {
  try {
    parse_safetensors(bytes, "f.safetensors");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// A file with a hand-written header and `data` bytes.
std::string make_file(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(&out[0], &n, 8);
  return out + header + data;
}

TEST(Safetensors, RoundTripsEveryDtypeAndMetadata) {
  TensorMap m;
  m["a.f32"] = torch::randn({3, 4});
  m["b.f64"] = torch::randn({2}, torch::kDouble);
  m["c.f16"] = torch::randn({5}).to(torch::kHalf);
  m["d.bf16"] = torch::randn({2, 2}).to(torch::kBFloat16);
  m["e.i64"] = torch::arange(6, torch::kLong).view({2, 3});
  m["f.i32"] = torch::arange(4, torch::kInt);
  m["g.i8"] = torch::tensor({-3, 4}, torch::kChar);
  m["h.u8"] = torch::tensor({200, 1}, torch::kByte);
  m["i.bool"] = torch::tensor({true, false});
  m["j.empty"] = torch::zeros({0, 7});
  m["k.scalar"] = torch::tensor(2.5);
  m["l.noncontig"] = torch::randn({4, 3}).t();
  auto bytes = serialize_safetensors(m, {{"k", "v"}});
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u) << "data section should be 8-byte aligned";
  auto f = parse_safetensors(bytes, "mem");
  ASSERT_EQ(f.tensors.size(), m.size());
  EXPECT_EQ(f.metadata.at("k"), "v");
  for (const auto& kv : m) {
    const auto& got = f.tensors.at(kv.first);
    EXPECT_EQ(got.scalar_type(), kv.second.scalar_type()) << kv.first;
    EXPECT_EQ(got.sizes(), kv.second.sizes()) << kv.first;
    EXPECT_TRUE(got.equal(kv.second)) << kv.first;
  }
}

TEST(Safetensors, ReadsAHandWrittenFile) {
  // Two little-endian float32 values 1.0 and -2.0 (0x3f800000, 0xc0000000).
  const std::string data("\x00\x00\x80\x3f\x00\x00\x00\xc0", 8);
  auto f = parse_safetensors(make_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data), "x");
  EXPECT_EQ(f.tensors.at("w")[0].item<float>(), 1.0f);
  EXPECT_EQ(f.tensors.at("w")[1].item<float>(), -2.0f);
}

TEST(Safetensors, MalformedFilesAreClearErrors) {
  const std::string ok_header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string data(8, '\0');
  EXPECT_NE(parse_error_of("abc").find("too short"), std::string::npos);
  auto good = make_file(ok_header, data);
  EXPECT_NE(parse_error_of(good.substr(0, 20)).find("exceeds the file size"), std::string::npos);
  EXPECT_NE(parse_error_of(good.substr(0, good.size() - 3)).find("beyond the end of the data section"), std::string::npos);
  EXPECT_NE(parse_error_of(make_file("{\"w\": [1, 2", data)).find("not valid JSON"), std::string::npos);
  EXPECT_NE(parse_error_of(make_file("[1]", data)).find("must be a JSON object"), std::string::npos);
  EXPECT_NE(parse_error_of(make_file(R"({"w":{"dtype":"F99","shape":[2],"data_offsets":[0,8]}})", data)).find("unknown dtype 'F99'"),
            std::string::npos);
  EXPECT_NE(parse_error_of(make_file(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data)).find("needs 12 bytes"),
            std::string::npos);
  EXPECT_NE(parse_error_of(make_file(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data)).find("non-negative"),
            std::string::npos);
  EXPECT_NE(parse_error_of(make_file(R"({"w":{"dtype":"F32","shape":[2]}})", data)).find("tensor 'w'"), std::string::npos);
  EXPECT_NE(parse_error_of(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                               R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                               data))
                .find("overlap"),
            std::string::npos);
  std::string huge(8, '\xff');
  EXPECT_NE(parse_error_of(huge).find("implausibly large"), std::string::npos);
  EXPECT_NE(parse_error_of(make_file(R"({"__metadata__":{"a":1}})", "")).find("must be a string"), std::string::npos);
}

TEST(Safetensors, WriteIsAtomicAndReadNamesThePath) {
  test::TempDir dir;
  const std::string path = dir / "w.safetensors";
  write_safetensors(path, {{"x", torch::ones({2})}});
  EXPECT_TRUE(read_safetensors(path).tensors.at("x").equal(torch::ones({2})));
  try {
    read_safetensors(dir / "missing.safetensors");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.safetensors"), std::string::npos);
  }
  // A failing write leaves the old file intact and no temp files behind.
  EXPECT_THROW(write_safetensors(path, {{"bad", torch::ones({2}, torch::kComplexFloat)}}), std::invalid_argument);
  EXPECT_TRUE(read_safetensors(path).tensors.at("x").equal(torch::ones({2})));
  int n_files = 0;
  for (const auto& e : list_directory(dir.path)) n_files += e.is_file;
  EXPECT_EQ(n_files, 1);
}

}  // namespace
}  // namespace hp
