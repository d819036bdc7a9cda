#include "imagepack/status.h"

#include <cstring>
#include <mutex>

namespace imagepack {

Status Status::FromErrno(const std::string& context, int err) {
  return Status(Code::kIOError, context + ": " + std::strerror(err));
}

std::string Status::ToString() const {
  const char* name = "OK";
  switch (code_) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: name = "Invalid argument"; break;
    case Code::kNotFound: name = "Not found"; break;
    case Code::kCorruption: name = "Corruption"; break;
    case Code::kIOError: name = "IO error"; break;
    case Code::kNotSupported: name = "Not supported"; break;
    case Code::kCancelled: name = "Cancelled"; break;
  }
  return std::string(name) + ": " + message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

namespace {
std::mutex warn_mu;
WarningHandler& Handler() {
  static WarningHandler handler;
  return handler;
}
}  // namespace

void SetWarningHandler(WarningHandler handler) {
  std::lock_guard<std::mutex> g(warn_mu);
  Handler() = std::move(handler);
}

void Warn(const std::string& message) {
  WarningHandler h;
  {
    std::lock_guard<std::mutex> g(warn_mu);
    h = Handler();
  }
  if (h) h(message);
}

}  // namespace imagepack
