// Safetensors reading. The format: 8 bytes little-endian header length N, N bytes of JSON
// ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}), then the
// data; offsets are relative to the first byte after the header. Every field is validated before
// anything points into the mapping, so a corrupt file is an Error, never a wild read.
#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/file_mappings.h"

namespace lockstep {

namespace fs = std::filesystem;
using json = nlohmann::json;

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorInfo::shape_string() const {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
  TensorInfo t;
  t.shape = shape;
  return t.shape_string();
}

// A non-negative JSON integer, or an Error naming the file, tensor and field.
uint64_t json_uint(const json& v, const std::string& path, const std::string& name,
                   const char* field) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  fail(path, ": tensor ", name, ": ", field, " must hold non-negative integers, found ", v.dump());
}

// Parses one header entry (without its data pointer) and checks it against the data size.
TensorInfo parse_entry(const std::string& path, const std::string& name, const json& e,
                       uint64_t data_size, uint64_t* begin_out) {
  if (!e.is_object())
    fail(path, ": tensor ", name, ": expected an object with dtype, shape and data_offsets, found ",
         e.dump());
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!e.contains(key)) fail(path, ": tensor ", name, ": header entry is missing \"", key, "\"");
  TensorInfo t;
  t.name = name;
  t.file = path;
  const json& dt = e["dtype"];
  if (!dt.is_string()) fail(path, ": tensor ", name, ": dtype must be a string, found ", dt.dump());
  if (!parse_dtype(dt.get<std::string>(), &t.dtype))
    fail(path, ": tensor ", name, ": unknown dtype ", dt.dump(),
         " (expected one of F32, F16, BF16, F64, I32, I64, U8, I8, U32, BOOL)");
  const json& sh = e["shape"];
  if (!sh.is_array()) fail(path, ": tensor ", name, ": shape must be a list, found ", sh.dump());
  // Element count with overflow checks: a hostile shape must not wrap into a small size.
  uint64_t numel = 1;
  for (const json& d : sh) {
    uint64_t dim = json_uint(d, path, name, "shape");
    if (dim > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, dim, &numel))
      fail(path, ": tensor ", name, ": shape ", sh.dump(), " is too large");
    t.shape.push_back(static_cast<int64_t>(dim));
  }
  uint64_t expected_bytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(t.dtype)), &expected_bytes))
    fail(path, ": tensor ", name, ": shape ", sh.dump(), " is too large");
  const json& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2)
    fail(path, ": tensor ", name, ": data_offsets must be [begin, end], found ", off.dump());
  uint64_t begin = json_uint(off[0], path, name, "data_offsets");
  uint64_t end = json_uint(off[1], path, name, "data_offsets");
  if (begin > end)
    fail(path, ": tensor ", name, ": data_offsets [", begin, ", ", end, "] has begin after end");
  if (end > data_size)
    fail(path, ": tensor ", name, ": data_offsets [", begin, ", ", end,
         "] run past the end of the data (", data_size, " bytes; file truncated?)");
  if (end - begin != expected_bytes)
    fail(path, ": tensor ", name, ": ", dtype_name(t.dtype), " ", t.shape_string(), " needs ",
         expected_bytes, " bytes, but data_offsets [", begin, ", ", end, "] hold ", end - begin);
  t.nbytes = static_cast<size_t>(expected_bytes);
  *begin_out = begin;
  return t;
}

}  // namespace

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail(path, ": cannot stat: ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, ": not a regular file");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    fail(path, ": file is ", size, " bytes, too short for a safetensors header (expected >= 8)");
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_err = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (map == MAP_FAILED) fail(path, ": mmap failed: ", std::strerror(map_err));
  f->map_ = map;  // from here the destructor unmaps, also when parsing throws
  f->map_size_ = size;
  note_file_mapping(map, size);
  const uint8_t* bytes = static_cast<const uint8_t*>(map);

  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > size - 8)
    fail(path, ": header length ", header_len, " runs past the end of the file (", size,
         " bytes; truncated or not a safetensors file)");
  const uint64_t data_size = size - 8 - header_len;
  const uint8_t* data = bytes + 8 + header_len;

  json header;
  try {
    header = json::parse(bytes + 8, bytes + 8 + header_len);
  } catch (const json::exception& e) {
    fail(path, ": header is not valid JSON (", e.what(), ")");
  }
  if (!header.is_object()) fail(path, ": header must be a JSON object, found ", header.type_name());

  std::vector<std::pair<uint64_t, const TensorInfo*>> spans;  // for the overlap check
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object())
        fail(path, ": __metadata__ must be an object, found ", it.value().dump());
      for (auto m = it.value().begin(); m != it.value().end(); ++m)
        f->metadata_[m.key()] = m.value().is_string() ? m.value().get<std::string>()
                                                      : m.value().dump();
      continue;
    }
    uint64_t begin = 0;
    TensorInfo t = parse_entry(path, it.key(), it.value(), data_size, &begin);
    t.data = data + begin;
    auto [pos, inserted] = f->tensors_.emplace(it.key(), std::move(t));
    spans.emplace_back(begin, &pos->second);
  }
  // Tensors must not share bytes: two tensors over one range means a corrupt or hostile header.
  std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second->nbytes < b.second->nbytes;
  });
  for (size_t i = 1; i < spans.size(); ++i) {
    const auto& [prev_begin, prev] = spans[i - 1];
    const auto& [cur_begin, cur] = spans[i];
    if (cur_begin < prev_begin + prev->nbytes && cur->nbytes > 0 && prev->nbytes > 0)
      fail(path, ": tensors ", prev->name, " and ", cur->name, " overlap (bytes [", prev_begin,
           ", ", prev_begin + prev->nbytes, ") and [", cur_begin, ", ", cur_begin + cur->nbytes,
           "))");
  }
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) {
    forget_file_mapping(map_);
    ::munmap(map_, map_size_);
  }
}

