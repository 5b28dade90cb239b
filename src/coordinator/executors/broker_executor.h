// BrokerExecutor: runs runnable rows on workers by publishing each as a message to its
// queue (`queue`, else `default`) with its priority, as the worker protocol expects
// (ToJson of the row). A decision's rows go out as one batch (one wait for the confirms).
//
// With a durable broker (RabbitMQ) a row is stored PENDING and marked SCHEDULED here once
// the broker confirmed it, in one write for the batch: SCHEDULED means "in the broker",
// so a crash in between leaves it PENDING and reconciling publishes it. Without one the
// row is stored SCHEDULED; a row the broker refused is set back to PENDING (so that
// reconciling, too, knows it is not in a queue) and returned to be tried again.
//
// Thread-safety: thread-safe; it keeps no state of its own.
#pragma once

#include <vector>

#include "base/clock.h"
#include "broker/broker.h"
#include "coordinator/executors/executor.h"
#include "datastore/datastore.h"

namespace baton {

class BrokerExecutor : public Executor {
 public:
  BrokerExecutor(Broker& broker, Datastore& datastore, Clock& clock, bool durable_broker)
      : broker_(broker), datastore_(datastore), clock_(clock), durable_broker_(durable_broker) {}

  std::vector<TaskRecord> Start(std::vector<TaskRecord> rows) override;

 private:
  // Publishes one row; false when the broker refused it.
  bool PublishOne(const TaskRecord& row);

  Broker& broker_;
  Datastore& datastore_;
  Clock& clock_;
  const bool durable_broker_;
};

}  // namespace baton
