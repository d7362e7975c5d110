// HttpServer on Beast: one strand per connection; every handler of a connection runs on it.
#include "lib/http/http_server.h"

#include <sys/socket.h>

#include <utility>
// Asio needs <utility> ahead of its headers with Boost 1.74 and g++ 12.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/log/log.h"

namespace yoco {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

std::string HttpRequest::Header(absl::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return value;
  }
  return "";
}

std::string HttpRequest::Path() const { return target.substr(0, target.find('?')); }

std::string HttpRequest::Query(absl::string_view name) const {
  const size_t q = target.find('?');
  if (q == std::string::npos) return "";
  for (absl::string_view pair : absl::StrSplit(absl::string_view(target).substr(q + 1), '&')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(pair, absl::MaxSplits('=', 1));
    if (kv.first == name) return std::string(kv.second);
  }
  return "";
}

namespace {

std::chrono::steady_clock::duration Chrono(absl::Duration d) {
  return absl::ToChronoNanoseconds(d);
}

struct Shared {
  HttpServerOptions options;
  HttpHandler handler;
  std::atomic<size_t> connections{0};
};

// What an Exchange needs of its connection, plain or TLS. Every Do* runs on the strand.
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual void Post(std::function<void()> f) = 0;
  virtual void DoSetHeader(std::string name, std::string value) = 0;
  virtual void DoRespond(int status, std::string content_type, std::string body) = 0;
  virtual void DoStartStream(int status, std::string content_type) = 0;
  virtual void DoSend(std::string piece, std::function<void(bool)> sent) = 0;
  virtual void DoEnd() = 0;
  virtual void DoOnClientGone(std::function<void()> gone) = 0;
  virtual void Abandoned() = 0;
};
using Session = SessionBase;

// The exchange of the request a session is answering. Its methods post to the session's strand.
class Exchange final : public HttpExchange {
 public:
  Exchange(std::shared_ptr<Session> session, bool keep_alive)
      : session_(std::move(session)), keep_alive_(keep_alive) {}
  ~Exchange() override;

  void SetHeader(std::string name, std::string value) override;
  void Respond(int status, std::string content_type, std::string body) override;
  void StartStream(int status, std::string content_type) override;
  void Send(std::string piece, std::function<void(bool)> sent) override;
  void End() override;
  void OnClientGone(std::function<void()> gone) override;

 private:
  std::shared_ptr<Session> session_;
  const bool keep_alive_;
  std::atomic<bool> finished_{false};  // Respond or End called
};

