#include "decode/bench.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>

#include "core/error.h"
#include "decode/generate.h"
#include "decode/sequence_decoder.h"
#include "io/safetensors.h"
#include "models/quantize.h"

namespace lockstep {

namespace {
bool contains(const std::string& s, const std::string& p) { return s.find(p) != std::string::npos; }
}  // namespace

bool is_routed_expert_tensor(const std::string& name) {
  // mlp.experts.* (Qwen), <layer>.experts.* (Gemma 4), mlp.switch_mlp.* (MLX).
  return contains(name, ".experts.") || contains(name, ".switch_mlp.");
}

Workload workload_of(const std::string& dir, const ModelConfig& c, int64_t kv_elem_bytes,
                     int quantize_bits, int64_t quantize_group_size) {
  auto ckpt = Checkpoint::open(dir);
  const bool untied = ckpt->has("lm_head.weight");
  // One decode token reads k of a layer's E routed experts (their codes, scales and biases).
  const double routed_share = c.num_experts > 0 ? static_cast<double>(c.num_experts_per_tok) /
                                                      static_cast<double>(c.num_experts)
                                                : 1.0;
  Workload w;
  w.routed_share = routed_share;
  for (const std::string& name : ckpt->names()) {
    // Not read by a plain forward: MTP heads, vision towers, and the embedding table when an
    // untied lm_head exists (a forward reads one embedding row per token).
    if (contains(name, "mtp.") || contains(name, "visual.")) continue;
    const bool embed = contains(name, "embed_tokens.");
    if (embed && untied) continue;
    // Gemma 4's per-layer input table: one row per token as well.
    if (contains(name, "embed_tokens_per_layer.")) continue;
    const TensorInfo* t = ckpt->find(name);
    const bool routed = is_routed_expert_tensor(name);
    const double share = routed ? routed_share : 1.0;
    // What QuantizeOnLoad turns into codes: float matrices (and fused expert stacks) whose rows
    // split into groups, routers excepted.
    const bool matrix = (t->shape.size() == 2 && contains(name, ".weight")) ||
                        (t->shape.size() == 3 && routed);
    const bool requantized = quantize_bits > 0 && matrix && !contains(name, "conv1d") &&
                             !quantize_keeps_float(name, false) &&
                             (t->dtype == DType::F32 || t->dtype == DType::BF16 ||
                              t->dtype == DType::F16) &&
                             t->shape.back() % quantize_group_size == 0;
    double bytes = static_cast<double>(t->nbytes);
    if (requantized) {
      const double cols = static_cast<double>(t->shape.back());
      const double rows = static_cast<double>(t->numel()) / cols;
      bytes = rows * cols * quantize_bits / 8 +
              rows * (cols / static_cast<double>(quantize_group_size)) * 4;
    }
    w.weight_bytes += share * bytes;
    if (routed) w.routed_bytes += bytes;
    // Linear parameters: float matrices, or packed codes (32 / bits weights per uint32 word).
    if (matrix && !contains(name, "conv1d")) {
      const double per_element =
          t->dtype == DType::U32 && c.quant_bits > 0 ? 32.0 / static_cast<double>(c.quant_bits)
                                                     : 1.0;
      w.linear_params += share * per_element * static_cast<double>(t->numel());
      // The lm_head: its own matrix, or the embedding table when tied.
      if (contains(name, "lm_head.") || (embed && !untied))
        w.head_params += per_element * static_cast<double>(t->numel());
    }
  }
  int64_t linear = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) linear += c.layer_kind(l) == LayerKind::LinearAttention;
  w.kv_bytes_per_pos = static_cast<double>(c.kv_elements_per_token() * kv_elem_bytes);
  w.attn_flops_per_pos = 0;  // q.k and p.v of every full-attention layer
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    if (c.layer_kind(l) == LayerKind::FullAttention)
      w.attn_flops_per_pos += 4.0 * c.num_attention_heads * c.head_dim_of(l);
  const double state = static_cast<double>(c.linear_num_value_heads) * c.linear_key_head_dim *
                       c.linear_value_head_dim;
  w.state_bytes = linear * state * sizeof(float);
  w.state_flops = linear * state * 7;  // decay, two FMAs per pass, two passes
  return w;
}

std::vector<BenchRun> run_bench(Model& model, const BenchOptions& o) {
  if (o.prompt_tokens < 1 || o.gen_tokens < 1) fail("bench: -p and -n must be at least 1");
  if (o.repetitions < 1) fail("bench: --repetitions must be at least 1");
  std::mt19937_64 rng(o.seed);
  const int64_t vocab = model.config().vocab_size;
  std::vector<BenchRun> runs;
  for (int r = 0; r <= o.repetitions; ++r) {  // r == 0 warms up (pages the weights in)
    std::vector<int32_t> prompt(o.prompt_tokens);
    for (int32_t& id : prompt) id = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
    GenerateOptions g;
    g.max_tokens = o.gen_tokens + 1;  // the first token comes from the prefill forward
    g.drafter = o.drafter;
    g.draft_width = o.draft_width;
    g.constraint = o.constraint;
    const GenerateResult res = generate(model, prompt, g);
    if (r == 0) continue;
    BenchRun run;
    run.prefill_seconds = res.stats.prefill_seconds;
    run.decode_seconds = res.stats.decode_seconds;
    run.decoded = res.stats.generated_tokens - 1;
    runs.push_back(run);
  }
  return runs;
}

std::vector<BatchBenchRun> run_batch_bench(Model& model, const BatchBenchOptions& o) {
  if (o.batch < 1) fail("bench: --batch must be at least 1");
  if (o.prompt_tokens < 1 || o.gen_tokens < 1) fail("bench: -p and -n must be at least 1");
  if (o.repetitions < 1) fail("bench: --repetitions must be at least 1");
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  std::mt19937_64 rng(o.seed);
  const int64_t vocab = model.config().vocab_size;
  GenerateOptions g;  // no EOS ids: every sequence decodes all gen_tokens steps
  g.max_tokens = o.gen_tokens + 1;  // the first token comes from the prefill
  g.prefill_chunk = o.prefill_chunk;
  std::vector<BatchBenchRun> runs;
  for (int r = 0; r <= o.repetitions; ++r) {  // r == 0 warms up (weights paged in, graphs built)
    std::vector<std::unique_ptr<SequenceDecoder>> seqs;
    for (int64_t i = 0; i < o.batch; ++i) {
      std::vector<int32_t> prompt(o.prompt_tokens);
      for (int32_t& id : prompt) id = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
      seqs.push_back(std::make_unique<SequenceDecoder>(model, std::move(prompt), g));
    }
    BatchBenchRun run;
    const Clock::time_point t0 = Clock::now();
    for (auto& s : seqs)
      while (s->prefilling()) {
        const std::vector<ForwardItem> items = {s->next_item()};
        s->consume(model.forward(items), 0);
      }
    run.prefill_seconds = since(t0);
    std::vector<ForwardItem> items;
    for (int64_t step = 0; step < o.gen_tokens; ++step) {
      const Clock::time_point t = Clock::now();
      items.clear();
      for (auto& s : seqs) items.push_back(s->next_item());
      const ForwardResult out = model.forward(items);
      for (size_t i = 0; i < seqs.size(); ++i) seqs[i]->consume(out, i);
      run.step_seconds.push_back(since(t));
    }
    for (auto& s : seqs) LOCKSTEP_CHECK(s->finished(), "a batch bench sequence stopped early");
    if (r > 0) runs.push_back(std::move(run));
  }
  return runs;
}

Summary summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.min = v.front();
  s.max = v.back();
  return s;
}

}  // namespace lockstep
