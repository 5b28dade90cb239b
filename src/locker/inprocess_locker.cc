#include <condition_variable>
#include <memory>
#include <set>
#include <string>

#include "base/mutex.h"
#include "locker/locker.h"

namespace baton {
namespace {

// The held names live in a shared state, so a Lock may outlive its Locker.
struct HeldNames {
  Mutex mu;
  std::set<std::string, std::less<>> names BATON_GUARDED_BY(mu);
  std::condition_variable_any released;
};

class InProcessLock : public Lock {
 public:
  InProcessLock(std::shared_ptr<HeldNames> held, std::string name)
      : held_(std::move(held)), name_(std::move(name)) {}
  ~InProcessLock() override {
    {
      MutexLock lock(held_->mu);
      held_->names.erase(name_);
    }
    held_->released.notify_all();
  }

 private:
  std::shared_ptr<HeldNames> held_;
  std::string name_;
};

class InProcessLocker : public Locker {
 public:
  Result<std::unique_ptr<Lock>> TryAcquire(std::string_view name) override {
    if (name.empty()) return InvalidArgument("a lock needs a name");
    MutexLock lock(held_->mu);
    if (!held_->names.emplace(name).second) {
      return FailedPrecondition("lock " + std::string(name) + " is held");
    }
    return std::unique_ptr<Lock>(std::make_unique<InProcessLock>(held_, std::string(name)));
  }

  Result<std::unique_ptr<Lock>> Acquire(std::string_view name,
                                        std::chrono::milliseconds timeout) override {
    if (name.empty()) return InvalidArgument("a lock needs a name");
    MutexLock lock(held_->mu);
    if (!held_->released.wait_for(lock, timeout, [&]() BATON_REQUIRES(held_->mu) {
          return !held_->names.contains(name);
        })) {
      return DeadlineExceeded("lock " + std::string(name) + " stayed held");
    }
    held_->names.emplace(name);
    return std::unique_ptr<Lock>(std::make_unique<InProcessLock>(held_, std::string(name)));
  }

 private:
  std::shared_ptr<HeldNames> held_ = std::make_shared<HeldNames>();
};

}  // namespace

std::unique_ptr<Locker> NewInProcessLocker() { return std::make_unique<InProcessLocker>(); }

}  // namespace baton