// ---------------------------------------------------------------------------------------------
// Checkpoint: a directory of one file or of shards.

std::unique_ptr<Checkpoint> Checkpoint::open(const std::string& dir) {
  auto ck = std::make_unique<Checkpoint>();
  ck->dir_ = dir;
  // A path straight to a .safetensors file is accepted too (handy for tools and tests).
  if (fs::is_regular_file(dir)) {
    ck->files_.push_back(SafetensorsFile::open(dir));
    for (const auto& [name, t] : ck->files_.back()->tensors()) ck->index_[name] = &t;
    return ck;
  }
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single_path = fs::path(dir) / "model.safetensors";
  if (fs::exists(index_path)) {
    const std::string ipath = index_path.string();
    std::ifstream in(index_path);
    if (!in) fail(ipath, ": cannot read");
    json index;
    try {
      index = json::parse(in);
    } catch (const json::exception& e) {
      fail(ipath, ": not valid JSON (", e.what(), ")");
    }
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      fail(ipath, ": expected an object with a \"weight_map\" object (tensor name -> shard file)");
    std::map<std::string, SafetensorsFile*> shards;
    for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
      if (!it.value().is_string())
        fail(ipath, ": weight_map[\"", it.key(), "\"] must be a file name, found ",
             it.value().dump());
      const std::string shard = it.value().get<std::string>();
      auto found = shards.find(shard);
      if (found == shards.end()) {
        const fs::path shard_path = fs::path(dir) / shard;
        if (!fs::exists(shard_path))
          fail(ipath, ": shard ", shard, " (holding tensor ", it.key(), ") does not exist at ",
               shard_path.string());
        ck->files_.push_back(SafetensorsFile::open(shard_path.string()));
        found = shards.emplace(shard, ck->files_.back().get()).first;
      }
      const auto& tensors = found->second->tensors();
      auto t = tensors.find(it.key());
      if (t == tensors.end())
        fail(ipath, ": tensor ", it.key(), " is listed in shard ", shard, " but ",
             found->second->path(), " does not contain it");
      ck->index_[it.key()] = &t->second;
    }
    // Tensors present in a shard but absent from the map are still usable; the map wins ties.
    for (const auto& f : ck->files_)
      for (const auto& [name, t] : f->tensors()) ck->index_.emplace(name, &t);
    return ck;
  }
  if (fs::exists(single_path)) {
    ck->files_.push_back(SafetensorsFile::open(single_path.string()));
    for (const auto& [name, t] : ck->files_.back()->tensors()) ck->index_[name] = &t;
    return ck;
  }
  if (!fs::is_directory(dir)) fail(dir, ": no such checkpoint directory");
  fail(dir, ": no model.safetensors or model.safetensors.index.json found");
}

bool Checkpoint::has(const std::string& name) const { return index_.count(name) != 0; }

const TensorInfo* Checkpoint::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

const TensorInfo& Checkpoint::require(const std::string& name,
                                      const std::vector<int64_t>& shape) const {
  const TensorInfo* t = find(name);
  if (t == nullptr) fail(dir_, ": tensor ", name, " is missing");
  if (!shape.empty() && t->shape != shape)
    fail(dir_, ": tensor ", name, ": expected shape ", shape_str(shape), ", found ",
         t->shape_string(), " in ", t->file);
  return *t;
}

const TensorInfo& Checkpoint::require(const std::string& name, const std::vector<int64_t>& shape,
                                      const std::vector<DType>& dtypes) const {
  const TensorInfo& t = require(name, shape);
  if (std::find(dtypes.begin(), dtypes.end(), t.dtype) == dtypes.end()) {
    std::ostringstream want;
    for (size_t i = 0; i < dtypes.size(); ++i) want << (i ? " or " : "") << dtype_name(dtypes[i]);
    fail(dir_, ": tensor ", name, ": expected dtype ", want.str(), ", found ",
         dtype_name(t.dtype), " in ", t.file);
  }
  return t;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [name, t] : index_) out.push_back(name);
  return out;
}

size_t Checkpoint::total_bytes() const {
  size_t n = 0;
  for (const auto& [name, t] : index_) n += t->nbytes;
  return n;
}

std::map<DType, size_t> Checkpoint::bytes_by_dtype() const {
  std::map<DType, size_t> out;
  for (const auto& [name, t] : index_) out[t->dtype] += t->nbytes;
  return out;
}

}  // namespace lockstep
