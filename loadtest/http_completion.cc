// Streamed /v1/completions calls on Boost.Beast: resolve, connect, write, then read the chunked
// body piece by piece into the SSE parser, all under one deadline per request.
#include "loadtest/http_completion.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <thread>
#include <utility>  // Boost 1.74's Asio needs it before its own headers
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "loadtest/sse_stream.h"

namespace yoco {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;
using tcp = asio::ip::tcp;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

}  // namespace

absl::StatusOr<HttpEndpoint> ParseHttpEndpoint(const std::string& url) {
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "http://")) {
    return absl::InvalidArgumentError(absl::StrCat("--http: ", url, " is not http://HOST:PORT"));
  }
  absl::ConsumeSuffix(&rest, "/");
  absl::ConsumeSuffix(&rest, "/v1");
  const size_t colon = rest.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(rest.substr(colon + 1), &port) || port < 1 || port > 65535 ||
      absl::StrContains(rest, '/')) {
    return absl::InvalidArgumentError(absl::StrCat("--http: ", url, " is not http://HOST:PORT"));
  }
  HttpEndpoint e;
  e.host = std::string(rest.substr(0, colon));
  e.port = absl::StrCat(port);
  return e;
}

std::string CompletionBody(const PlannedRequest& plan, const std::string& model,
                           const CompletionParams& params) {
  nlohmann::json body;
  body["model"] = model;
  if (plan.text.empty()) {
    // Token ids as planned, BOS first: the same prompt the gRPC path sends (the OpenAI API
    // passes token-id prompts through as they are).
    body["prompt"] = plan.prompt;
  } else {
    body["prompt"] = plan.text;
  }
  body["max_tokens"] = plan.max_tokens;
  body["temperature"] = params.temperature;
  body["seed"] = params.seed;
  body["ignore_eos"] = true;  // every request makes exactly max_tokens, as over gRPC
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  if (!params.cache_salt.empty()) body["cache_salt"] = params.cache_salt;
  return body.dump();
}

bool RecordCompletionEvent(const std::string& data, double now_ms, double* last_token_ms,
                           RequestRecord* record) {
  if (data == "[DONE]") return false;
  const nlohmann::json chunk = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (!chunk.is_object()) return true;
  if (chunk.contains("choices") && chunk["choices"].is_array() && !chunk["choices"].empty()) {
    const nlohmann::json& choice = chunk["choices"][0];
    const bool finishing = choice.contains("finish_reason") && choice["finish_reason"].is_string();
    const bool has_text = choice.contains("text") && choice["text"].is_string();
    // A chunk is an arrival of text, as a user sees it: usually one token (a token mid UTF-8
    // sequence has empty text), though a server may merge tokens into one chunk (the count
    // then comes from usage); an empty chunk that only says why the stream ends is none.
    if (has_text && (!finishing || !choice["text"].get<std::string>().empty())) {
      if (record->output_tokens == 0) {
        record->ttft_ms = now_ms;
      } else {
        record->itl_ms.push_back(now_ms - *last_token_ms);
      }
      *last_token_ms = now_ms;
      ++record->output_tokens;
    }
    if (finishing) {
      record->finish_reason = choice["finish_reason"].get<std::string>();
    }
  }
  if (chunk.contains("usage") && chunk["usage"].is_object()) {
    const nlohmann::json& usage = chunk["usage"];
    if (usage.contains("prompt_tokens") && usage["prompt_tokens"].is_number_unsigned()) {
      record->prompt_tokens = usage["prompt_tokens"].get<uint32_t>();
    }
    if (usage.contains("completion_tokens") && usage["completion_tokens"].is_number_unsigned()) {
      record->output_tokens = usage["completion_tokens"].get<uint32_t>();
    }
    const auto details = usage.find("prompt_tokens_details");
    if (details != usage.end() && details->is_object() && details->contains("cached_tokens") &&
        (*details)["cached_tokens"].is_number_unsigned()) {
      record->cached_tokens = (*details)["cached_tokens"].get<uint32_t>();
    }
  }
  return true;
}

std::string StatusNameOfHttp(int http_status) {
  switch (http_status) {
    case 200:
      return "OK";
    case 400:
      return "INVALID_ARGUMENT";
    case 401:
      return "UNAUTHENTICATED";
    case 403:
      return "PERMISSION_DENIED";
    case 404:
      return "NOT_FOUND";
    case 408:
    case 504:
      return "DEADLINE_EXCEEDED";
    case 413:
    case 429:
      return "RESOURCE_EXHAUSTED";
    case 499:
      return "CANCELLED";
    case 501:
      return "UNIMPLEMENTED";
    case 502:
    case 503:
      return "UNAVAILABLE";
    default:
      return http_status >= 500 ? "INTERNAL" : absl::StrCat("HTTP_", http_status);
  }
}

struct HttpCompletionClient::Io {
  asio::io_context context;
  asio::executor_work_guard<asio::io_context::executor_type> work{context.get_executor()};
  std::vector<std::thread> threads;
};

