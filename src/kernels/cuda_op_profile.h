// Per-op GPU timing of the CUDA backend (LOCKSTEP_CUDA_PROFILE=1): OpProfile keeps the table,
// OpScope times one op. Used by cuda_backend.cpp alone; kept apart so the backend file holds the
// backend.
#pragma once

#ifdef LOCKSTEP_HAVE_CUDA

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_ops.h"

namespace lockstep::kernels {

// Per-op GPU time, on when LOCKSTEP_CUDA_PROFILE is set (and not "0"). Every op sits between two
// CUDA events; ops are grouped by the kind of step they ran in: the begin_step key without its
// context bucket ("dense|1l" = a decode step of one sequence wanting the last logits), "unrecorded
// step" for steps with no key (prefill and other large or rollback-keeping calls), "outside a
// step" for the rest (the MTP head's drafts, rollback replays). The stream is held (hold_stream)
// while a chunk of ops is enqueued and then released, so the GPU runs each chunk back to back as a
// graph would and the events measure kernels, not the host's launch gaps. The table goes to
// stderr when the backend is destroyed.
class OpProfile {
 public:
  static bool wanted() {
    const char* v = std::getenv("LOCKSTEP_CUDA_PROFILE");
    return v && *v && std::string(v) != "0";
  }
  OpProfile() { host_flag_ = cuda::hold_flag_create(&device_flag_); }
  ~OpProfile() {
    release();
    cuda::synchronize();
    flush();
    print();
    for (void* e : free_) cuda::event_destroy(e);
    cuda::hold_flag_destroy(host_flag_);
  }

  void begin_step(const std::string& key) {
    std::string label = key.empty() ? "unrecorded step" : key;
    if (const size_t bar = label.rfind("|k"); !key.empty() && bar != std::string::npos)
      label.resize(bar);  // "dense|1l|k3" -> "dense|1l"
    phase_ = id_of(phases_, phase_ids_, label);
    if (steps_.size() <= static_cast<size_t>(phase_)) steps_.resize(phase_ + 1, 0);
    ++steps_[phase_];
  }
  void end_step() { phase_ = outside_; }

  void op_begin(std::string_view name) {
    if (!held_) {
      cuda::hold_stream(device_flag_, ++ticket_, 20.0);
      held_ = true;
      chunk_ = 0;
    }
    open_ = {id_of(ops_, op_ids_, std::string(name)), phase_, take(), nullptr};
    cuda::event_record(open_.start);
  }
  void op_end() {
    open_.end = take();
    cuda::event_record(open_.end);
    pending_.push_back(open_);
    if (++chunk_ >= kChunk) release();
    if (pending_.size() >= kMaxPending) {
      release();
      cuda::synchronize();
      flush();
    }
  }
  // Lets the held stream run (before anything that waits for it).
  void release() {
    if (!held_) return;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    *static_cast<volatile uint32_t*>(host_flag_) = ticket_;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    held_ = false;
  }
  // After the stream was synchronised: every pending op's time into the table.
  void flush() {
    for (const Pending& p : pending_) {
      Stat& st = stats_[{p.phase, p.op}];
      st.ms += cuda::event_elapsed_ms(p.start, p.end);
      ++st.calls;
      free_.push_back(p.start);
      free_.push_back(p.end);
    }
    pending_.clear();
  }

 private:
  static constexpr int kChunk = 192;
  static constexpr size_t kMaxPending = 8192;
  struct Pending {
    int op, phase;
    void* start;
    void* end;
  };
  struct Stat {
    double ms = 0;
    int64_t calls = 0;
  };
  struct Key {
    int phase, op;
    bool operator==(const Key& o) const { return phase == o.phase && op == o.op; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return std::hash<int64_t>()((int64_t{k.phase} << 32) | k.op); }
  };

  static int id_of(std::vector<std::string>& names, std::unordered_map<std::string, int>& ids,
                   const std::string& name) {
    auto it = ids.find(name);
    if (it != ids.end()) return it->second;
    names.push_back(name);
    return ids[name] = static_cast<int>(names.size()) - 1;
  }
  void* take() {
    if (free_.empty()) return cuda::event_create();
    void* e = free_.back();
    free_.pop_back();
    return e;
  }

  void print() const {
    if (stats_.empty() || steps_.empty()) return;  // no forward ran (bench's copy-bandwidth probe)
    std::fprintf(stderr,
                 "lockstep CUDA profile (LOCKSTEP_CUDA_PROFILE: GPU time of each op between CUDA "
                 "events, eager, ops of a chunk run back to back)\n");
    for (int ph = 0; ph < static_cast<int>(phases_.size()); ++ph) {
      std::vector<std::pair<int, Stat>> rows;
      double total = 0;
      for (const auto& [k, st] : stats_)
        if (k.phase == ph) {
          rows.push_back({k.op, st});
          total += st.ms;
        }
      if (rows.empty()) continue;
      std::sort(rows.begin(), rows.end(),
                [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
      const int64_t steps = ph < static_cast<int>(steps_.size()) ? steps_[ph] : 0;
      std::fprintf(stderr, "%s: %lld steps, %.3f ms of op time", phases_[ph].c_str(),
                   static_cast<long long>(steps), total);
      if (steps > 0) std::fprintf(stderr, ", %.1f us per step", total * 1e3 / steps);
      std::fprintf(stderr, "\n  %-34s %9s %10s %11s %9s %10s %7s\n", "op", "calls", "calls/step",
                   "total us", "us/call", "us/step", "share");
      for (const auto& [op, st] : rows)
        std::fprintf(stderr, "  %-34s %9lld %10.2f %11.1f %9.2f %10.2f %6.1f%%\n",
                     ops_[op].c_str(), static_cast<long long>(st.calls),
                     steps > 0 ? static_cast<double>(st.calls) / steps : 0.0, st.ms * 1e3,
                     st.ms * 1e3 / st.calls, steps > 0 ? st.ms * 1e3 / steps : 0.0,
                     100.0 * st.ms / total);
    }
  }

  uint32_t* host_flag_ = nullptr;
  const uint32_t* device_flag_ = nullptr;
  uint32_t ticket_ = 0;
  bool held_ = false;
  int chunk_ = 0;
  std::vector<std::string> phases_{"outside a step"}, ops_;
  std::unordered_map<std::string, int> phase_ids_{{"outside a step", 0}}, op_ids_;
  const int outside_ = 0;
  int phase_ = 0;
  std::vector<int64_t> steps_;
  Pending open_{};
  std::vector<Pending> pending_;
  std::vector<void*> free_;
  std::unordered_map<Key, Stat, KeyHash> stats_;
};

// Times the op in its scope when profiling (p non-null).
class OpScope {
 public:
  OpScope(OpProfile* p, std::string_view name) : p_(p) {
    if (p_) p_->op_begin(name);
  }
  ~OpScope() {
    if (p_) p_->op_end();
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  OpProfile* p_;
};

}  // namespace lockstep::kernels

#endif  // LOCKSTEP_HAVE_CUDA
