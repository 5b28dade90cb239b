// BrokerExecutor: runs runnable rows on workers by publishing each as a message to its
// queue (`queue`, else `default`) with its priority, as the worker protocol expects
// (ToJson of the row). A decision's rows go out as one batch (one wait for the confirms).
//
// It writes no rows. With a durable broker (RabbitMQ) it reports the rows the broker
// confirmed as published (the scheduler then marks them SCHEDULED: "in the broker", so a
// crash in between leaves them PENDING and reconciling publishes them); a row the broker
// refused is reported as refused, to be published again later.
//
// Thread-safety: thread-safe; it keeps no state of its own.
#pragma once

#include <string>
#include <vector>

#include "broker/broker.h"
#include "coordinator/executors/executor.h"

namespace baton {

class BrokerExecutor : public Executor {
 public:
  BrokerExecutor(Broker& broker, bool durable_broker)
      : broker_(broker), durable_broker_(durable_broker) {}

  StartReport Start(std::vector<TaskRecord> rows) override;

 private:
  // Publishes one row, reported in `report`.
  void PublishOne(const TaskRecord& row, StartReport& report);

  Broker& broker_;
  const bool durable_broker_;
};

}  // namespace baton
