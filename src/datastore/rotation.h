// Key rotation over any Datastore: every stored secret re-encrypted under the primary key
// (Transaction::ReencryptSecrets), table by table, `batch` rows per transaction, so the
// engine keeps running beside it (each batch holds its rows' locks only for its scope).
// Safe to interrupt and run again: a batch commits or not, and rows already under the
// primary key are read and left alone.
#pragma once

#include <functional>

#include "datastore/datastore.h"

namespace baton {

struct RotationReport {
  int read = 0;       // rows read
  int rewritten = 0;  // rows that held a secret in plain or under another key
};

// `progress`, when given, is called after each batch with the table and its totals so far.
inline Result<RotationReport> RotateSecrets(
    Datastore& store, int batch,
    const std::function<void(SecretTable, const RotationReport&)>& progress = {}) {
  if (batch <= 0) return InvalidArgument("the batch size must be positive");
  RotationReport total;
  for (SecretTable table :
       {SecretTable::kJobs, SecretTable::kTasks, SecretTable::kWebhookDeliveries}) {
    RotationReport of_table;
    std::string after;
    for (;;) {
      ReencryptBatch done;
      BATON_RETURN_IF_ERROR(store.Transact([&](Transaction& tx) -> Status {
        Result<ReencryptBatch> b = tx.ReencryptSecrets(table, after, batch);
        if (!b.ok()) return b.status();
        done = std::move(*b);
        return Status::Ok();
      }));
      of_table.read += done.read;
      of_table.rewritten += done.rewritten;
      if (progress) progress(table, of_table);
      if (done.read < batch) break;
      after = done.last_id;
    }
    total.read += of_table.read;
    total.rewritten += of_table.rewritten;
  }
  return total;
}

}  // namespace baton
