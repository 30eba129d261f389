#include "scheduler/request_queue.h"

namespace lockstep {

bool RequestStream::next(StreamEvent& event, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
  event = std::move(events_.front());
  events_.pop_front();
  return true;
}

void RequestStream::on_event(std::function<void()> wake) {
  bool waiting = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_ = wake;
    waiting = !events_.empty();
  }
  if (waiting && wake) wake();
}

void RequestStream::cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
}

bool RequestStream::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

std::vector<std::shared_ptr<RequestStream>> RequestQueue::push(std::vector<EngineRequest> requests) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t i = 0; i < requests.size(); ++i) streams.push_back(std::make_shared<RequestStream>());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!accepting_) throw ShuttingDown();
    if (held_ + requests.size() > capacity_) {
      ++metrics_.requests_rejected;
      throw QueueFull();
    }
    held_ += requests.size();
    metrics_.requests_total += requests.size();
    for (size_t i = 0; i < requests.size(); ++i) waiting_.push_back({std::move(requests[i]), streams[i]});
  }
  cv_.notify_all();
  return streams;
}

EngineMetrics RequestQueue::metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineMetrics m = metrics_;
  m.queue_depth += waiting_.size();
  m.idle_seconds = waited_seconds_;
  return m;
}

std::vector<RequestQueue::Pending> RequestQueue::pop(size_t max, bool wait,
                                                     std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (wait && waiting_.empty() && accepting_) {
    const auto t0 = std::chrono::steady_clock::now();
    cv_.wait_for(lock, timeout, [&] { return !waiting_.empty() || !accepting_; });
    waited_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  std::vector<Pending> out;
  while (!waiting_.empty() && out.size() < max) {
    out.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  return out;
}

double RequestQueue::waited_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waited_seconds_;
}

void RequestQueue::emit(RequestStream& stream, StreamEvent event) {
  if (event.kind == StreamEvent::Kind::Finish) {
    // Give the place back before the client can see the end: its next request must find it free.
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(stream.mu_);
      first = !stream.finished_;
      stream.finished_ = true;
    }
    if (first) {
      std::lock_guard<std::mutex> lock(mu_);
      --held_;
    }
  }
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> lock(stream.mu_);
    stream.events_.push_back(std::move(event));
    wake = stream.wake_;
  }
  stream.cv_.notify_all();
  if (!wake) return;
  if (waker_) waker_->add(&stream, std::move(wake));
  else wake();
}

void RequestQueue::stop_accepting() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    accepting_ = false;
  }
  cv_.notify_all();
}

bool RequestQueue::accepting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return accepting_;
}

bool RequestQueue::empty() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_.empty();
}

void RequestQueue::update(const std::function<void(EngineMetrics&)>& f) {
  std::lock_guard<std::mutex> lock(mu_);
  f(metrics_);
}

}  // namespace lockstep
