// A backend's connection, seen through the calls the shared SQL code needs (the
// transaction, sql/datastore.h's methods, the migrations): run a statement, read its rows.
// Virtual, unlike rows.h's templates: these calls do I/O, beside which a virtual call per
// column costs nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/status.h"
#include "datastore/sql/statements.h"

namespace baton::sql {

// A statement's parameters, bound in order from $1 (rows.h's Sink).
class ParamSink {
 public:
  virtual ~ParamSink() = default;
  virtual void Text(std::string_view v) = 0;
  virtual void Int(std::int64_t v) = 0;
  virtual void Real(double v) = 0;
  virtual void Time(TimePoint t) = 0;
  virtual void Time(const std::optional<TimePoint>& t) = 0;
};

// One result row (rows.h's Row). Views stay valid until the next row.
class RowView {
 public:
  virtual ~RowView() = default;
  virtual std::string_view Text(int col) const = 0;
  virtual std::int64_t Int(int col) const = 0;
  virtual int Int32(int col) const = 0;
  virtual double Real(int col) const = 0;
  virtual TimePoint Time(int col) const = 0;
  virtual std::optional<TimePoint> OptTime(int col) const = 0;
};

using Bind = std::function<void(ParamSink&)>;
using EachRow = std::function<Status(const RowView&)>;

// A connection, inside the transaction (or read) its backend opened for the operation.
// Used by one thread.
class Session {
 public:
  virtual ~Session() = default;
  // Runs `stmt`; returns the number of rows it changed.
  virtual Result<std::int64_t> Execute(const Statement& stmt, const Bind& bind) = 0;
  // Runs `stmt`, calling `each` for every row it returns (an error from `each` stops
  // and is returned).
  virtual Status Query(const Statement& stmt, const Bind& bind, const EachRow& each) = 0;
  // As Execute and Query, for the last statement of a write: nothing else runs in the
  // transaction after it, so a backend may send the commit with it (PostgreSQL's
  // pipeline: the statement and its COMMIT in one round trip; a write of one statement
  // runs as its own transaction).
  virtual Result<std::int64_t> ExecuteLast(const Statement& stmt, const Bind& bind) {
    return Execute(stmt, bind);
  }
  virtual Status QueryLast(const Statement& stmt, const Bind& bind, const EachRow& each) {
    return Query(stmt, bind, each);
  }
  // As Query, for SQL built at run time (a search): neither prepared by name nor cached.
  virtual Status QueryOnce(const std::string& sql, const Bind& bind, const EachRow& each) = 0;
  // Runs one or more statements without parameters (schema, transaction control).
  virtual Status ExecScript(std::string_view sql) = 0;
};

}  // namespace baton::sql
