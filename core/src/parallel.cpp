// The host thread pool behind attnphys::parallel_for (see parallel.hpp): a few persistent threads, woken per
// kernel, that take chunks of the index range from a shared counter. Which thread runs which chunk does not
// change any result: every index's arithmetic is its own.
#include "attnphys/core/parallel.hpp"

#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace attnphys {
namespace {

int env_int(const char* name) {
  const char* s = std::getenv(name);
  if (!s || !*s) return 0;
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  return end && *end == '\0' && v > 0 && v < 4096 ? static_cast<int>(v) : 0;
}

int default_threads() {
  int n = env_int("ATTNPHYS_NUM_THREADS");
  if (n > 0) return n;
  using IntFn = int (*)();
  if (auto f = reinterpret_cast<IntFn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"))) n = f();
  if (n <= 0) n = env_int("OMP_NUM_THREADS");
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  // Ranks of an MPI job on this node already occupy the cores: share them.
  int ranks = env_int("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (ranks <= 0) ranks = env_int("MPI_LOCALNRANKS");
  if (ranks > 1) {
    const int hw = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    n = std::min(n, std::max(1, hw / ranks));
  }
  return std::max(1, std::min(n, 256));
}

thread_local bool t_in_pool = false;

// How long an idle thread keeps polling for the next job before it sleeps on the condition variable (µs).
// The VMC sampler and the attention kernels hand the pool thousands of jobs of 0.05–1 ms each: waking a sleeping
// thread costs tens of µs here (a futex wake and, in a VM, an inter-processor interrupt), so a thread that has
// just finished polls briefly instead. ATTNPHYS_POOL_SPIN_US overrides it (0: always sleep, as before).
long spin_microseconds() {
  const char* s = std::getenv("ATTNPHYS_POOL_SPIN_US");
  if (s && *s) {
    char* end = nullptr;
    const long v = std::strtol(s, &end, 10);
    if (end && *end == '\0' && v >= 0 && v <= 100000) return v;
  }
  return 100;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Polls pred() for up to `us` microseconds; true as soon as it holds.
template <class Pred>
bool spin_until(long us, const Pred& pred) {
  if (us <= 0) return pred();
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (pred()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= until) return pred();
  }
}

class Pool {
 public:
  Pool() : spin_us_(spin_microseconds()) {}
  ~Pool() { stop_all(); }

  void run(int threads, long n, long grain, void (*body)(const void*, long, long), const void* ctx) {
    std::lock_guard<std::mutex> one_job(job_mutex_);  // callers from several threads take turns
    resize(threads - 1);
    const long parts = static_cast<long>(threads) * 4;  // a few chunks per thread: the cores here differ in speed
    chunk_ = std::max(grain, (n + parts - 1) / parts);
    n_ = n;
    body_ = body;
    ctx_ = ctx;
    next_.store(0, std::memory_order_relaxed);
    busy_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    // The job fields above are published by this (sequentially consistent) increment; a polling worker sees it
    // directly, a sleeping one is woken. A worker registers as a sleeper under mutex_ and re-reads generation_
    // before it waits, so either it sees the new generation or this load sees it asleep.
    generation_.fetch_add(1);
    if (sleepers_.load() > 0) {
      { std::lock_guard<std::mutex> lock(mutex_); }
      wake_.notify_all();
    }
    t_in_pool = true;
    work();
    t_in_pool = false;
    if (spin_until(spin_us_, [&] { return busy_.load(std::memory_order_acquire) == 0; })) return;
    std::unique_lock<std::mutex> lock(mutex_);
    caller_waits_ = true;
    done_.wait(lock, [&] { return busy_.load(std::memory_order_acquire) == 0; });
    caller_waits_ = false;
  }

 private:
  void work() {
    for (;;) {
      const long b = next_.fetch_add(chunk_, std::memory_order_relaxed);
      if (b >= n_) return;
      body_(ctx_, b, std::min(n_, b + chunk_));
    }
  }

  // `seen`: the generation current when the thread was made, so that a thread added by resize() waits for the next
  // job instead of running the last one again over the job fields run() is about to rewrite.
  void loop(unsigned long seen) {
    t_in_pool = true;
    for (;;) {
      if (!spin_until(spin_us_, [&] { return stop_.load() || generation_.load() != seen; })) {
        std::unique_lock<std::mutex> lock(mutex_);
        sleepers_.fetch_add(1);
        wake_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
        sleepers_.fetch_sub(1);
      }
      if (stop_.load()) return;
      seen = generation_.load();
      work();
      if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        // The last worker out: wake the caller if it stopped polling. Taking mutex_ orders this with the caller's
        // check of busy_ inside its wait.
        std::lock_guard<std::mutex> lock(mutex_);
        if (caller_waits_) done_.notify_one();
      }
    }
  }

  void resize(int workers) {
    if (static_cast<int>(workers_.size()) == workers) return;
    stop_all();
    stop_.store(false);
    // generation_ changes only in run(), which holds job_mutex_ (as does this caller), so it is stable here.
    const unsigned long now = generation_.load();
    for (int i = 0; i < workers; ++i) workers_.emplace_back([this, now] { loop(now); });
  }

  void stop_all() {
    stop_.store(true);
    { std::lock_guard<std::mutex> lock(mutex_); }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  const long spin_us_;
  std::mutex job_mutex_, mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  std::atomic<unsigned long> generation_{0};
  std::atomic<int> busy_{0}, sleepers_{0};
  std::atomic<bool> stop_{false};
  bool caller_waits_ = false;  // guarded by mutex_
  long n_ = 0, chunk_ = 1;
  void (*body_)(const void*, long, long) = nullptr;
  const void* ctx_ = nullptr;
  std::atomic<long> next_{0};
};

std::atomic<int> g_threads{0};

// Never destroyed: its threads must not be joined during static destruction. A forked child (Python's
// multiprocessing) has none of the parent's threads, so it starts a fresh pool and leaks the parent's record.
std::atomic<Pool*> g_pool{nullptr};
std::once_flag g_atfork_once;

Pool& pool() {
  std::call_once(g_atfork_once, [] {
    pthread_atfork(nullptr, nullptr, [] { g_pool.store(nullptr); });
  });
  Pool* p = g_pool.load();
  if (!p) {
    static std::mutex create;
    std::lock_guard<std::mutex> lock(create);
    p = g_pool.load();
    if (!p) {
      p = new Pool();
      g_pool.store(p);
    }
  }
  return *p;
}

}  // namespace

int host_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    n = default_threads();
    g_threads.store(n, std::memory_order_relaxed);
  }
  return n;
}

void set_host_threads(int n) { g_threads.store(n > 0 ? std::min(n, 256) : default_threads()); }

void set_num_threads(int n) {
  require(n >= 1 && n <= 256, "set_num_threads: the thread count must be between 1 and 256, got ", n);
  set_host_threads(n);
  using SetFn = void (*)(int);
  if (auto f = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(n);
}

int get_num_threads() {
  if (host_pool_applies()) return host_threads();
  using IntFn = int (*)();
  if (auto f = reinterpret_cast<IntFn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"))) return f();
  return std::max(1, int(ExecSpace().concurrency()));
}

bool host_pool_applies() {
#if defined(KOKKOS_ENABLE_SERIAL)
  return std::is_same<ExecSpace, Kokkos::Serial>::value;
#else
  return false;
#endif
}

namespace detail {
void host_pool_run(long n, long grain, void (*body)(const void*, long, long), const void* ctx) {
  const int threads = host_threads();
  if (t_in_pool || threads <= 1 || n <= grain) {
    body(ctx, 0, n);
    return;
  }
  pool().run(threads, n, grain, body, ctx);
}
}  // namespace detail

}  // namespace attnphys
