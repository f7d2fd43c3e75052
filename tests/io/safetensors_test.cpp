#include "runtime/io/safetensors.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace weft::io {
namespace {

const std::string kPythonFile = std::string(WEFT_IO_TESTDATA) + "/python_written.safetensors";

// A fresh path in the test's temporary directory.
std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/weft_io_" + std::to_string(getpid()) + "_" + name;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Builds a file from a raw header text and a data section.
std::string RawFile(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

// The message of the SafetensorsError that `open` throws, or "" if it does not.
template <typename F>
std::string ErrorOf(F&& action) {
  try {
    action();
  } catch (const SafetensorsError& e) {
    return e.what();
  }
  return "";
}

TEST(SafetensorsTest, ReadsFileWrittenByTheReferenceImplementation) {
  SafetensorsFile file = SafetensorsFile::Open(kPythonFile);
  EXPECT_EQ(file.Keys().size(), 5u);
  EXPECT_EQ(file.metadata().at("source"), "weft test");

  const TensorInfo& q = file.Info("transformer_blocks.0.attn.to_q.weight");
  EXPECT_EQ(q.dtype, "F32");
  EXPECT_EQ(q.shape, (std::vector<int64_t>{4, 6}));
  at::Tensor expected_q = at::arange(24, at::kFloat).reshape({4, 6}) / 8;
  EXPECT_TRUE(at::equal(file.Load("transformer_blocks.0.attn.to_q.weight"), expected_q));

  at::Tensor bias = file.Load("transformer_blocks.0.attn.to_q.bias");
  EXPECT_EQ(bias.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(at::equal(bias.to(at::kFloat), at::tensor({1.5f, -2.0f, 0.25f, 3.0f})));
  EXPECT_TRUE(at::equal(file.Load("img_ids"), at::arange(6, at::kLong).reshape({3, 2})));
  EXPECT_TRUE(at::equal(file.Load("mask"), at::tensor({1, 0, 1}).to(at::kBool)));
  at::Tensor scalar = file.Load("scalar", at::kFloat);
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.item<float>(), 7.0f);
}

TEST(SafetensorsTest, ConvertsDtypeOnLoad) {
  SafetensorsFile file = SafetensorsFile::Open(kPythonFile);
  at::Tensor bias = file.Load("transformer_blocks.0.attn.to_q.bias", at::kFloat);
  EXPECT_EQ(bias.scalar_type(), at::kFloat);
  EXPECT_FLOAT_EQ(bias[3].item<float>(), 3.0f);
}

TEST(SafetensorsTest, SliceReadsOnlyTheRequestedRange) {
  SafetensorsFile file = SafetensorsFile::Open(kPythonFile);
  at::Tensor rows = file.LoadSlice("transformer_blocks.0.attn.to_q.weight", 0, 1, 2);
  EXPECT_TRUE(at::equal(rows, (at::arange(24, at::kFloat).reshape({4, 6}) / 8).narrow(0, 1, 2)));
  at::Tensor cols = file.LoadSlice("transformer_blocks.0.attn.to_q.weight", 1, 3, 3);
  EXPECT_TRUE(cols.is_contiguous());
  EXPECT_TRUE(at::equal(cols, (at::arange(24, at::kFloat).reshape({4, 6}) / 8).narrow(1, 3, 3)));
  EXPECT_EQ(ErrorOf([&] { file.LoadSlice("img_ids", 0, 2, 2); }),
            kPythonFile + ": tensor `img_ids`: slice [2, 4) of dim 0 is outside its extent 3");
  EXPECT_EQ(ErrorOf([&] { file.LoadSlice("img_ids", 2, 0, 1); }),
            kPythonFile + ": tensor `img_ids`: slice dim 2 but the tensor has rank 2");
}

TEST(SafetensorsTest, ViewOutlivesTheFileObject) {
  at::Tensor view;
  {
    SafetensorsFile file = SafetensorsFile::Open(kPythonFile);
    view = file.View("img_ids");
  }
  EXPECT_EQ(view.sum().item<int64_t>(), 15);
}

TEST(SafetensorsTest, WriterRoundTripsEveryDtype) {
  std::map<std::string, at::Tensor> tensors = {
      {"a.f64", at::randn({3, 2}, at::kDouble)},   {"b.f32", at::randn({5}, at::kFloat)},
      {"c.f16", at::randn({2, 2}).to(at::kHalf)},  {"d.bf16", at::randn({7}).to(at::kBFloat16)},
      {"e.i64", at::arange(4, at::kLong)},         {"f.i32", at::arange(3, at::kInt)},
      {"g.i8", at::arange(3, at::kChar)},          {"h.u8", at::arange(3, at::kByte)},
      {"i.bool", at::tensor({1, 0}).to(at::kBool)},       {"j.empty", at::zeros({0, 4})},
      {"k.noncontiguous", at::arange(12, at::kFloat).reshape({3, 4}).t()},
  };
  const std::string path = TempPath("roundtrip.safetensors");
  WriteSafetensors(path, tensors, {{"k", "v"}});
  SafetensorsFile file = SafetensorsFile::Open(path);
  EXPECT_EQ(file.metadata().at("k"), "v");
  ASSERT_EQ(file.Keys().size(), tensors.size());
  for (const auto& [name, tensor] : tensors) {
    at::Tensor back = file.Load(name);
    EXPECT_EQ(back.scalar_type(), tensor.scalar_type()) << name;
    EXPECT_TRUE(at::equal(back, tensor)) << name;
  }
  // The data section starts 8-byte aligned.
  std::string bytes = ReadAll(path);
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | static_cast<uint8_t>(bytes[i]);
  EXPECT_EQ(header % 8, 0u);
  std::remove(path.c_str());
}

TEST(SafetensorsTest, MissingKeySuggestsTheClosestOne) {
  SafetensorsFile file = SafetensorsFile::Open(kPythonFile);
  EXPECT_EQ(ErrorOf([&] { file.Info("transformer_blocks.0.attn.to_k.weight"); }),
            kPythonFile + ": no tensor `transformer_blocks.0.attn.to_k.weight` (5 tensors in file); did you mean "
                          "`transformer_blocks.0.attn.to_q.weight`?");
  EXPECT_EQ(ErrorOf([&] { file.Info("zzz"); }), kPythonFile + ": no tensor `zzz` (5 tensors in file)");
}

struct BadFile {
  const char* name;
  std::string bytes;
  std::string message;  // after "<path>: "
};

TEST(SafetensorsTest, MalformedFilesGiveClearErrors) {
  const std::string good = ReadAll(kPythonFile);
  const std::string f32x2 = std::string(8, '\0');
  const std::vector<BadFile> cases = {
      {"empty", "", "file is 0 bytes, too short for the 8-byte header length (truncated?)"},
      {"length_past_end", RawFile("{}", "").substr(0, 8) + "{",
       "header length field says 2 bytes but the file has 1 bytes after it (truncated or not a safetensors file)"},
      {"truncated_data", good.substr(0, good.size() - 3),
       "tensor `mask`: data_offsets end 157 lies past the data section (154 bytes; truncated file?)"},
      {"not_json", RawFile("{\"a\": ", ""), "header is not a JSON object"},
      {"array_header", RawFile("[1, 2]", ""), "header is not a JSON object"},
      {"unknown_dtype", RawFile(R"({"x":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}})", f32x2),
       "tensor `x`: unknown safetensors dtype `F31`"},
      {"size_mismatch", RawFile(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", f32x2),
       "tensor `x`: holds 8 bytes but F32 shape needs 12"},
      {"reversed", RawFile(R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", f32x2),
       "tensor `x`: data_offsets [8, 0] are reversed"},
      {"negative_shape", RawFile(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", f32x2),
       "tensor `x`: shape entries must be non-negative integers"},
      {"missing_offsets", RawFile(R"({"x":{"dtype":"F32","shape":[2]}})", f32x2),
       "tensor `x`: missing field `data_offsets` = [begin, end]"},
      {"unknown_field", RawFile(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"device":"cuda"}})", f32x2),
       "tensor `x`: unknown header field `device`"},
      {"overlap", RawFile(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", f32x2),
       "tensors `x` and `y` overlap"},
      {"bad_metadata", RawFile(R"({"__metadata__":{"a":1}})", ""), "`__metadata__.a` must be a string"},
  };
  for (const BadFile& bad : cases) {
    const std::string path = TempPath(std::string(bad.name) + ".safetensors");
    WriteAll(path, bad.bytes);
    EXPECT_EQ(ErrorOf([&] { SafetensorsFile::Open(path); }), path + ": " + bad.message) << bad.name;
    std::remove(path.c_str());
  }
  EXPECT_EQ(ErrorOf([] { SafetensorsFile::Open("/nonexistent/w.safetensors"); }),
            "/nonexistent/w.safetensors: cannot open: No such file or directory");
}

}  // namespace
}  // namespace weft::io