// One connection. `Stream` is beast::tcp_stream or beast::ssl_stream<beast::tcp_stream>.
template <typename Stream>
class Connection final : public SessionBase,
                         public std::enable_shared_from_this<Connection<Stream>> {
 public:
  // Plain HTTP.
  Connection(tcp::socket socket, std::shared_ptr<Shared> shared)
      : stream_(std::move(socket)), shared_(std::move(shared)) {
    shared_->connections.fetch_add(1);
  }
  // HTTPS: `tls` stays alive as long as the connection.
  Connection(tcp::socket socket, std::shared_ptr<Shared> shared,
             std::shared_ptr<net::ssl::context> tls)
      : stream_(std::move(socket), *tls), shared_(std::move(shared)), tls_(std::move(tls)) {
    shared_->connections.fetch_add(1);
  }
  ~Connection() override { shared_->connections.fetch_sub(1); }

  // Serves requests; `busy`: a short 503 and close instead (too many connections).
  void Run(bool busy) {
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this(), busy] {
      self->Handshake([self, busy] {
        if (!busy) return self->ReadRequest();
        self->keep_alive_ = false;
        self->WriteWhole(503, "application/json",
                         R"({"error":{"message":"too many connections","type":"server_error",)"
                         R"("param":null,"code":"unavailable"}})");
      });
    });
  }

  void Post(std::function<void()> f) override { net::post(stream_.get_executor(), std::move(f)); }

  // --- called on the strand by Exchange ---
  void DoSetHeader(std::string name, std::string value) override {
    if (closed_ || responded_) return;
    extra_headers_.emplace_back(std::move(name), std::move(value));
  }

  void DoRespond(int status, std::string content_type, std::string body) override {
    if (closed_ || responded_) return;
    responded_ = true;
    WriteWhole(status, content_type, std::move(body));
  }

  void DoStartStream(int status, std::string content_type) override {
    if (closed_ || responded_) return;
    responded_ = true;
    // An HTTP/1.0 client knows no chunked encoding: its stream is the bytes until the server
    // closes the connection.
    close_delimited_ = http_10_;
    if (close_delimited_) keep_alive_ = false;
    auto res = std::make_shared<http::response<http::empty_body>>(static_cast<http::status>(status),
                                                                  close_delimited_ ? 10 : 11);
    res->set(http::field::content_type, content_type);
    res->set(http::field::cache_control, "no-cache");
    SetExtraHeaders(*res);
    res->keep_alive(keep_alive_);
    res->chunked(!close_delimited_);
    auto serializer = std::make_shared<http::response_serializer<http::empty_body>>(*res);
    Enqueue([this, res, serializer](std::function<void(bool)> done) {
      http::async_write_header(
          stream_, *serializer,
          [res, serializer, done](beast::error_code ec, size_t) { done(!ec); });
    });
  }

  void DoSend(std::string piece, std::function<void(bool)> sent) override {
    if (closed_) {
      if (sent) sent(false);
      return;
    }
    auto data = std::make_shared<std::string>(std::move(piece));
    Enqueue(
        [this, data](std::function<void(bool)> done) {
          auto written = [data, done](beast::error_code ec, size_t) { done(!ec); };
          if (close_delimited_) {
            net::async_write(stream_, net::buffer(*data), std::move(written));
          } else {
            net::async_write(stream_, http::make_chunk(net::buffer(*data)), std::move(written));
          }
        },
        std::move(sent));
  }

  void DoEnd() override {
    if (closed_) return;
    if (!close_delimited_) {  // a close-delimited body ends with the close (Complete)
      Enqueue([this](std::function<void(bool)> done) {
        net::async_write(stream_, http::make_chunk_last(),
                         [done](beast::error_code ec, size_t) { done(!ec); });
      });
    }
    Enqueue([this](std::function<void(bool)> done) {
      Complete();
      done(true);
    });
  }

  void DoOnClientGone(std::function<void()> gone) override {
    if (closed_) {
      gone();
      return;
    }
    gone_ = std::move(gone);
  }

  // The handler dropped its exchange without finishing the response.
  void Abandoned() override {
    if (!closed_ && !complete_) Close();
  }

 private:
  using Op = std::function<void(std::function<void(bool)> done)>;
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  template <typename F>
  void Handshake(F then) {
    if constexpr (kTls) {
      Lowest().expires_after(Chrono(shared_->options.request_read_timeout));
      stream_.async_handshake(net::ssl::stream_base::server,
                              [self = this->shared_from_this(), then](beast::error_code ec) {
                                if (ec) return self->Close();
                                then();
                              });
    } else {
      then();
    }
  }

  void ReadRequest() {
    exchange_done_ = false;
    responded_ = false;
    complete_ = false;
    extra_headers_.clear();
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(shared_->options.max_header_bytes));
    parser_->body_limit(shared_->options.max_body_bytes);
    if (buffer_.size() == 0) {
      // Idle until the next request's first byte.
      Lowest().expires_after(Chrono(shared_->options.idle_timeout));
      stream_.async_read_some(buffer_.prepare(4096),
                              [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                                if (ec) return self->Close();
                                self->buffer_.commit(n);
                                self->ReadHeader();
                              });
      return;
    }
    ReadHeader();
  }

  void ReadHeader() {
    Lowest().expires_after(Chrono(shared_->options.request_read_timeout));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->ReadFailed(ec);
                              self->ReadBody();
                            });
  }

  void ReadBody() {
    auto& req = parser_->get();
    if (absl::EqualsIgnoreCase(std::string(req[http::field::expect]), "100-continue")) {
      // curl waits a second for this before sending a body over 1 KiB.
      auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      http::async_write(stream_, *cont,
                        [self = this->shared_from_this(), cont](beast::error_code ec, size_t) {
                          if (ec) return self->Close();
                          http::async_read(self->stream_, self->buffer_, *self->parser_,
                                           [self](beast::error_code ec, size_t) {
                                             if (ec) return self->ReadFailed(ec);
                                             self->Dispatch();
                                           });
                        });
      return;
    }
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->ReadFailed(ec);
                       self->Dispatch();
                     });
  }

  void ReadFailed(beast::error_code ec) {
    keep_alive_ = false;
    if (ec == http::error::body_limit) {
      return WriteError(413, absl::StrCat("the request body exceeds ",
                                          shared_->options.max_body_bytes, " bytes"));
    }
    if (ec == http::error::header_limit) {
      return WriteError(431, absl::StrCat("the request headers exceed ",
                                          shared_->options.max_header_bytes, " bytes"));
    }
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout ||
        ec == net::error::operation_aborted || ec == net::error::connection_reset) {
      return Close();
    }
    WriteError(400, absl::StrCat("malformed HTTP request: ", ec.message()));
  }

  void WriteError(int status, const std::string& message) {
    std::string body = R"({"error":{"message":")";
    for (char c : message) {  // messages here are ours, ASCII; quotes escaped all the same
      if (c == '"' || c == '\\') body += '\\';
      if (static_cast<unsigned char>(c) >= 0x20) body += c;
    }
    body += R"(","type":"invalid_request_error","param":null,"code":null}})";
    responded_ = true;
    WriteWhole(status, "application/json", std::move(body));
  }

  // A value with a byte outside printable ASCII could split the header: such a header is dropped.
  template <typename Response>
  void SetExtraHeaders(Response& res) {
    for (const auto& [name, value] : extra_headers_) {
      const bool printable = std::all_of(value.begin(), value.end(), [](char c) {
        return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f;
      });
      if (printable) res.set(name, value);
    }
  }

  void WriteWhole(int status, const std::string& content_type, std::string body) {
    auto res =
        std::make_shared<http::response<http::string_body>>(static_cast<http::status>(status), 11);
    res->set(http::field::content_type, content_type);
    // Load refusals (429: every worker and the router's wait queue full; 503: no worker, or
    // too many connections) say when to come back, as clients' retry logic (the OpenAI SDKs')
    // reads it; a second is about how long a queue of prefills takes to move.
    if (status == 429 || status == 503) res->set(http::field::retry_after, "1");
    SetExtraHeaders(*res);
    res->keep_alive(keep_alive_);
    res->body() = std::move(body);
    res->prepare_payload();
    Enqueue([this, res](std::function<void(bool)> done) {
      http::async_write(stream_, *res, [res, done](beast::error_code ec, size_t) { done(!ec); });
    });
    Enqueue([this](std::function<void(bool)> done) {
      Complete();
      done(true);
    });
  }

  void Dispatch() {
    http::request<http::string_body> req = parser_->release();
    keep_alive_ = req.keep_alive();
    http_10_ = req.version() == 10;
    close_delimited_ = false;
    HttpRequest request;
    request.method = std::string(req.method_string());
    request.target = std::string(req.target());
    for (const auto& field : req) {
      request.headers.emplace_back(absl::AsciiStrToLower(std::string(field.name_string())),
                                   std::string(field.value()));
    }
    request.body = std::move(req.body());
    Lowest().expires_never();
    WatchForDisconnect();
    auto exchange = std::make_shared<Exchange>(this->shared_from_this(), keep_alive_);
    shared_->handler(std::move(request), std::move(exchange));
  }

  // While a response is pending, a readable socket with nothing to read means the client hung
  // up. Bytes (a pipelined request) stay in the socket for the next read. A wake-up with nothing
  // there at all (the reactor reporting the request's own bytes, already read, late) watches
  // again: before, such a wake-up ended the watch, and a client that then hung up was never
  // reported (its generation ran on; seen as a failure of AClientThatHangsUpIsReported under
  // load).
  //
  // The end of the client's bytes is ambiguous: a client that closed, or one that only shut its
  // writing side after the request (HTTP/1.0 clients, `nc -N`) and waits for the answer. A
  // request that asked to close the connection after its response (HTTP/1.0, `Connection:
  // close`) is taken as the second: it gets its response, and a client really gone shows when a
  // write to it fails. On a keep-alive connection the end of the bytes means the client went.
  void WatchForDisconnect() {
    Lowest().socket().async_wait(
        tcp::socket::wait_read, [self = this->shared_from_this()](beast::error_code ec) {
          if (ec || self->complete_ || self->closed_) return;
          char c;
          const ssize_t n =
              ::recv(self->Lowest().socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
          if (n == 0 && !self->keep_alive_) return;  // half-closed: the response still goes
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return self->Close();
          if (n < 0) self->WatchForDisconnect();
        });
  }

  // Ops wait in ops_, a member: they capture `this`, never a shared_ptr to it, or a connection
  // whose server stops mid-write would own itself. `done`, which an op hands to its I/O,
  // holds the connection for as long as that I/O runs.
  void Enqueue(Op op, std::function<void(bool)> after = nullptr) {
    ops_.push_back({std::move(op), std::move(after)});
    if (!writing_) Pump();
  }

  void Pump() {
    if (ops_.empty()) {
      writing_ = false;
      return;
    }
    if (closed_) {
      while (!ops_.empty()) {
        auto after = std::move(ops_.front().second);
        ops_.pop_front();
        if (after) after(false);
      }
      writing_ = false;
      return;
    }
    writing_ = true;
    Lowest().expires_after(Chrono(shared_->options.write_timeout));
    auto op = std::move(ops_.front());
    ops_.pop_front();
    op.first([self = this->shared_from_this(), after = std::move(op.second)](bool ok) {
      if (!ok) self->Close();
      if (after) after(ok);
      self->Pump();
    });
  }

  // The response is written: the next request, or close.
  void Complete() {
    complete_ = true;
    if (closed_) return;
    beast::error_code ignored;
    Lowest().socket().cancel(ignored);  // the disconnect watch
    Lowest().expires_never();
    if (!keep_alive_) {
      Lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
      return Close();
    }
    Post([self = this->shared_from_this()] { self->ReadRequest(); });
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close();
    if (!complete_ && gone_) {
      auto gone = std::move(gone_);
      gone();
    }
    gone_ = nullptr;
  }

  Stream stream_;
  beast::flat_buffer buffer_;
  std::shared_ptr<Shared> shared_;
  std::shared_ptr<net::ssl::context> tls_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<std::pair<Op, std::function<void(bool)>>> ops_;
  std::function<void()> gone_;
  bool keep_alive_ = true;
  bool http_10_ = false;          // the request's version: its stream is close-delimited
  bool close_delimited_ = false;  // the response in progress ends with the connection
  bool writing_ = false;
  bool responded_ = false;
  bool complete_ = false;
  std::vector<std::pair<std::string, std::string>> extra_headers_;  // the response's SetHeader
  bool exchange_done_ = false;
  bool closed_ = false;
};

