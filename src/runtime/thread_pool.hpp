// thread_pool.hpp - the runtime's one pool of threads that run workgroups.
//
// parallel_for(n, fn) runs fn(0) .. fn(n-1) on the pool's workers and the
// calling thread, and returns when all are done. There is one pool per
// process, sized by NOVA_NUM_THREADS (default: the cores this process may
// use), counting the caller. It never oversubscribes: if another thread's job
// holds the pool (the user runs steps from several threads), the caller runs
// its own items on itself instead of queueing more threads. Workers spin
// briefly between jobs (launches come back to back within a step) and then
// sleep on a condition variable. In a forked child every job runs on the
// calling thread (the parent's workers are not there). Private to the runtime.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace nova::detail {

class ThreadPool {
 public:
  /// `threads` counts the caller: threads - 1 workers are started.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  template <class F> void parallel_for(std::int64_t n, F&& fn) {
    run(n, [](void* ctx, std::int64_t i) { (*static_cast<std::remove_reference_t<F>*>(ctx))(i); }, &fn);
  }

 private:
  struct Job {
    void (*call)(void*, std::int64_t);
    void* ctx;
    std::int64_t n;
    std::atomic<std::int64_t> next{0};
  };

  void run(std::int64_t n, void (*call)(void*, std::int64_t), void* ctx);
  static void drain(Job& job);
  void worker();

  std::vector<std::thread> workers_;
  std::mutex submit_;
  Job* job_ = nullptr;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stop_ = false;
  // Sleeping: workers wait for a new generation, the caller for pending_ == 0.
  std::mutex sleep_;
  std::condition_variable wake_, done_;
};

/// The process's pool (created on first use).
ThreadPool& global_pool();

} // namespace nova::detail
