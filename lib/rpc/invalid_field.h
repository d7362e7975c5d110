// The trailing metadata in which the router names the request field a refusal is about
// ("prompt", "sampling.max_new_tokens", "sampling.stop_strings"), so that a front end can name
// it in its own terms (the HTTP API's "param").
#ifndef YOCO_LIB_RPC_INVALID_FIELD_H_
#define YOCO_LIB_RPC_INVALID_FIELD_H_

namespace yoco {

inline constexpr char kInvalidFieldMetadata[] = "yoco-invalid-field";

}  // namespace yoco

#endif  // YOCO_LIB_RPC_INVALID_FIELD_H_
