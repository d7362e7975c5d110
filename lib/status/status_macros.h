// Early-return helpers for absl::Status / absl::StatusOr, which Debian's Abseil 20220623
// does not ship yet.
#ifndef YOCO_LIB_STATUS_STATUS_MACROS_H_
#define YOCO_LIB_STATUS_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define YOCO_STATUS_CONCAT_INNER(a, b) a##b
#define YOCO_STATUS_CONCAT(a, b) YOCO_STATUS_CONCAT_INNER(a, b)

// Returns the status of `expr` from the enclosing function if it is not OK.
#define RETURN_IF_ERROR(expr)                    \
  do {                                           \
    ::absl::Status _yoco_status = (expr);        \
    if (!_yoco_status.ok()) return _yoco_status; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, MakeX());` declares/assigns `x` from a StatusOr or returns its
// error status.
#define ASSIGN_OR_RETURN(lhs, expr) \
  YOCO_ASSIGN_OR_RETURN_IMPL(YOCO_STATUS_CONCAT(_yoco_statusor_, __LINE__), lhs, expr)

#define YOCO_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr) \
  auto statusor = (expr);                               \
  if (!statusor.ok()) return statusor.status();         \
  lhs = std::move(statusor).value()

#endif  // YOCO_LIB_STATUS_STATUS_MACROS_H_
