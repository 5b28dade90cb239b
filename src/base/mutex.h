// An annotated mutex and the clang thread-safety attribute macros.
//
// Members a mutex protects are declared `BATON_GUARDED_BY(mu_)`, functions that expect it
// held `BATON_REQUIRES(mu_)`, and functions that take it themselves `BATON_EXCLUDES(mu_)`.
// The `thread-safety` preset builds with `-Wthread-safety -Werror=thread-safety`, so
// touching a guarded member without its lock, or calling a REQUIRES function without it,
// fails the build instead of racing at run time. On compilers without the analysis the
// macros are empty.
//
// Thread-safe: Mutex and MutexLock are what make other classes thread-safe.
#pragma once

#include <mutex>

#if defined(__clang__)
#define BATON_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define BATON_THREAD_ANNOTATION_(x)
#endif

// On a class: its objects are a capability (a lock) named `x` in diagnostics.
#define BATON_CAPABILITY(x) BATON_THREAD_ANNOTATION_(capability(x))
// On a class: an RAII object that holds a capability for its lifetime.
#define BATON_SCOPED_CAPABILITY BATON_THREAD_ANNOTATION_(scoped_lockable)
// On a member: read or written only with `x` held.
#define BATON_GUARDED_BY(x) BATON_THREAD_ANNOTATION_(guarded_by(x))
// On a pointer member: what it points to is read or written only with `x` held.
#define BATON_PT_GUARDED_BY(x) BATON_THREAD_ANNOTATION_(pt_guarded_by(x))
// On a mutex member: the lock order, to be taken before / after the others named.
#define BATON_ACQUIRED_BEFORE(...) BATON_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))
#define BATON_ACQUIRED_AFTER(...) BATON_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))
// On a function: the caller must hold these.
#define BATON_REQUIRES(...) BATON_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
// On a function: the caller must not hold these (the function takes them).
#define BATON_EXCLUDES(...) BATON_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
// On a function: it takes / releases these (no argument: `this`).
#define BATON_ACQUIRE(...) BATON_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define BATON_RELEASE(...) BATON_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
// On a function returning bool: it took the capability when it returned `result`.
#define BATON_TRY_ACQUIRE(...) BATON_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
// On a function: when it returns, the capability `x` is known to be held.
#define BATON_ASSERT_CAPABILITY(x) BATON_THREAD_ANNOTATION_(assert_capability(x))
// On a function: it returns a reference to the capability `x`.
#define BATON_RETURN_CAPABILITY(x) BATON_THREAD_ANNOTATION_(lock_returned(x))
// On a function: the analysis skips it. Say why beside each use.
#define BATON_NO_THREAD_SAFETY_ANALYSIS BATON_THREAD_ANNOTATION_(no_thread_safety_analysis)

namespace baton {

// std::mutex, annotated. Lockable (lock/unlock/try_lock), so std::condition_variable_any
// waits on a MutexLock of it.
class BATON_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() BATON_ACQUIRE() { mu_.lock(); }
  void unlock() BATON_RELEASE() { mu_.unlock(); }
  bool try_lock() BATON_TRY_ACQUIRE(true) { return mu_.try_lock(); }

  // Tells the analysis the mutex is held where it cannot see it (the predicate of a
  // condition variable wait, which runs inside the wait with the lock held).
  void AssertHeld() const BATON_ASSERT_CAPABILITY(this) {}

 private:
  std::mutex mu_;
};

// Holds a Mutex from construction to destruction. Also BasicLockable itself, so that
// std::condition_variable_any can release and retake it while waiting, and so that code
// can drop the lock around a call it must not make under it (a callback, I/O) and take it
// back: `lock.unlock(); Call(); lock.lock();`.
class BATON_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) BATON_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() BATON_RELEASE() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // The analysis tracks these as re-taking / releasing the scoped lock itself; the bodies
  // act on mu_, which it cannot tie to `this`, hence no analysis inside them.
  void lock() BATON_ACQUIRE() BATON_NO_THREAD_SAFETY_ANALYSIS {
    mu_.lock();
    held_ = true;
  }
  void unlock() BATON_RELEASE() BATON_NO_THREAD_SAFETY_ANALYSIS {
    held_ = false;
    mu_.unlock();
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

}  // namespace baton