Exchange::~Exchange() {
  if (!finished_.load()) session_->Post([s = session_] { s->Abandoned(); });
}

void Exchange::SetHeader(std::string name, std::string value) {
  session_->Post([s = session_, n = std::move(name), v = std::move(value)]() mutable {
    s->DoSetHeader(std::move(n), std::move(v));
  });
}

void Exchange::Respond(int status, std::string content_type, std::string body) {
  finished_ = true;
  session_->Post(
      [s = session_, status, t = std::move(content_type), b = std::move(body)]() mutable {
        s->DoRespond(status, std::move(t), std::move(b));
      });
}

void Exchange::StartStream(int status, std::string content_type) {
  session_->Post([s = session_, status, t = std::move(content_type)]() mutable {
    s->DoStartStream(status, std::move(t));
  });
}

void Exchange::Send(std::string piece, std::function<void(bool)> sent) {
  session_->Post([s = session_, p = std::move(piece), f = std::move(sent)]() mutable {
    s->DoSend(std::move(p), std::move(f));
  });
}

void Exchange::End() {
  finished_ = true;
  session_->Post([s = session_] { s->DoEnd(); });
}

void Exchange::OnClientGone(std::function<void()> gone) {
  session_->Post(
      [s = session_, g = std::move(gone)]() mutable { s->DoOnClientGone(std::move(g)); });
}

