// One connection at a time (the watch makes one at a time), synchronous Beast.
#include "tests/routing/fake_kubernetes_api.h"

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <cstdlib>
#include <iostream>

namespace yoco::testing {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

void Run(const std::string& command) {
  if (std::system((command + " 2> /dev/null").c_str()) != 0) {
    std::cerr << "fake API server: failed: " << command << std::endl;
    std::abort();
  }
}

void MakeCa(const std::string& dir, const std::string& name) {
  Run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " + dir + "/" +
      name + ".key -out " + dir + "/" + name + ".pem -days 2 -subj /CN=" + name);
}

}  // namespace

struct FakeKubernetesApi::State {
  asio::io_context io;
  asio::ssl::context tls{asio::ssl::context::tls_server};
  asio::ip::tcp::acceptor acceptor{io};
  std::mutex mu;
  std::condition_variable cv;
  std::deque<ScriptedResponse> script;
  std::vector<RecordedRequest> requests;
  bool released = false;
  bool stop = false;
};

FakeKubernetesApi::FakeKubernetesApi(const std::string& dir, bool other_ca)
    : dir_(dir), state_(std::make_unique<State>()) {
  MakeCa(dir_, "ca");
  const std::string signer = other_ca ? "rogue" : "ca";
  if (other_ca) MakeCa(dir_, "rogue");
  Run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " + dir_ +
      "/server.key -out " + dir_ + "/server.csr -subj /CN=kubernetes");
  Run("printf 'subjectAltName=IP:127.0.0.1,DNS:kubernetes.default.svc\\n' > " + dir_ + "/san.ext");
  Run("openssl x509 -req -in " + dir_ + "/server.csr -CA " + dir_ + "/" + signer + ".pem -CAkey " +
      dir_ + "/" + signer + ".key -out " + dir_ + "/server.pem -days 2 -set_serial 7 -extfile " +
      dir_ + "/san.ext");
  state_->tls.use_certificate_chain_file(dir_ + "/server.pem");
  state_->tls.use_private_key_file(dir_ + "/server.key", asio::ssl::context::pem);
  asio::ip::tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), 0);
  state_->acceptor.open(endpoint.protocol());
  state_->acceptor.bind(endpoint);
  state_->acceptor.listen();
  port_ = state_->acceptor.local_endpoint().port();
  thread_ = std::thread([this] { Serve(); });
}

FakeKubernetesApi::~FakeKubernetesApi() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
  }
  state_->cv.notify_all();
  boost::system::error_code ignored;
  // Wake the accept: connect once.
  asio::ip::tcp::socket poke(state_->io);
  poke.connect({asio::ip::make_address("127.0.0.1"), port_}, ignored);
  thread_.join();
}

void FakeKubernetesApi::Push(ScriptedResponse response) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->script.push_back(std::move(response));
  }
  state_->cv.notify_all();
}

std::vector<RecordedRequest> FakeKubernetesApi::requests() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->requests;
}

bool FakeKubernetesApi::WaitForRequests(size_t n) {
  std::unique_lock<std::mutex> lock(state_->mu);
  return state_->cv.wait_for(lock, std::chrono::seconds(10),
                             [&] { return state_->requests.size() >= n; });
}

void FakeKubernetesApi::Release() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->released = true;
  }
  state_->cv.notify_all();
}

void FakeKubernetesApi::Serve() {
  State& s = *state_;
  while (true) {
    boost::system::error_code ec;
    asio::ip::tcp::socket socket(s.io);
    s.acceptor.accept(socket, ec);
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (s.stop) return;
    }
    if (ec) continue;
    beast::ssl_stream<asio::ip::tcp::socket> stream(std::move(socket), s.tls);
    stream.handshake(asio::ssl::stream_base::server, ec);
    if (ec) continue;  // e.g. a client that does not trust our CA
    beast::flat_buffer buffer;
    http::request<http::string_body> request;
    http::read(stream, buffer, request, ec);
    if (ec) continue;
    ScriptedResponse response;
    {
      std::unique_lock<std::mutex> lock(s.mu);
      s.requests.push_back(
          {std::string(request.target()), std::string(request[http::field::authorization])});
      s.cv.notify_all();
      // No script left: hold the connection as an idle watch would be, until there is one.
      s.cv.wait(lock, [&] { return s.stop || !s.script.empty(); });
      if (s.stop) return;
      response = std::move(s.script.front());
      s.script.pop_front();
    }
    if (response.events.empty()) {
      http::response<http::string_body> out(static_cast<http::status>(response.status), 11);
      out.set(http::field::content_type, "application/json");
      out.body() = response.body;
      out.prepare_payload();
      http::write(stream, out, ec);
      stream.shutdown(ec);
      continue;
    }
    http::response<http::empty_body> head(static_cast<http::status>(response.status), 11);
    head.set(http::field::content_type, "application/json");
    head.chunked(true);
    http::response_serializer<http::empty_body> serializer(head);
    http::write_header(stream, serializer, ec);
    for (const std::string& event : response.events) {
      const std::string line = event + "\n";
      asio::write(stream, http::make_chunk(asio::buffer(line)), ec);
    }
    if (response.end == ScriptedResponse::End::kHold) {
      std::unique_lock<std::mutex> lock(s.mu);
      s.cv.wait(lock, [&] { return s.stop || s.released; });
      s.released = false;
      if (s.stop) return;
    }
    if (response.end == ScriptedResponse::End::kDrop) {
      stream.next_layer().close(ec);  // no last chunk, no TLS close: a dead connection
      continue;
    }
    asio::write(stream, http::make_chunk_last(), ec);
    stream.shutdown(ec);
  }
}

}  // namespace yoco::testing
