// Safetensors round trips and, mostly, the errors a corrupt or incomplete checkpoint must produce:
// each one a lockstep::Error that names the file (and tensor), never a crash.
#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <unistd.h>

#include "core/error.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("lockstep_st_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes a raw safetensors file with the given header text and data size.
  // declared_len 0 means "the header's real length".
  void write_raw(const std::string& name, const std::string& header, size_t data_bytes,
                 uint64_t declared_len = 0) {
    std::ofstream out(path(name), std::ios::binary);
    uint64_t n = declared_len != 0 ? declared_len : header.size();
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>(n >> (8 * i)));
    out << header << std::string(data_bytes, '\0');
  }
  fs::path dir_;
};

// Expects `fn` to throw a lockstep::Error whose message contains every one of `parts`.
void expect_error(const std::function<void()>& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
  } catch (const Error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message \"" << e.what() << "\" lacks \"" << p << "\"";
    return;
  }
  ADD_FAILURE() << "no lockstep::Error thrown";
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

TEST_F(SafetensorsTest, RoundTripEveryDtype) {
  std::vector<TensorToWrite> ts;
  const DType all[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32,
                       DType::I64, DType::U8,  DType::I8,   DType::U32, DType::BOOL};
  uint8_t seed = 1;
  for (DType d : all) {
    std::vector<int64_t> shape = {3, 5};
    ts.push_back({"t." + std::string(dtype_name(d)), d, shape, pattern(15 * dtype_size(d), seed++)});
  }
  ts.push_back({"scalar", DType::F32, {}, pattern(4, 99)});
  ts.push_back({"empty", DType::F32, {0, 4}, {}});
  write_safetensors(path("model.safetensors"), ts, {{"format", "pt"}});

  auto f = SafetensorsFile::open(path("model.safetensors"));
  EXPECT_EQ(f->metadata().at("format"), "pt");
  EXPECT_EQ(f->tensors().size(), ts.size());
  for (const auto& w : ts) {
    const TensorInfo& t = f->tensors().at(w.name);
    EXPECT_EQ(t.dtype, w.dtype) << w.name;
    EXPECT_EQ(t.shape, w.shape) << w.name;
    ASSERT_EQ(t.nbytes, w.bytes.size()) << w.name;
    if (t.nbytes) {
      EXPECT_EQ(std::memcmp(t.data, w.bytes.data(), t.nbytes), 0) << w.name;
    }
  }
  EXPECT_EQ(f->tensors().at("t.F32").shape_string(), "[3, 5]");
  EXPECT_EQ(f->tensors().at("scalar").numel(), 1);
  EXPECT_EQ(f->tensors().at("scalar").shape_string(), "[]");

  // Header is padded to 8 bytes so the data start is aligned.
  std::ifstream in(path("model.safetensors"), std::ios::binary);
  uint64_t len = 0;
  in.read(reinterpret_cast<char*>(&len), 8);
  EXPECT_EQ(len % 8, 0u);

  auto ck = Checkpoint::open(dir_.string());
  EXPECT_TRUE(ck->has("t.BF16"));
  EXPECT_EQ(ck->find("nope"), nullptr);
  EXPECT_EQ(ck->names().size(), ts.size());
  EXPECT_EQ(ck->bytes_by_dtype().at(DType::BF16), 30u);
  EXPECT_EQ(ck->require("t.F32", {3, 5}).nbytes, 60u);
}

TEST_F(SafetensorsTest, StreamingWriterInPieces) {
  std::vector<TensorHeader> hs = {{"a", DType::F32, {4}}, {"z", DType::F32, {0}},
                                  {"b", DType::BF16, {3}}};
  auto bytes = pattern(22, 5);
  {
    SafetensorsWriter w(path("s.safetensors"), hs);
    w.write(bytes.data(), 3);
    w.write(bytes.data() + 3, 19);
    w.finish();
  }
  auto f = SafetensorsFile::open(path("s.safetensors"));
  EXPECT_EQ(std::memcmp(f->tensors().at("b").data, bytes.data() + 16, 6), 0);
  {
    SafetensorsWriter w(path("short.safetensors"), hs);
    w.write(bytes.data(), 10);
    expect_error([&] { w.finish(); }, {"short.safetensors", "tensor a", "10 of 16 bytes"});
  }
  EXPECT_FALSE(fs::exists(path("short.safetensors")));
  EXPECT_FALSE(fs::exists(path("short.safetensors.tmp")));
  expect_error([&] { write_safetensors(path("x"), {{"a", DType::F32, {2}, {1, 2, 3}}}); },
               {"tensor a", "8 bytes"});
}

