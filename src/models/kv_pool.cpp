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

void KvPool::reserve(std::vector<int32_t>& blocks, int64_t tokens) {
  const int64_t need = (tokens + block_tokens_ - 1) / block_tokens_;
  const int64_t more = need - static_cast<int64_t>(blocks.size());
  if (more > free_blocks())
    fail("KV cache is full: ", tokens, " positions need ", more, " more blocks of ",
         block_tokens_, " tokens, ", free_blocks(), " free of ", n_blocks_,
         " (raise --ctx-size)");
  for (int64_t i = 0; i < more; ++i) {
    blocks.push_back(free_.back());
    free_.pop_back();
  }
}

void KvPool::shrink(std::vector<int32_t>& blocks, int64_t tokens) {
  const size_t need = static_cast<size_t>((tokens + block_tokens_ - 1) / block_tokens_);
  while (blocks.size() > need) {
    free_.push_back(blocks.back());
    blocks.pop_back();
  }
}

void KvPool::copy_prefix(const std::vector<int32_t>& src, std::vector<int32_t>& dst,
                         int64_t tokens) {
  reserve(dst, tokens);
  for (size_t l = 0; l < shapes_.size(); ++l) {
    const size_t block_bytes =
        static_cast<size_t>(block_tokens_ * shapes_[l].n_kv_heads * shapes_[l].head_dim) *
        elem_bytes_;
    for (size_t b = 0; b < dst.size(); ++b)
      for (int kv = 0; kv < 2; ++kv) {
        char* layer_base = base_ + layer_offset_[l] + kv * layer_bytes_[l];
        char* to = layer_base + dst[b] * block_bytes;
        const char* from = layer_base + src[b] * block_bytes;
        backend_->copy(to, from, block_bytes);
      }
  }
}

kernels::KvLayerView KvPool::layer(int64_t l) const {
  if (l < 0 || l >= static_cast<int64_t>(shapes_.size()))
    fail("KV cache layer ", l, " out of range (", shapes_.size(), " layers)");
  const char* k = base_ + layer_offset_[l];
  const KvLayerShape& s = shapes_[l];
  return {k, k + layer_bytes_[l], block_tokens_, s.n_kv_heads, s.head_dim, dtype_};
}

}  // namespace lockstep
