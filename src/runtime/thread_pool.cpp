// thread_pool.cpp - workers that wait on a generation counter.
//
// A job is published by writing job_ and then bumping generation_ (release);
// each worker that sees a new generation drains items from the job's atomic
// counter and then decrements pending_. The caller drains too and returns
// only when pending_ reaches 0, so job_ (on the caller's stack) is never read
// after it is gone. Waiting is a short spin (~50 us, launches come back to
// back) followed by a condition variable.
#include "thread_pool.hpp"

#include <pthread.h>

#include <chrono>

#include "nova/target.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NOVA_PAUSE() _mm_pause()
#else
#define NOVA_PAUSE() ((void)0)
#endif

namespace nova::detail {
namespace {

constexpr auto kSpin = std::chrono::microseconds(50);

/// A forked child has none of its parent's worker threads: it runs every
/// job on the calling thread.
std::atomic<bool> in_forked_child{false};

/// Spins up to kSpin until `done()`; false if it never became true.
template <class Done> bool spin_until(Done&& done) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    if (done()) return true;
    NOVA_PAUSE();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() - start > kSpin) return false;
  }
}

} // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(sleep_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::drain(Job& job) {
  for (;;) {
    std::int64_t i = job.next.fetch_add(1, std::memory_order_relaxed);
    if (i >= job.n) return;
    job.call(job.ctx, i);
  }
}

void ThreadPool::run(std::int64_t n, void (*call)(void*, std::int64_t), void* ctx) {
  if (n <= 0) return;
  std::unique_lock submit(submit_, std::defer_lock);
  if (n == 1 || workers_.empty() || in_forked_child.load(std::memory_order_relaxed) ||
      !submit.try_lock()) {
    for (std::int64_t i = 0; i < n; ++i) call(ctx, i);
    return;
  }
  Job job{call, ctx, n};
  job_ = &job;
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  {
    // Under the lock, so a worker that checked the generation and is about
    // to sleep cannot miss the wake-up.
    std::lock_guard lock(sleep_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  drain(job);
  if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
    std::unique_lock lock(sleep_);
    done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  }
  job_ = nullptr;
}

void ThreadPool::worker() {
  // Not generation_'s value when this thread starts running: a job may have
  // been published before that, and this worker must take part in it.
  std::uint64_t seen = 0;
  for (;;) {
    if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
      std::unique_lock lock(sleep_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    {
      std::lock_guard lock(sleep_);
      if (stop_) return;
    }
    drain(*job_);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard lock(sleep_);
      done_.notify_all();
    }
  }
}

ThreadPool& global_pool() {
  // Never destroyed: at exit the workers just end with the process (joining
  // them from a static destructor would race other statics, and in a forked
  // child the threads to join do not exist).
  static ThreadPool* pool = [] {
    ::pthread_atfork(nullptr, nullptr, [] { in_forked_child.store(true); });
    return new ThreadPool(default_thread_count());
  }();
  return *pool;
}

} // namespace nova::detail