namespace {

// One request: owns its socket and buffers, and itself through the handlers' shared_ptr.
class CompletionCall : public std::enable_shared_from_this<CompletionCall> {
 public:
  CompletionCall(asio::io_context& io, const HttpEndpoint& endpoint, std::string body,
                 absl::Duration timeout, std::function<void(RequestRecord)> done,
                 RequestRecord record)
      : resolver_(io),
        stream_(io),
        endpoint_(endpoint),
        deadline_(Clock::now() + absl::ToChronoNanoseconds(timeout)),
        done_(std::move(done)),
        record_(std::move(record)) {
    request_ = {http::verb::post, "/v1/completions", 11};
    request_.set(http::field::host, endpoint.host + ":" + endpoint.port);
    request_.set(http::field::content_type, "application/json");
    request_.set(http::field::accept, "text/event-stream");
    if (!endpoint.bearer_token.empty()) {
      request_.set(http::field::authorization, "Bearer " + endpoint.bearer_token);
    }
    request_.body() = std::move(body);
    request_.prepare_payload();
    parser_.body_limit(std::numeric_limits<std::uint64_t>::max());  // a stream's length is open
  }

  void Start() {
    sent_ = Clock::now();
    resolver_.async_resolve(
        endpoint_.host, endpoint_.port,
        [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type found) {
          self->Resolved(ec, std::move(found));
        });
  }

 private:
  void Resolved(beast::error_code ec, tcp::resolver::results_type found) {
    if (ec) return Fail("UNAVAILABLE", "cannot resolve " + endpoint_.host + ": " + ec.message());
    stream_.expires_at(deadline_);
    stream_.async_connect(
        found, [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
          if (ec) return self->FailIo(ec, "cannot connect");
          self->stream_.expires_at(self->deadline_);
          http::async_write(self->stream_, self->request_, [self](beast::error_code ec, size_t) {
            if (ec) return self->FailIo(ec, "cannot send the request");
            self->ReadHeader();
          });
        });
  }

  void ReadHeader() {
    stream_.expires_at(deadline_);
    http::async_read_header(stream_, buffer_, parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->FailIo(ec, "no response");
                              self->http_status_ = self->parser_.get().result_int();
                              self->ReadBody();
                            });
  }

  // Reads what has arrived of the body into `chunk_` and hands it on, until the body ends
  // (read_some: a token's chunk is handed on when it arrives, not when the buffer is full).
  void ReadBody() {
    parser_.get().body().data = chunk_;
    parser_.get().body().size = sizeof(chunk_);
    stream_.expires_at(deadline_);
    http::async_read_some(
        stream_, buffer_, parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
          const size_t got = sizeof(self->chunk_) - self->parser_.get().body().size;
          if (ec == http::error::need_buffer) ec = {};
          if (ec) return self->FailIo(ec, "the stream broke off");
          self->Body(absl::string_view(self->chunk_, got));
          if (self->finished_) return;
          if (self->parser_.is_done()) return self->Finish();
          self->ReadBody();
        });
  }

  void Body(absl::string_view bytes) {
    if (http_status_ != 200) {  // an error's body: its message
      if (error_body_.size() < 512) error_body_.append(bytes.data(), bytes.size());
      return;
    }
    for (const std::string& event : sse_.Feed(bytes)) {
      if (!RecordCompletionEvent(event, MsSince(sent_), &last_token_ms_, &record_)) {
        return Finish();  // [DONE]
      }
    }
  }

  void Finish() {
    if (http_status_ != 200) {
      return Fail(StatusNameOfHttp(http_status_),
                  absl::StrCat("HTTP ", http_status_, ": ", error_body_.substr(0, 200)));
    }
    Complete("OK", "");
  }

  void FailIo(beast::error_code ec, const std::string& what) {
    if (ec == beast::error::timeout) return Fail("DEADLINE_EXCEEDED", what + ": deadline passed");
    Fail("UNAVAILABLE", what + ": " + ec.message());
  }

  void Fail(const std::string& status, const std::string& error) { Complete(status, error); }

  void Complete(const std::string& status, const std::string& error) {
    if (finished_) return;
    finished_ = true;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    record_.e2e_ms = MsSince(sent_);
    record_.status = status;
    record_.error = error;
    done_(std::move(record_));
  }

  tcp::resolver resolver_;
  beast::tcp_stream stream_;
  const HttpEndpoint& endpoint_;
  const Clock::time_point deadline_;
  std::function<void(RequestRecord)> done_;
  RequestRecord record_;
  http::request<http::string_body> request_;
  http::response_parser<http::buffer_body> parser_;
  beast::flat_buffer buffer_;
  char chunk_[16384];
  SseStream sse_;
  std::string error_body_;
  int http_status_ = 0;
  bool finished_ = false;
  Clock::time_point sent_;
  double last_token_ms_ = 0;
};

}  // namespace

HttpCompletionClient::HttpCompletionClient(HttpEndpoint endpoint, int threads)
    : endpoint_(std::move(endpoint)), io_(std::make_unique<Io>()) {
  for (int i = 0; i < std::max(1, threads); ++i) {
    io_->threads.emplace_back([io = io_.get()] { io->context.run(); });
  }
}

HttpCompletionClient::~HttpCompletionClient() {
  io_->work.reset();  // run() returns once the calls in flight are done
  for (std::thread& t : io_->threads) t.join();
}

void HttpCompletionClient::Start(std::string body, absl::Duration timeout,
                                 std::function<void(RequestRecord)> done, RequestRecord record) {
  std::make_shared<CompletionCall>(io_->context, endpoint_, std::move(body), timeout,
                                   std::move(done), std::move(record))
      ->Start();
}

}  // namespace yoco
