// The KV cache: one pool of fixed-size blocks shared by every sequence of a model (the scheduler
// admits requests by free blocks, not by a fixed split per slot). Block b of layer l holds
// block_tokens positions of keys and of values, each [n_kv_heads][head_dim] elements of the
// backend's kv_dtype() (float32 on the CPU, BF16 on CUDA). Layers may differ in shape (Gemma 4's
// full layers have their own head_dim and KV heads); a block id names the same positions in
// every layer. The storage is reserved as virtual memory up front and the OS commits pages as
// blocks are first written, so a large capacity costs nothing until used.
//
// Blocks are reference counted: a block may be held by several sequences and prefix-cache
// entries at once (a shared prompt prefix is stored once). The rule that keeps shared blocks
// exact: nobody ever writes into a block another holder still reads. A sequence writes only
// positions >= its length, and the only block it already holds that contains such positions is
// the one holding position `length` (its partly filled last block); every block from there on
// must be private (`writable`). Sharing hands out only blocks below that point (`share_prefix`
// of full blocks, or of a whole sequence that then truncates), and going back into a shared
// block (truncate, fork to a shorter length) un-shares it first (`make_writable`, copy on write).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "kernels/ops.h"

namespace lockstep {

struct KvLayerShape {
  int64_t n_kv_heads = 0, head_dim = 0;
};

class KvPool {
 public:
  // The storage lives in `backend`'s memory (when null, host memory of a CPU backend the pool
  // owns).
  KvPool(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim, int64_t block_tokens,
         int64_t capacity_tokens, kernels::Backend* backend = nullptr);
  // One cache per entry of `layers`, each of its own shape.
  KvPool(std::vector<KvLayerShape> layers, int64_t block_tokens, int64_t capacity_tokens,
         kernels::Backend* backend = nullptr);
  ~KvPool();
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  int64_t block_tokens() const { return block_tokens_; }
  int64_t total_blocks() const { return n_blocks_; }
  // Blocks nobody holds. A shared block counts once in total - free, however many hold it.
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t blocks_for(int64_t tokens) const { return (tokens + block_tokens_ - 1) / block_tokens_; }
  DType dtype() const { return dtype_; }  // element type of keys and values
  int64_t bytes_per_token() const;  // keys + values over all layers
  int64_t bytes_in_use() const;

  // Grows `blocks` with new private blocks so it covers `tokens` positions; throws
  // lockstep::Error when the pool is full.
  void reserve(std::vector<int32_t>& blocks, int64_t tokens);
  // Lets go of the blocks past what `tokens` positions need; a block returns to the free list
  // when its last holder lets go.
  void shrink(std::vector<int32_t>& blocks, int64_t tokens);
  // A sequence going back to `length` positions: shrink, then make_writable (the block `length`
  // falls in is where its next write goes).
  void truncate(std::vector<int32_t>& blocks, int64_t length) {
    shrink(blocks, length);
    make_writable(blocks, length);
  }

  // How many sequences / cache entries hold `block` (0: free).
  int32_t holders(int32_t block) const;
  // One more holder of `block` (which must be held already), and one less.
  void retain(int32_t block);
  void release(int32_t block);
  // Gives `dst` (empty) the blocks of `src` that cover `tokens` positions, shared, not copied.
  // The last of them may be partly filled: the new holder must not write before make_writable.
  void share_prefix(const std::vector<int32_t>& src, std::vector<int32_t>& dst, int64_t tokens);
  // Whether a sequence of `length` tokens holding `blocks` may write its next positions: every
  // block from the one holding position `length` on has no other holder.
  bool writable(const std::vector<int32_t>& blocks, int64_t length) const;
  // Makes it so: each such block another holder still reads is replaced by a private copy (copy
  // on write; at most one block, the partly filled last one, ever needs it).
  void make_writable(std::vector<int32_t>& blocks, int64_t length);

  // The prefix cache marks which references are its own, so the pool can tell without a scan
  // which blocks only the cache holds (evicting them would free them) and since when.
  void mark_cached(int32_t block);    // one of the block's references is now the cache's
  void unmark_cached(int32_t block);  // ... no longer (the cache then lets go of it, or not)
  int64_t cached_blocks() const { return cached_blocks_; }  // held by the cache (and maybe others)
  int64_t cached_only_blocks() const { return static_cast<int64_t>(cached_only_.size()); }
  // The block that has been held by the cache alone the longest (-1: none). A sequence lets go of
  // its blocks last first, so a chain's deeper blocks come before the blocks they continue.
  int32_t oldest_cached_only() const { return cached_only_.empty() ? -1 : cached_only_.front(); }

  // Gives `dst` (empty) its own blocks holding copies of the first `tokens` positions of `src`
  // (copied bits are the bits a recompute would write).
  void copy_prefix(const std::vector<int32_t>& src, std::vector<int32_t>& dst, int64_t tokens);

  kernels::KvLayerView layer(int64_t l) const;
  // The slot index of position p (what Backend::kv_write takes).
  int32_t slot(const std::vector<int32_t>& blocks, int64_t p) const {
    return static_cast<int32_t>(blocks[p / block_tokens_] * block_tokens_ + p % block_tokens_);
  }

 private:
  int32_t take_free();                      // a free block, now held once
  void copy_block(int32_t to, int32_t from);  // every layer's keys and values
  bool only_cached(int32_t block) const {
    return cache_refs_[block] > 0 && cache_refs_[block] == holders_[block];
  }
  // Keeps cached_only_ right after the block's counts changed (`was`: only_cached before).
  void settle(int32_t block, bool was);

  std::vector<KvLayerShape> shapes_;
  int64_t block_tokens_, n_blocks_;
  std::unique_ptr<kernels::Backend> own_backend_;  // when the caller gave none
  kernels::Backend* backend_;
  DType dtype_;
  size_t elem_bytes_;
  std::vector<size_t> layer_offset_;  // per layer: where its keys start (its values follow)
  std::vector<size_t> layer_bytes_;   // per layer: bytes of its keys (values alike)
  char* base_ = nullptr;
  size_t map_bytes_ = 0;
  std::vector<int32_t> free_;
  std::vector<int32_t> holders_;     // per block
  std::vector<int32_t> cache_refs_;  // per block: how many of its holders are the prefix cache
  int64_t cached_blocks_ = 0;        // blocks with cache_refs_ > 0
  std::list<int32_t> cached_only_;   // blocks only the cache holds, oldest first
  std::vector<std::list<int32_t>::iterator> cached_only_at_;  // per block, when in cached_only_
};

}  // namespace lockstep
