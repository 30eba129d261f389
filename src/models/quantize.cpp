#include "models/quantize.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "kernels/quant_format.h"

namespace lockstep {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool is_float(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }


// A stack of expert matrices [E][rows][cols]: transformers 5's fused experts.gate_up_proj /
// experts.down_proj, or a float switch_mlp.*.weight. Quantized as E * rows rows, so the output is
// MLX's 3-D switch_mlp form under the same name (codes, .scales and .biases all [E][rows][...]).
bool is_expert_stack(const TensorInfo& t) {
  return t.shape.size() == 3 && (ends_with(t.name, "experts.gate_up_proj") ||
                                 ends_with(t.name, "experts.down_proj") ||
                                 ends_with(t.name, ".weight"));
}

// A float matrix (or expert stack) the model multiplies by.
bool is_matrix(const TensorInfo& t) {
  return is_float(t.dtype) &&
         ((ends_with(t.name, ".weight") && t.shape.size() == 2) || is_expert_stack(t));
}

// ... that the group size fits.
bool quantizable(const TensorInfo& t, const QuantizeOptions& o) {
  return is_matrix(t) && t.shape.back() % o.group_size == 0;
}



// The input's config.json with MLX's "quantization" block (and its "quantization_config" copy,
// as mlx-lm writes both); matrices left in float are listed by module path as false.
void write_config(const QuantizeOptions& o, const std::vector<std::string>& kept_matrices) {
  const fs::path in = fs::path(o.in_dir) / "config.json";
  std::ifstream f(in);
  if (!f) fail(in.string(), ": cannot read");
  nlohmann::ordered_json config;
  try {
    config = nlohmann::ordered_json::parse(f);
  } catch (const std::exception& e) {
    fail(in.string(), ": not valid JSON (", e.what(), ")");
  }
  if (config.contains("quantization"))
    fail(in.string(), ": the checkpoint is already quantized");
  nlohmann::ordered_json q = {{"group_size", o.group_size}, {"bits", o.bits}, {"mode", "affine"}};
  for (const std::string& name : kept_matrices) q[tensor_stem(name)] = false;
  config["quantization"] = q;
  config["quantization_config"] = q;
  std::ofstream out(fs::path(o.out_dir) / "config.json");
  out << config.dump(2) << "\n";
  if (!out) fail(o.out_dir, "/config.json: cannot write");
}

// Tokenizer, generation config, chat template: every top-level file except weights, config and
// the model card (which describes the float model).
void copy_side_files(const QuantizeOptions& o) {
  for (const auto& e : fs::directory_iterator(o.in_dir)) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    if (name == "config.json" || ends_with(name, ".safetensors") ||
        ends_with(name, ".safetensors.index.json") || name.rfind("README", 0) == 0 ||
        name[0] == '.')
      continue;
    fs::copy_file(e.path(), fs::path(o.out_dir) / name, fs::copy_options::overwrite_existing);
  }
}

}  // namespace

std::string tensor_stem(const std::string& name) {
  return ends_with(name, ".weight") ? name.substr(0, name.size() - 7) : name;
}

bool quantize_keeps_float(const std::string& name, bool keep_embeddings) {
  if (ends_with(name, "mlp.gate.weight") || ends_with(name, "shared_expert_gate.weight"))
    return true;
  return keep_embeddings && (ends_with(name, "embed_tokens.weight") || name == "lm_head.weight");
}

QuantizeSummary quantize_checkpoint(const QuantizeOptions& o) {
  if (o.bits != 4 && o.bits != 8) fail("--bits: expected 4 or 8, found ", o.bits);
  if (o.group_size <= 0 || o.group_size % kernels::kLanes != 0)
    fail("--group-size: expected a positive multiple of ", kernels::kLanes, ", found ",
         o.group_size);
  if (fs::exists(o.out_dir) && fs::equivalent(o.in_dir, o.out_dir))
    fail("quantize: the output directory is the input directory");
  auto ckpt = Checkpoint::open(o.in_dir);
  fs::create_directories(o.out_dir);
  ThreadPool pool(o.threads);

  // Header first (the writer streams), in checkpoint name order.
  std::vector<const TensorInfo*> tensors;
  std::vector<TensorHeader> headers;
  std::vector<std::string> kept_matrices;
  QuantizeSummary sum;
  for (const std::string& name : ckpt->names()) {
    const TensorInfo& t = *ckpt->find(name);
    tensors.push_back(&t);
    sum.bytes_in += t.nbytes;
    const bool keep = quantize_keeps_float(name, o.keep_embeddings);
    if (!quantizable(t, o) || keep) {
      if (is_matrix(t)) kept_matrices.push_back(name);
      headers.push_back({name, t.dtype, t.shape});
      ++sum.kept;
      continue;
    }
    const int64_t cols = t.shape.back();
    const DType sd = kernels::default_scale_dtype(t.dtype);
    auto shape_with_last = [&](int64_t last) {
      std::vector<int64_t> s = t.shape;
      s.back() = last;
      return s;
    };
    headers.push_back({name, DType::U32, shape_with_last(cols * o.bits / 32)});
    headers.push_back({tensor_stem(name) + ".scales", sd, shape_with_last(cols / o.group_size)});
    headers.push_back({tensor_stem(name) + ".biases", sd, shape_with_last(cols / o.group_size)});
    ++sum.quantized;
  }
  const fs::path out_file = fs::path(o.out_dir) / "model.safetensors";
  SafetensorsWriter writer(out_file.string(), headers, {{"format", "mlx"}});
  for (const TensorInfo* t : tensors) {
    const bool keep = quantize_keeps_float(t->name, o.keep_embeddings);
    if (!quantizable(*t, o) || keep) {
      writer.write(t->data, t->nbytes);
      continue;
    }
    kernels::Weight w;  // an expert stack [E][rows][cols] quantizes as E * rows rows
    w.dtype = t->dtype;
    w.cols = t->shape.back();
    w.rows = t->numel() / w.cols;
    w.data = t->data;
    const kernels::QuantizedMatrix q = kernels::quantize_affine(
        w, o.bits, o.group_size, kernels::default_scale_dtype(t->dtype), pool);
    writer.write(q.words.data(), q.words.size() * sizeof(uint32_t));
    writer.write(q.scales.data(), q.scales.size());
    writer.write(q.biases.data(), q.biases.size());
  }
  writer.finish();
  sum.bytes_out = writer.total_data_bytes();
  write_config(o, kept_matrices);
  copy_side_files(o);
  return sum;
}

}  // namespace lockstep
