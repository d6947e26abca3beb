// RETURN_IF_ERROR / ASSIGN_OR_RETURN: Abseil 20220623 ships neither.
#ifndef TENSOROPS_KERNELS_STATUS_MACROS_H_
#define TENSOROPS_KERNELS_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TENSOROPS_CONCAT_IMPL_(a, b) a##b
#define TENSOROPS_CONCAT_(a, b) TENSOROPS_CONCAT_IMPL_(a, b)

// Returns the status from the enclosing function if `expr` is not OK.
#define RETURN_IF_ERROR(expr)    \
  do {                           \
    ::absl::Status _st = (expr); \
    if (!_st.ok()) return _st;   \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, StatusOrExpr());` declares/assigns x or returns the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(TENSOROPS_CONCAT_(_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(tmp).value()

#endif  // TENSOROPS_KERNELS_STATUS_MACROS_H_
