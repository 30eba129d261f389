#include "models/kv_pool.h"

#include <algorithm>

#include "core/error.h"

namespace lockstep {

namespace {
std::vector<KvLayerShape> uniform(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim) {
  return std::vector<KvLayerShape>(static_cast<size_t>(std::max<int64_t>(0, n_layers)),
                                   {n_kv_heads, head_dim});
}
}  // namespace

KvPool::KvPool(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim, int64_t block_tokens,
               int64_t capacity_tokens, kernels::Backend* backend)
    : KvPool(uniform(n_layers, n_kv_heads, head_dim), block_tokens, capacity_tokens, backend) {}

KvPool::KvPool(std::vector<KvLayerShape> layers, int64_t block_tokens, int64_t capacity_tokens,
               kernels::Backend* backend)
    : shapes_(std::move(layers)),
      block_tokens_(block_tokens),
      own_backend_(backend ? nullptr : kernels::make_cpu_backend()),
      backend_(backend ? backend : own_backend_.get()),
      dtype_(backend_->kv_dtype()),
      elem_bytes_(dtype_size(dtype_)) {
  if (block_tokens <= 0) fail("KV block size must be positive, got ", block_tokens);
  n_blocks_ = std::max<int64_t>(1, (capacity_tokens + block_tokens - 1) / block_tokens);
  size_t offset = 0;
  for (const KvLayerShape& s : shapes_) {
    const size_t bytes =
        static_cast<size_t>(n_blocks_ * block_tokens * s.n_kv_heads * s.head_dim) * elem_bytes_;
    layer_offset_.push_back(offset);
    layer_bytes_.push_back(bytes);
    offset += 2 * bytes;
  }
  map_bytes_ = std::max<size_t>(1, offset);
  base_ = static_cast<char*>(backend_->allocate(map_bytes_, /*lazy=*/true));
  // Hand out low block ids first so touched memory stays compact.
  for (int64_t b = n_blocks_ - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
  holders_.assign(static_cast<size_t>(n_blocks_), 0);
  cache_refs_.assign(static_cast<size_t>(n_blocks_), 0);
  cached_only_at_.assign(static_cast<size_t>(n_blocks_), cached_only_.end());
}

KvPool::~KvPool() {
  if (base_) backend_->release(base_);
}

int64_t KvPool::bytes_per_token() const {
  int64_t elements = 0;
  for (const KvLayerShape& s : shapes_) elements += 2 * s.n_kv_heads * s.head_dim;
  return elements * static_cast<int64_t>(elem_bytes_);
}

int64_t KvPool::bytes_in_use() const {
  return (n_blocks_ - free_blocks()) * block_tokens_ * bytes_per_token();
}

int32_t KvPool::take_free() {
  LOCKSTEP_CHECK(!free_.empty(), "KV pool: no free block");
  const int32_t b = free_.back();
  free_.pop_back();
  holders_[b] = 1;
  return b;
}

int32_t KvPool::holders(int32_t block) const {
  LOCKSTEP_CHECK(block >= 0 && block < n_blocks_, "KV pool: block ", block, " out of range");
  return holders_[block];
}

void KvPool::retain(int32_t block) {
  LOCKSTEP_CHECK(holders(block) > 0, "KV pool: retain of free block ", block);
  const bool was = only_cached(block);
  ++holders_[block];
  settle(block, was);
}

void KvPool::release(int32_t block) {
  LOCKSTEP_CHECK(holders(block) > cache_refs_[block],
                 "KV pool: release of block ", block, " that only the prefix cache holds (",
                 "the cache unmarks its reference first)");
  const bool was = only_cached(block);
  if (--holders_[block] == 0) free_.push_back(block);
  settle(block, was);
}

void KvPool::mark_cached(int32_t block) {
  LOCKSTEP_CHECK(holders(block) > cache_refs_[block], "KV pool: mark_cached of block ", block,
                 " with no reference left to mark");
  const bool was = only_cached(block);
  if (cache_refs_[block]++ == 0) ++cached_blocks_;
  settle(block, was);
}

void KvPool::unmark_cached(int32_t block) {
  LOCKSTEP_CHECK(holders(block) > 0 && cache_refs_[block] > 0, "KV pool: unmark_cached of block ",
                 block, " the cache does not hold");
  const bool was = only_cached(block);
  if (--cache_refs_[block] == 0) --cached_blocks_;
  settle(block, was);
}

void KvPool::settle(int32_t block, bool was) {
  const bool now = only_cached(block);
  if (was == now) return;
  if (now) {
    cached_only_at_[block] = cached_only_.insert(cached_only_.end(), block);
  } else {
    cached_only_.erase(cached_only_at_[block]);
    cached_only_at_[block] = cached_only_.end();
  }
}

void KvPool::reserve(std::vector<int32_t>& blocks, int64_t tokens) {
  const int64_t more = blocks_for(tokens) - static_cast<int64_t>(blocks.size());
  if (more > free_blocks())
    fail("KV cache is full: ", tokens, " positions need ", more, " more blocks of ",
         block_tokens_, " tokens, ", free_blocks(), " free of ", n_blocks_,
         " (raise --ctx-size)");
  for (int64_t i = 0; i < more; ++i) blocks.push_back(take_free());
}

void KvPool::shrink(std::vector<int32_t>& blocks, int64_t tokens) {
  const size_t need = static_cast<size_t>(blocks_for(tokens));
  while (blocks.size() > need) {
    release(blocks.back());
    blocks.pop_back();
  }
}

void KvPool::share_prefix(const std::vector<int32_t>& src, std::vector<int32_t>& dst,
                          int64_t tokens) {
  LOCKSTEP_CHECK(dst.empty(), "share_prefix into a sequence that holds blocks");
  const size_t n = static_cast<size_t>(blocks_for(tokens));
  LOCKSTEP_CHECK(n <= src.size(), "share_prefix: ", tokens, " positions, source holds ",
                 src.size(), " blocks");
  for (size_t i = 0; i < n; ++i) {
    retain(src[i]);
    dst.push_back(src[i]);
  }
}

bool KvPool::writable(const std::vector<int32_t>& blocks, int64_t length) const {
  for (size_t i = static_cast<size_t>(length / block_tokens_); i < blocks.size(); ++i)
    if (holders(blocks[i]) != 1) return false;
  return true;
}

void KvPool::make_writable(std::vector<int32_t>& blocks, int64_t length) {
  for (size_t i = static_cast<size_t>(length / block_tokens_); i < blocks.size(); ++i) {
    if (holders(blocks[i]) == 1) continue;
    if (free_.empty())
      fail("KV cache is full: no free block to un-share a shared block before writing into it "
           "(raise --ctx-size)");
    const int32_t copy = take_free();
    copy_block(copy, blocks[i]);
    release(blocks[i]);
    blocks[i] = copy;
  }
}

void KvPool::copy_block(int32_t to, int32_t from) {
  for (size_t l = 0; l < shapes_.size(); ++l) {
    const size_t block_bytes =
        static_cast<size_t>(block_tokens_ * shapes_[l].n_kv_heads * shapes_[l].head_dim) *
        elem_bytes_;
    for (int kv = 0; kv < 2; ++kv) {
      char* layer_base = base_ + layer_offset_[l] + kv * layer_bytes_[l];
      backend_->copy(layer_base + to * block_bytes, layer_base + from * block_bytes, block_bytes);
    }
  }
}

void KvPool::copy_prefix(const std::vector<int32_t>& src, std::vector<int32_t>& dst,
                         int64_t tokens) {
  LOCKSTEP_CHECK(dst.empty(), "copy_prefix into a sequence that holds blocks");
  reserve(dst, tokens);
  for (size_t b = 0; b < dst.size(); ++b) copy_block(dst[b], src[b]);
}

kernels::KvLayerView KvPool::layer(int64_t l) const {
  if (l < 0 || l >= static_cast<int64_t>(shapes_.size()))
    fail("KV cache layer ", l, " out of range (", shapes_.size(), " layers)");
  const char* k = base_ + layer_offset_[l];
  const KvLayerShape& s = shapes_[l];
  return {k, k + layer_bytes_[l], block_tokens_, s.n_kv_heads, s.head_dim, dtype_};
}

}  // namespace lockstep