TEST_F(SafetensorsTest, ShardedIndex) {
  write_safetensors(path("model-00001-of-00002.safetensors"),
                    {{"a", DType::F32, {2}, pattern(8, 1)}, {"b", DType::BF16, {2}, pattern(4, 2)}});
  write_safetensors(path("model-00002-of-00002.safetensors"),
                    {{"c", DType::F16, {1, 2}, pattern(4, 3)}});
  std::ofstream(path("model.safetensors.index.json"))
      << R"({"metadata": {"total_size": 16}, "weight_map": {"a": "model-00001-of-00002.safetensors",
          "b": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}})";
  auto ck = Checkpoint::open(dir_.string());
  EXPECT_EQ(ck->names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(ck->total_bytes(), 16u);
  EXPECT_EQ(ck->require("c").file, path("model-00002-of-00002.safetensors"));
  EXPECT_EQ(ck->bytes_by_dtype().at(DType::F16), 4u);
}

TEST_F(SafetensorsTest, MissingShard) {
  write_safetensors(path("one.safetensors"), {{"a", DType::F32, {2}, pattern(8, 1)}});
  std::ofstream(path("model.safetensors.index.json"))
      << R"({"weight_map": {"a": "one.safetensors", "b": "two.safetensors"}})";
  expect_error([&] { Checkpoint::open(dir_.string()); },
               {"model.safetensors.index.json", "two.safetensors", "tensor b", "does not exist"});
}

TEST_F(SafetensorsTest, TensorInIndexMissingFromShard) {
  write_safetensors(path("one.safetensors"), {{"a", DType::F32, {2}, pattern(8, 1)}});
  std::ofstream(path("model.safetensors.index.json"))
      << R"({"weight_map": {"a": "one.safetensors", "ghost": "one.safetensors"}})";
  expect_error([&] { Checkpoint::open(dir_.string()); },
               {"model.safetensors.index.json", "ghost", "one.safetensors"});
}

TEST_F(SafetensorsTest, BadIndexJson) {
  std::ofstream(path("model.safetensors.index.json")) << "{ nope";
  expect_error([&] { Checkpoint::open(dir_.string()); }, {"index.json", "not valid JSON"});
  std::ofstream(path("model.safetensors.index.json")) << R"({"metadata": {}})";
  expect_error([&] { Checkpoint::open(dir_.string()); }, {"index.json", "weight_map"});
}

TEST_F(SafetensorsTest, EmptyDirectory) {
  expect_error([&] { Checkpoint::open(dir_.string()); }, {dir_.string(), "model.safetensors"});
  expect_error([&] { Checkpoint::open(path("absent")); }, {"absent"});
}

TEST_F(SafetensorsTest, RequireShapeAndDtype) {
  write_safetensors(path("model.safetensors"), {{"w", DType::BF16, {4, 2}, pattern(16, 1)}});
  auto ck = Checkpoint::open(dir_.string());
  expect_error([&] { ck->require("w", {2, 4}); },
               {dir_.string(), "tensor w", "expected shape [2, 4]", "found [4, 2]",
                "model.safetensors"});
  expect_error([&] { ck->require("missing.weight"); }, {"tensor missing.weight", "is missing"});
  expect_error([&] { ck->require("w", {4, 2}, {DType::F32, DType::F16}); },
               {"tensor w", "expected dtype F32 or F16", "found BF16"});
  EXPECT_EQ(ck->require("w", {4, 2}, {DType::BF16}).dtype, DType::BF16);
  EXPECT_EQ(ck->require("w").nbytes, 16u);
}

