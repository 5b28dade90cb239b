// Status and Result<T>: Baton's error type. Fallible calls return these instead of
// throwing; the code set is closed so callers (and the HTTP error table) can map it.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace baton {

enum class StatusCode {
  kOk,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kUnavailable,
  kDeadlineExceeded,
  kCancelled,
  kInternal,
};

// The wire name of a code, as in API error bodies: "INVALID_ARGUMENT", ...
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message", or "OK".
  std::string ToString() const;

  friend bool operator==(const Status&, const Status&) = default;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!status_.ok() && "Result needs a value or an error");
    if (status_.ok()) status_ = Internal("Result constructed from an OK status without a value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace baton

// Returns the Status of `expr` from the enclosing function when it is not OK.
#define BATON_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::baton::Status baton_status_ = (expr);        \
    if (!baton_status_.ok()) return baton_status_; \
  } while (0)

// Evaluates `expr` (a Result<T>); when it holds an error, returns that Status from the
// enclosing function, else moves the value into `lhs`, which may declare a variable
// (`auto job`, `JobRecord job`) or name an existing one. With a third argument `on_error`,
// returns `on_error(status)` instead, for functions that answer an error with something
// other than a Status (an HTTP response). It expands to several statements, so it cannot
// be the unbraced body of an `if`; a type with a comma in `lhs` needs an alias or `auto`.
#define BATON_ASSIGN_OR_RETURN(...)                                                               \
  BATON_ASSIGN_OR_RETURN_PICK_(__VA_ARGS__, BATON_ASSIGN_OR_RETURN_3_, BATON_ASSIGN_OR_RETURN_2_, \
                               BATON_ASSIGN_OR_RETURN_1_)                                         \
  (__VA_ARGS__)

// Implementation of BATON_ASSIGN_OR_RETURN: the temporary's name takes __COUNTER__ so that
// several uses in one scope (even on one line) do not collide.
#define BATON_ASSIGN_OR_RETURN_PICK_(a, b, c, name, ...) name
#define BATON_ASSIGN_OR_RETURN_1_(...) \
  static_assert(false, "BATON_ASSIGN_OR_RETURN needs (lhs, expr) or (lhs, expr, on_error)")
#define BATON_ASSIGN_OR_RETURN_2_(lhs, expr) \
  BATON_ASSIGN_OR_RETURN_IMPL_(BATON_STATUS_CONCAT_(baton_result_, __COUNTER__), lhs, expr, )
#define BATON_ASSIGN_OR_RETURN_3_(lhs, expr, on_error)                                      \
  BATON_ASSIGN_OR_RETURN_IMPL_(BATON_STATUS_CONCAT_(baton_result_, __COUNTER__), lhs, expr, \
                               on_error)
#define BATON_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr, on_error) \
  auto tmp = (expr);                                           \
  if (!tmp.ok()) return on_error(tmp.status());                \
  lhs = std::move(tmp).value()
#define BATON_STATUS_CONCAT_(a, b) BATON_STATUS_CONCAT_INNER_(a, b)
#define BATON_STATUS_CONCAT_INNER_(a, b) a##b
