// A small tensorops.v1 Roll whose answer is known, for tests that only need
// calls to succeed correctly while something else goes on (floods, caps):
// [4, 3] INT32 1..12 rolled by (-1, 2) along (0, 1).
//
// Example:
//   v1::ExecuteResponse resp;
//   grpc::Status st = stub->Execute(&ctx, CheckedRollRequest(), &resp);
//   if (st.ok() && !IsCheckedRollAnswer(resp)) ...  // a wrong reply
#ifndef TENSOROPS_TESTS_HARNESS_CHECKED_ROLL_H_
#define TENSOROPS_TESTS_HARNESS_CHECKED_ROLL_H_

#include <cstdint>
#include <vector>

#include "tensorops/v1/tensorops.pb.h"

namespace tensorops::testing {

inline v1::ExecuteRequest CheckedRollRequest() {
  v1::ExecuteRequest req;
  req.set_op("Roll");
  v1::Tensor* data = req.add_inputs();
  data->set_dtype(v1::DATA_TYPE_INT32);
  data->add_shape(4);
  data->add_shape(3);
  for (int v = 1; v <= 12; ++v) data->add_int32_data(v);
  for (const std::vector<int64_t>& values : {std::vector<int64_t>{-1, 2}, {0, 1}}) {
    v1::Tensor* t = req.add_inputs();
    t->set_dtype(v1::DATA_TYPE_INT64);
    t->add_shape(2);
    for (int64_t v : values) t->add_int64_data(v);
  }
  return req;
}

inline bool IsCheckedRollAnswer(const v1::ExecuteResponse& resp) {
  const std::vector<int32_t> want = {5, 6, 4, 8, 9, 7, 11, 12, 10, 2, 3, 1};
  return resp.outputs_size() == 1 &&
         std::vector<int32_t>(resp.outputs(0).int32_data().begin(),
                              resp.outputs(0).int32_data().end()) == want;
}

}  // namespace tensorops::testing

#endif  // TENSOROPS_TESTS_HARNESS_CHECKED_ROLL_H_