TEST_F(SafetensorsTest, TruncatedFiles) {
  std::ofstream(path("tiny.safetensors")) << "abc";
  expect_error([&] { SafetensorsFile::open(path("tiny.safetensors")); },
               {"tiny.safetensors", "3 bytes", "too short"});
  std::ofstream(path("empty.safetensors"));
  expect_error([&] { SafetensorsFile::open(path("empty.safetensors")); }, {"empty.safetensors"});
  // A real file cut short in the data.
  write_safetensors(path("full.safetensors"), {{"w", DType::F32, {16}, pattern(64, 1)}});
  fs::resize_file(path("full.safetensors"), fs::file_size(path("full.safetensors")) - 10);
  expect_error([&] { SafetensorsFile::open(path("full.safetensors")); },
               {"full.safetensors", "tensor w", "past the end"});
  // ...and cut short inside the header.
  fs::resize_file(path("full.safetensors"), 20);
  expect_error([&] { SafetensorsFile::open(path("full.safetensors")); },
               {"full.safetensors", "header length", "past the end"});
}

TEST_F(SafetensorsTest, HeaderLengthPastEof) {
  write_raw("h.safetensors", "{}", 0, 1'000'000'000'000ULL);
  expect_error([&] { SafetensorsFile::open(path("h.safetensors")); },
               {"h.safetensors", "header length 1000000000000"});
  write_raw("h2.safetensors", "{}", 0, ~uint64_t{1});  // 2^64 - 2: must not wrap around
  expect_error([&] { SafetensorsFile::open(path("h2.safetensors")); }, {"h2.safetensors"});
}

TEST_F(SafetensorsTest, BadHeaderJson) {
  write_raw("bad.safetensors", "{\"w\": {\"dtype\": ", 0);
  expect_error([&] { SafetensorsFile::open(path("bad.safetensors")); },
               {"bad.safetensors", "not valid JSON"});
  write_raw("arr.safetensors", "[1, 2]", 0);
  expect_error([&] { SafetensorsFile::open(path("arr.safetensors")); },
               {"arr.safetensors", "must be a JSON object"});
}

TEST_F(SafetensorsTest, BadEntries) {
  struct Case {
    std::string header;
    size_t data;
    std::vector<std::string> parts;
  };
  const Case cases[] = {
      {R"({"w": {"shape": [2], "data_offsets": [0, 8]}})", 8, {"tensor w", "\"dtype\""}},
      {R"({"w": {"dtype": "F32", "data_offsets": [0, 8]}})", 8, {"tensor w", "\"shape\""}},
      {R"({"w": {"dtype": "F32", "shape": [2]}})", 8, {"tensor w", "\"data_offsets\""}},
      {R"({"w": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 8]}})", 8,
       {"tensor w", "unknown dtype", "Q4"}},
      {R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8,
       {"tensor w", "F32 [3] needs 12 bytes", "hold 8"}},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})", 8,
       {"tensor w", "past the end"}},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", 8,
       {"tensor w", "begin after end"}},
      {R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8,
       {"tensor w", "non-negative"}},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", 8,
       {"tensor w", "data_offsets"}},
      {R"({"w": {"dtype": "F32", "shape": [4611686018427387904, 8], "data_offsets": [0, 8]}})", 8,
       {"tensor w", "too large"}},
      {R"({"w": 5})", 8, {"tensor w", "expected an object"}},
      {R"({"__metadata__": 5})", 0, {"__metadata__"}},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
       12, {"tensors a and b overlap"}},
  };
  int i = 0;
  for (const Case& c : cases) {
    std::string name = "case" + std::to_string(i++) + ".safetensors";
    write_raw(name, c.header, c.data);
    try {
      SafetensorsFile::open(path(name));
      ADD_FAILURE() << "no error for " << c.header;
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(name), std::string::npos) << msg;
      for (const auto& p : c.parts) EXPECT_NE(msg.find(p), std::string::npos) << msg << " / " << p;
    }
  }
}

}  // namespace
}  // namespace lockstep
