// Safetensors checkpoints, memory-mapped: one file (model.safetensors), or shards listed by
// model.safetensors.index.json. Tensors are views into the mapping; nothing is copied at load.
// Every malformed input is a lockstep::Error naming the file (and tensor), what was expected and
// what was found: truncated files, bad header JSON, offsets outside the data, unknown dtypes,
// a shard the index names that does not exist.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace lockstep {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // into the file mapping; valid while the file is open
  size_t nbytes = 0;
  std::string file;               // path of the file holding it (for error messages)

  int64_t numel() const;
  std::string shape_string() const;  // "[1024, 4096]"
};

// One memory-mapped .safetensors file.
class SafetensorsFile {
 public:
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a checkpoint directory (single file or sharded), looked up by Hugging Face name.
class Checkpoint {
 public:
  // dir holds model.safetensors, or model.safetensors.index.json and its shards.
  static std::unique_ptr<Checkpoint> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  bool has(const std::string& name) const;
  const TensorInfo* find(const std::string& name) const;  // nullptr if absent
  // The tensor, or an Error: "<dir>: tensor <name> is missing" / "...: expected shape [a, b], found
  // [c, d] in <file>". An empty `shape` skips the shape check.
  const TensorInfo& require(const std::string& name, const std::vector<int64_t>& shape = {}) const;
  // As above, and the dtype must be one of `dtypes`: "...: expected dtype BF16 or F32, found F16".
  const TensorInfo& require(const std::string& name, const std::vector<int64_t>& shape,
                            const std::vector<DType>& dtypes) const;
  std::vector<std::string> names() const;
  size_t total_bytes() const;
  std::map<DType, size_t> bytes_by_dtype() const;

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*> index_;
};

// Writes a .safetensors file (used by make-random, quantize and tests). Data are raw little-endian
// bytes of the given dtype; tensors are written in the order given.
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Streaming writer for checkpoints too large to hold in memory: the header (names, dtypes,
// shapes) is written first, then each tensor's bytes in order, in as many pieces as the caller
// likes. The file appears at `path` only after finish() (written to "<path>.tmp", then renamed).
struct TensorHeader {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};
class SafetensorsWriter {
 public:
  SafetensorsWriter(const std::string& path, const std::vector<TensorHeader>& tensors,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();  // removes the temporary file if finish() was not reached
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Appends bytes of the current tensor (tensors in header order; a tensor may span calls).
  void write(const void* data, size_t nbytes);
  // Checks every tensor got exactly its bytes, flushes and renames into place.
  void finish();
  size_t total_data_bytes() const { return total_; }

 private:
  std::string path_, tmp_path_;
  std::FILE* out_ = nullptr;
  std::vector<TensorHeader> tensors_;
  std::vector<size_t> sizes_;
  size_t current_ = 0, written_in_current_ = 0, total_ = 0;
};

}  // namespace lockstep
