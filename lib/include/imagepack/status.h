// Status and Result<T>: how every library call reports failure.
//
// A Status is Ok or carries a code and a message that says what went wrong
// and where (a path, a record key, a byte offset). The library never prints
// and never throws across its API; callers decide how to report.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <variant>

namespace imagepack {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,
    kNotFound,
    kCorruption,
    kIOError,
    kNotSupported,
    kCancelled,
  };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) { return Status(Code::kInvalidArgument, std::move(msg)); }
  static Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status Corruption(std::string msg) { return Status(Code::kCorruption, std::move(msg)); }
  static Status IOError(std::string msg) { return Status(Code::kIOError, std::move(msg)); }
  static Status NotSupported(std::string msg) { return Status(Code::kNotSupported, std::move(msg)); }
  static Status Cancelled(std::string msg) { return Status(Code::kCancelled, std::move(msg)); }
  // An IOError for `context` (usually a path) with strerror(err) appended.
  static Status FromErrno(const std::string& context, int err);

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "Corruption: checksum mismatch in record 0000001234", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context` + ": ".
  Status WithContext(const std::string& context) const;
  // The same code with another message.
  Status WithMessage(std::string msg) const { return Status(code_, std::move(msg)); }

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// Holds either a value or a non-Ok Status. Built from an Ok status (a
// caller's bug: there is no value to give), it holds an error saying so,
// so that ok() and status() never disagree.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status)                      // NOLINT: implicit by design
      : v_(status.ok() ? Status::InvalidArgument("internal error: a Result built from an OK status has no value")
                       : std::move(status)) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> v_;
};

// Warnings: what a run survives but a person should hear of (a planted
// folder skipped, a dataset started from its node cache while its server
// is unreachable). The library never prints: Warn hands each message to the
// handler set here (the tools print it on stderr as "PROGRAM: warning:
// ..."); with none set, warnings are dropped. Both thread-safe; the handler
// may be called from any thread.
using WarningHandler = std::function<void(const std::string& message)>;
void SetWarningHandler(WarningHandler handler);
void Warn(const std::string& message);

}  // namespace imagepack

#define IMAGEPACK_RETURN_IF_ERROR(expr)            \
  do {                                             \
    ::imagepack::Status _st = (expr);              \
    if (!_st.ok()) return _st;                     \
  } while (0)
