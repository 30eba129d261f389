// Safetensors writing: 8-byte little-endian header length, a JSON header padded with spaces to a
// multiple of 8 (so the data, and every tensor whose offset is aligned, starts 8-byte aligned in
// a mapping), then the tensors' bytes back to back in the order given.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "io/safetensors.h"

namespace lockstep {

namespace {

// Byte size of a tensor, checked: names unique, not reserved, sizes not overflowing.
size_t checked_size(const std::string& path, const TensorHeader& t) {
  uint64_t n = dtype_size(t.dtype);
  for (int64_t d : t.shape) {
    if (d < 0) fail(path, ": tensor ", t.name, ": negative dimension ", d);
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n))
      fail(path, ": tensor ", t.name, ": shape too large");
  }
  return static_cast<size_t>(n);
}

std::string build_header(const std::string& path, const std::vector<TensorHeader>& tensors,
                         const std::vector<size_t>& sizes,
                         const std::map<std::string, std::string>& metadata) {
  nlohmann::json h = nlohmann::json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorHeader& t = tensors[i];
    if (t.name == "__metadata__" || t.name.empty())
      fail(path, ": invalid tensor name \"", t.name, "\"");
    if (!seen.insert(t.name).second) fail(path, ": tensor ", t.name, " is listed twice");
    h[t.name] = {{"dtype", std::string(dtype_name(t.dtype))},
                 {"shape", t.shape},
                 {"data_offsets", {offset, offset + sizes[i]}}};
    offset += sizes[i];
  }
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

SafetensorsWriter::SafetensorsWriter(const std::string& path,
                                     const std::vector<TensorHeader>& tensors,
                                     const std::map<std::string, std::string>& metadata)
    : path_(path), tmp_path_(path + ".tmp"), tensors_(tensors) {
  for (const auto& t : tensors_) sizes_.push_back(checked_size(path, t));
  const std::string header = build_header(path, tensors_, sizes_, metadata);
  out_ = std::fopen(tmp_path_.c_str(), "wb");
  if (out_ == nullptr) fail(tmp_path_, ": cannot create: ", std::strerror(errno));
  uint8_t len[8];
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  if (std::fwrite(len, 1, 8, out_) != 8 ||
      std::fwrite(header.data(), 1, header.size(), out_) != header.size())
    fail(tmp_path_, ": write failed: ", std::strerror(errno));
  // Skip leading empty tensors so write() always points at one that still wants bytes.
  while (current_ < sizes_.size() && sizes_[current_] == 0) ++current_;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (out_ != nullptr) {
    std::fclose(out_);
    std::error_code ec;
    std::filesystem::remove(tmp_path_, ec);
  }
}

void SafetensorsWriter::write(const void* data, size_t nbytes) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (nbytes > 0) {
    if (out_ == nullptr || current_ >= tensors_.size())
      fail(path_, ": more data written than the header declares");
    size_t take = std::min(nbytes, sizes_[current_] - written_in_current_);
    if (std::fwrite(p, 1, take, out_) != take)
      fail(tmp_path_, ": write failed: ", std::strerror(errno));
    p += take;
    nbytes -= take;
    total_ += take;
    written_in_current_ += take;
    if (written_in_current_ == sizes_[current_]) {
      written_in_current_ = 0;
      ++current_;
      while (current_ < sizes_.size() && sizes_[current_] == 0) ++current_;
    }
  }
}

void SafetensorsWriter::finish() {
  if (out_ == nullptr) fail(path_, ": finish() called twice");
  if (current_ < tensors_.size())
    fail(path_, ": tensor ", tensors_[current_].name, " got ", written_in_current_, " of ",
         sizes_[current_], " bytes before finish()");
  int rc = std::fclose(out_);
  out_ = nullptr;
  if (rc != 0) fail(tmp_path_, ": write failed: ", std::strerror(errno));
  std::error_code ec;
  std::filesystem::rename(tmp_path_, path_, ec);
  if (ec) fail(path_, ": cannot rename from ", tmp_path_, ": ", ec.message());
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<TensorHeader> headers;
  headers.reserve(tensors.size());
  for (const auto& t : tensors) headers.push_back({t.name, t.dtype, t.shape});
  SafetensorsWriter w(path, headers, metadata);
  for (size_t i = 0; i < tensors.size(); ++i) {
    // Each tensor's byte count must match its shape exactly, or offsets would shift.
    size_t want = checked_size(path, headers[i]);
    if (tensors[i].bytes.size() != want)
      fail(path, ": tensor ", tensors[i].name, ": ", dtype_name(tensors[i].dtype), " shape needs ",
           want, " bytes, given ", tensors[i].bytes.size());
    w.write(tensors[i].bytes.data(), tensors[i].bytes.size());
  }
  w.finish();
}

}  // namespace lockstep