// The TLS context new connections get, rebuilt when the files change (checked at most every
// `reload`, at an accept). A set that fails to load keeps the last good context.
class TlsContextSource {
 public:
  explicit TlsContextSource(HttpTlsFiles files) : files_(std::move(files)) {}

  absl::Status Load() {
    absl::StatusOr<std::shared_ptr<net::ssl::context>> context = Build();
    if (!context.ok()) return context.status();
    current_ = *std::move(context);
    stamp_ = Stamp();
    checked_ = absl::Now();
    return absl::OkStatus();
  }

  std::shared_ptr<net::ssl::context> Current() {
    if (absl::Now() - checked_ < files_.reload) return current_;
    checked_ = absl::Now();
    const std::string stamp = Stamp();
    if (stamp == stamp_) return current_;
    absl::StatusOr<std::shared_ptr<net::ssl::context>> context = Build();
    if (context.ok()) {
      current_ = *std::move(context);
      stamp_ = stamp;
    } else if (stamp != failed_stamp_) {
      failed_stamp_ = stamp;
      LogWarning("HTTP TLS: keeping the last certificate")
          .With("error", context.status().message());
    }
    return current_;
  }

 private:
  // Size, inode and times of each file: a rotated Secret changes them.
  std::string Stamp() const {
    std::string stamp;
    for (const std::string* path : {&files_.cert, &files_.key, &files_.ca}) {
      struct stat st {};
      if (!path->empty() && ::stat(path->c_str(), &st) == 0) {
        absl::StrAppend(&stamp, st.st_size, ":", st.st_ino, ":", st.st_mtim.tv_sec, ".",
                        st.st_mtim.tv_nsec, ":", st.st_ctim.tv_sec, ".", st.st_ctim.tv_nsec, ";");
      } else {
        stamp += "-;";
      }
    }
    return stamp;
  }

