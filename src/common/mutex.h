// SPDX-License-Identifier: Apache-2.0
// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with
// the annotations of Clang's thread-safety analysis (-Wthread-safety), which
// libstdc++'s own types do not carry. Shared state is declared
// `T member GUARDED_BY(mutex_);` and functions that expect the lock held are
// declared `REQUIRES(mutex_)`; a clang build with -Wthread-safety -Werror then
// refuses any access without the lock (.ci/run has that job, and
// tests/compile_fail/ keeps a file it must refuse). GCC ignores the macros.
//
// Header-only, with no dependency but the standard library: the device
// library and the ingest both include it as "common/mutex.h" (the one file of
// src/common/ the ingest may include, with common/backoff.h; see
// docs/design.md).
//
// Condition waits take the MutexLock and have no predicate form: write the
// loop `while (!ready_) cv_.wait(lock);` in the function that holds the lock,
// so that the analysis sees every read of guarded state under it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define EDGE_OUTBOX_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define EDGE_OUTBOX_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) EDGE_OUTBOX_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY EDGE_OUTBOX_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) EDGE_OUTBOX_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) EDGE_OUTBOX_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) EDGE_OUTBOX_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) EDGE_OUTBOX_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) EDGE_OUTBOX_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) EDGE_OUTBOX_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) EDGE_OUTBOX_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define RETURN_CAPABILITY(x) EDGE_OUTBOX_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS EDGE_OUTBOX_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace edge_outbox {

class CondVar;
class MutexLock;

// A std::mutex the analysis knows as a capability. Not recursive.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mutex_.lock(); }
  void unlock() RELEASE() { mutex_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mutex_.try_lock(); }

 private:
  friend class MutexLock;
  std::mutex mutex_;
};

// Holds a Mutex for its scope (like std::unique_lock); unlock() and lock()
// let a function drop it around a slow call and take it back.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mutex) ACQUIRE(mutex) : lock_(mutex.mutex_) {}
  ~MutexLock() RELEASE() = default;
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void lock() ACQUIRE() { lock_.lock(); }
  void unlock() RELEASE() { lock_.unlock(); }

 private:
  friend class CondVar;
  std::unique_lock<std::mutex> lock_;
};

// Releases a Mutex the caller holds for its scope and takes it back at the
// end: for a function declared REQUIRES(mutex) that must drop the lock around
// a slow call or a callback (the analysis cannot follow MutexLock::unlock()
// through a MutexLock& parameter).
class SCOPED_CAPABILITY MutexUnlock {
 public:
  explicit MutexUnlock(Mutex& mutex) RELEASE(mutex) : mutex_(mutex) { mutex_.unlock(); }
  ~MutexUnlock() RELEASE() { mutex_.lock(); }
  MutexUnlock(const MutexUnlock&) = delete;
  MutexUnlock& operator=(const MutexUnlock&) = delete;

 private:
  Mutex& mutex_;
};

// A std::condition_variable that waits on a MutexLock. Spurious wake-ups
// happen: wait in a loop over the condition.
class CondVar {
 public:
  void wait(MutexLock& lock) { cv_.wait(lock.lock_); }
  // Returns false when the deadline passed.
  template <class Clock, class Duration>
  bool wait_until(MutexLock& lock, const std::chrono::time_point<Clock, Duration>& deadline) {
    return cv_.wait_until(lock.lock_, deadline) == std::cv_status::no_timeout;
  }
  template <class Rep, class Period>
  bool wait_for(MutexLock& lock, const std::chrono::duration<Rep, Period>& timeout) {
    return cv_.wait_for(lock.lock_, timeout) == std::cv_status::no_timeout;
  }
  void notify_one() noexcept { cv_.notify_one(); }
  void notify_all() noexcept { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace edge_outbox
