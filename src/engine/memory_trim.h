// MemoryTrimmer: has glibc give back to the system the memory it holds free, once a burst
// of frees (a big job ended: its definition, its rows' copies, its answer) has left much
// of it. glibc keeps freed memory in its arenas (one per thread that allocated) and
// returns it only from the top of the main heap, so an engine idle at 18 MB held 68 MB
// after a chain of 5,000 steps and 174 MB after one of 20,000, until `malloc_trim`.
//
// Thread-safety: TrimPolicy is not thread-safe (one thread owns it); MemoryTrimmer is
// started and stopped from one thread, and its own thread is the only one that looks.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <stop_token>
#include <thread>

namespace baton {

// When to trim, from what the allocator holds free at each look: once that has grown by
// `threshold` bytes since the last trim (or since it was lowest, memory being reused).
// A trim leaves the freed pages counted as free (given back, not unmapped), so the
// baseline is what is free just after it: a heap that stays as it is is trimmed once.
class TrimPolicy {
 public:
  explicit TrimPolicy(std::size_t threshold) : threshold_(threshold) {}

  // `free_bytes`: what the allocator holds free now. True: trim now, then call Trimmed.
  bool ShouldTrim(std::size_t free_bytes);
  // `free_bytes`: what it holds free just after the trim.
  void Trimmed(std::size_t free_bytes) { baseline_ = free_bytes; }

 private:
  const std::size_t threshold_;
  std::size_t baseline_ = 0;
};

class MemoryTrimmer {
 public:
  // Looks every `period`; trims when more than `threshold` bytes were freed since.
  static constexpr std::chrono::seconds kPeriod{2};
  static constexpr std::size_t kThreshold = 2 << 20;
  // Start fixes glibc's thresholds: blocks of this size or more are mapped on their own
  // (and unmapped when freed), and an arena's free top over kThreshold is given back.
  static constexpr std::size_t kMmapThreshold = 1 << 20;

  MemoryTrimmer() = default;
  ~MemoryTrimmer() { Stop(); }
  MemoryTrimmer(const MemoryTrimmer&) = delete;
  MemoryTrimmer& operator=(const MemoryTrimmer&) = delete;

  // Called on the trimmer's thread just before each trim, to free caches first (the
  // datastore's page caches). Set before Start.
  void SetBeforeTrim(std::function<void()> before_trim) { before_trim_ = std::move(before_trim); }

  // Starts the looking thread (again after a Stop); a no-op when it runs.
  void Start();
  // Stops and joins it.
  void Stop();

  // Bytes the allocator holds free now (glibc's mallinfo2: every arena's free chunks,
  // their top ones included); 0 where it cannot tell (another allocator, a sanitizer's).
  static std::size_t FreeBytes();

 private:
  void Loop(std::stop_token stop);

  std::function<void()> before_trim_;
  std::mutex mu_;  // for cv_ only: the thread waits on it between looks
  std::condition_variable_any cv_;
  std::jthread thread_;
};

}  // namespace baton
