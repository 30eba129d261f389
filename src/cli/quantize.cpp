// `lockstep quantize -m IN -o OUT --bits 4|8 [--group-size G] [--keep-embeddings]`: writes an
// MLX-layout quantized checkpoint (models/quantize.h) that lockstep, and MLX, load directly.
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "models/quantize.h"

namespace lockstep::cli {
namespace {

const Command kQuantize(
    "quantize", "Write a group-wise affine 4- or 8-bit copy of a checkpoint (MLX layout)",
    [](CLI::App& sub) -> std::function<int()> {
      auto o = std::make_shared<QuantizeOptions>();
      sub.add_option("-m,--model", o->in_dir, "Float checkpoint directory")->required();
      sub.add_option("-o,--output", o->out_dir, "Output directory (created if needed)")
          ->required();
      sub.add_option("--bits", o->bits, "Bits per weight: 4 or 8")
          ->required()
          ->check(CLI::IsMember({4, 8}));
      sub.add_option("--group-size", o->group_size,
                     "Weights per scale/bias group (multiple of 16; default 64)");
      sub.add_flag("--keep-embeddings", o->keep_embeddings,
                   "Keep embed_tokens and lm_head in their float dtype");
      sub.add_option("--threads", o->threads, "Threads (default: all cores)");
      return [o] {
        const QuantizeSummary s = quantize_checkpoint(*o);
        std::fprintf(stderr,
                     "quantize: wrote %s (%d-bit, group %lld): %zu matrices quantized, %zu "
                     "tensors kept, %.1f MB -> %.1f MB\n",
                     o->out_dir.c_str(), o->bits, static_cast<long long>(o->group_size),
                     s.quantized, s.kept, static_cast<double>(s.bytes_in) / 1e6,
                     static_cast<double>(s.bytes_out) / 1e6);
        return 0;
      };
    });

}  // namespace
}  // namespace lockstep::cli
