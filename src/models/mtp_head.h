// The Qwen3.5 / Qwen3-Next multi-token-prediction head as a drafter (model.h, MtpDrafter).
//
// Slot p: e = pre_fc_norm_embedding(embed(t_{p+1})), g = pre_fc_norm_hidden(h_p),
// x = fc([e | g]) (embedding first), then one gated full-attention decoder layer (mtp.layers.0,
// zero-centred norms, its own KV over slots 0..p, rotary position p), then mtp.norm; the backbone's
// lm_head gives logits for t_{p+2}, and the post-mtp.norm vector is the hidden for a chained step.
#pragma once

#include <memory>
#include <string>

#include "io/safetensors.h"
#include "kernels/rope_table.h"
#include "models/model.h"

namespace lockstep {

struct MtpShared {
  const ModelConfig* config;
  kernels::Weight embed, lm_head;    // the backbone's
  const kernels::RopeTable* rope;    // the backbone's rotary table
  kernels::Backend* backend;         // the backbone's (weights above are placed in it)
};

// nullptr when the checkpoint carries no mtp.* tensors (transformers saves drop them).
std::unique_ptr<MtpDrafter> load_mtp_head(const Checkpoint& ckpt, const MtpShared& shared,
                                          const ModelOptions& options);

}  // namespace lockstep