  absl::StatusOr<std::shared_ptr<net::ssl::context>> Build() const {
    if (files_.cert.empty() || files_.key.empty()) {
      return absl::InvalidArgumentError("HTTPS needs a certificate and its key");
    }
    auto context = std::make_shared<net::ssl::context>(net::ssl::context::tls_server);
    beast::error_code ec;
    context->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                             net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                             net::ssl::context::no_tlsv1_1,
                         ec);
    if (!ec) context->use_certificate_chain_file(files_.cert, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat(files_.cert, ": ", ec.message()));
    context->use_private_key_file(files_.key, net::ssl::context::pem, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat(files_.key, ": ", ec.message()));
    if (!files_.ca.empty()) {
      context->load_verify_file(files_.ca, ec);
      if (ec) return absl::InvalidArgumentError(absl::StrCat(files_.ca, ": ", ec.message()));
      context->set_verify_mode(net::ssl::verify_peer | net::ssl::verify_fail_if_no_peer_cert);
    }
    return context;
  }

  const HttpTlsFiles files_;
  std::shared_ptr<net::ssl::context> current_;
  std::string stamp_, failed_stamp_;
  absl::Time checked_;
};

}  // namespace

struct HttpServer::Impl {
  net::io_context io;
  tcp::acceptor acceptor{io};
  std::shared_ptr<Shared> shared = std::make_shared<Shared>();
  std::optional<TlsContextSource> tls;  // accesses are serialised: one accept at a time
  std::vector<std::thread> threads;
  std::once_flag stopped;
  int port = 0;

  void Accept() {
    acceptor.async_accept(net::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      if (!ec) {
        const bool busy = shared->connections.load() >= shared->options.max_connections;
        if (tls.has_value()) {
          std::make_shared<Connection<beast::ssl_stream<beast::tcp_stream>>>(std::move(socket),
                                                                             shared, tls->Current())
              ->Run(busy);
        } else {
          std::make_shared<Connection<beast::tcp_stream>>(std::move(socket), shared)->Run(busy);
        }
      }
      Accept();  // an accept error (e.g. out of descriptors) must not stop the acceptor
    });
  }
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& listen,
                                                              const HttpServerOptions& options,
                                                              HttpHandler handler) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP address \"", listen, "\" is not HOST:PORT"));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  auto impl = std::make_unique<Impl>();
  impl->shared->options = options;
  impl->shared->handler = std::move(handler);
  if (options.tls.has_value()) {
    impl->tls.emplace(*options.tls);
    if (absl::Status st = impl->tls->Load(); !st.ok()) return st;
  }
  beast::error_code ec;
  tcp::resolver resolver(impl->io);
  auto endpoints = resolver.resolve(host.empty() ? "0.0.0.0" : host, std::to_string(port), ec);
  if (ec || endpoints.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP address \"", listen, "\": ", ec ? ec.message() : "no address"));
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for HTTP on ", listen, ": ", ec.message()));
  }
  impl->port = impl->acceptor.local_endpoint().port();
  impl->Accept();
  for (int i = 0; i < std::max(1, options.threads); ++i) {
    impl->threads.emplace_back([io = &impl->io] { io->run(); });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::port() const { return impl_->port; }

void HttpServer::Stop() {
  std::call_once(impl_->stopped, [this] {
    impl_->io.stop();
    for (std::thread& t : impl_->threads) t.join();
    beast::error_code ignored;
    impl_->acceptor.close(ignored);
  });
}

}  // namespace yoco
