// SPDX-License-Identifier: Apache-2.0
// A guarded member touched without its Mutex: clang -Wthread-safety -Werror
// must refuse this file, so that the thread-safety job cannot pass with the
// analysis silently off. With -DEDGE_OUTBOX_TAKE_THE_LOCK the same code takes
// the lock and must compile. scripts/thread-safety.sh checks both.
#include "common/mutex.h"

namespace {

class Counter {
 public:
  void add() {
#ifdef EDGE_OUTBOX_TAKE_THE_LOCK
    edge_outbox::MutexLock lock(mutex_);
#endif
    ++count_;
  }

 private:
  edge_outbox::Mutex mutex_;
  int count_ GUARDED_BY(mutex_) = 0;
};

}  // namespace

int main() {
  Counter counter;
  counter.add();
  return 0;
}
