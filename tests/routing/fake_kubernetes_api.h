// FakeKubernetesApi: an HTTPS server on loopback that answers the pod list and watch requests of
// KubernetesPodWatch from a script, in the API server's wire format: JSON bodies, watch events
// as newline-ended JSON in HTTP/1.1 chunks, and connections that end in order, drop, or stay
// open. It records every request (target and Authorization header). Certificates are made with
// the openssl command in a temporary folder.
#ifndef YOCO_TESTS_ROUTING_FAKE_KUBERNETES_API_H_
#define YOCO_TESTS_ROUTING_FAKE_KUBERNETES_API_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>  // ahead of Asio in the .cc: Boost 1.74's awaitable.hpp needs std::exchange
#include <vector>

namespace yoco::testing {

struct ScriptedResponse {
  unsigned status = 200;
  std::string body;                 // a whole body (a list, an error Status)
  std::vector<std::string> events;  // a watch: one chunk per event line (newline added)
  enum class End { kInOrder, kDrop, kHold } end = End::kInOrder;  // after the events
};

struct RecordedRequest {
  std::string target;
  std::string authorization;
};

class FakeKubernetesApi {
 public:
  // Makes a CA and a server certificate for `address` (an IP) in `dir`; the CA's PEM is at
  // ca_file(). With `other_ca`, the server's certificate comes from a second CA that ca_file()
  // does not hold.
  FakeKubernetesApi(const std::string& dir, bool other_ca = false);
  ~FakeKubernetesApi();

  uint16_t port() const { return port_; }
  std::string ca_file() const { return dir_ + "/ca.pem"; }
  void Push(ScriptedResponse response);
  // The requests so far.
  std::vector<RecordedRequest> requests();
  // Waits (up to 10 s) until `n` requests have come; false on timeout.
  bool WaitForRequests(size_t n);
  // Ends a held watch (kHold) in order.
  void Release();

 private:
  void Serve();
  const std::string dir_;
  uint16_t port_ = 0;
  struct State;
  std::unique_ptr<State> state_;
  std::thread thread_;
};

}  // namespace yoco::testing

#endif  // YOCO_TESTS_ROUTING_FAKE_KUBERNETES_API_H_
