// The host thread pool behind attnphys::parallel_for (see parallel.hpp): a few persistent threads, woken per
// kernel, that take chunks of the index range from a shared counter. Which thread runs which chunk does not
// change any result: every index's arithmetic is its own.
#include "attnphys/core/parallel.hpp"

#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
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

class Pool {
 public:
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
    {
      std::lock_guard<std::mutex> lock(mutex_);
      busy_ = static_cast<int>(workers_.size());
      ++generation_;
    }
    wake_.notify_all();
    t_in_pool = true;
    work();
    t_in_pool = false;
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return busy_ == 0; });
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
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
      }
      work();
      std::lock_guard<std::mutex> lock(mutex_);
      if (--busy_ == 0) done_.notify_one();
    }
  }

  void resize(int workers) {
    if (static_cast<int>(workers_.size()) == workers) return;
    stop_all();
    stop_ = false;
    // generation_ changes only in run(), which holds job_mutex_ (as does this caller), so it is stable here.
    const unsigned long now = generation_;
    for (int i = 0; i < workers; ++i) workers_.emplace_back([this, now] { loop(now); });
  }

  void stop_all() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  std::mutex job_mutex_, mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  unsigned long generation_ = 0;
  int busy_ = 0;
  bool stop_ = false;
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
