// The OpenAI HTTP API over the router's gRPC service.
#include "services/router/openai_front.h"

#include <algorithm>
#include <chrono>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "lib/openai/openai_logprobs.h"
#include "lib/openai/openai_response.h"
#include "lib/openai/stop_string_trimmer.h"
#include "lib/rpc/invalid_field.h"
#include "lib/rpc/request_id.h"
#include "lib/rpc/retry_after.h"
#include "lib/trace/trace_context.h"

namespace yoco {
namespace {

using json = nlohmann::json;

constexpr char kJson[] = "application/json";

absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

// The request field the router named in a refusal (kInvalidFieldMetadata); "" when none.
std::string InvalidFieldOf(const grpc::ClientContext& context) {
  const auto& trailers = context.GetServerTrailingMetadata();
  const auto it = trailers.find(kInvalidFieldMetadata);
  return it == trailers.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

std::string RandomId(const char* prefix) {
  absl::BitGen gen;
  return absl::StrFormat("%s%016x%08x", prefix, absl::Uniform<uint64_t>(gen),
                         absl::Uniform<uint32_t>(gen));
}

// %XX escapes of a query value ('+' stays: salts and handles never need a space).
absl::StatusOr<std::string> PercentDecode(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    int value = 0;
    if (i + 2 >= text.size() || !absl::SimpleHexAtoi(text.substr(i + 1, 2), &value)) {
      return absl::InvalidArgumentError("a query value has a malformed %-escape");
    }
    out += static_cast<char>(value);
    i += 2;
  }
  return out;
}

// A unary call of the router's service answered as JSON.
template <typename Request, typename Response>
struct UnaryCall {
  grpc::ClientContext context;
  Request request;
  Response response;
};

template <typename Request, typename Response, typename Start, typename ToJson>
void RunUnary(OpenAiFront& front, const HttpRequest& http, std::shared_ptr<HttpExchange> exchange,
              Request request, Start start, ToJson to_json) {
  auto call = std::make_shared<UnaryCall<Request, Response>>();
  call->request = std::move(request);
  if (absl::Status st = front.PrepareContext(http, call->context); !st.ok()) {
    return front.Fail(*exchange, st);
  }
  if (!front.Begin(&call->context)) {
    return front.Fail(*exchange, absl::UnavailableError("the router is shutting down"));
  }
  exchange->OnClientGone([weak = std::weak_ptr<UnaryCall<Request, Response>>(call)] {
    if (auto c = weak.lock()) c->context.TryCancel();
  });
  start(&call->context, &call->request, &call->response,
        [&front, call, exchange, to_json](grpc::Status st) {
          if (st.ok()) {
            front.Respond(*exchange, 200, JsonText(to_json(call->response)));
          } else {
            front.Fail(*exchange, FromGrpc(st));
          }
          front.End(&call->context);
        });
}

// A Generate call answered as a completion, whole or streamed. It owns itself from Start to
// OnDone. A hold keeps the call open while a streamed chunk is being written: the next token
// is read only once the client has taken the last one.
class HttpGenerateCall final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  static void Start(OpenAiFront& front, v1::Yoco::Stub& stub, const HttpRequest& http,
                    std::shared_ptr<HttpExchange> exchange, OpenAiGenerate request,
                    CompletionHeader header) {
    auto call = std::shared_ptr<HttpGenerateCall>(
        new HttpGenerateCall(front, std::move(exchange), std::move(request), std::move(header)));
    if (absl::Status st = front.PrepareContext(http, call->context_); !st.ok()) {
      return front.Fail(*call->exchange_, st);
    }
    if (!front.Begin(&call->context_)) {
      return front.Fail(*call->exchange_, absl::UnavailableError("the router is shutting down"));
    }
    call->self_ = call;
    call->exchange_->OnClientGone([weak = std::weak_ptr<HttpGenerateCall>(call)] {
      if (auto c = weak.lock()) c->context_.TryCancel();
    });
    stub.async()->Generate(&call->context_, &call->request_.request, call.get());
    call->AddHold();
    call->StartRead(&call->event_);
    call->StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      RemoveHold();
      return;
    }
    if (event_.has_finish()) {
      finish_ = event_.finish();
      finished_ = true;
      StartRead(&event_);
      return;
    }
    const v1::GeneratedToken& token = event_.token();
    if (token.choice() >= choices_.size()) {  // the router's bug: never a wrong answer
      context_.TryCancel();
      StartRead(&event_);
      return;
    }
    ChoiceOut& choice = choices_[token.choice()];
    const auto& hidden = request_.hidden_token_ids;
    const bool shows = std::find(hidden.begin(), hidden.end(), token.id()) == hidden.end();
    std::string shown = choice.trimmer.Add(shows ? token.text() : "");
    if (shows) choice.logprobs.Add(token);
    choice.logprob_sum += token.logprob().logprob();
    if (!request_.stream) {
      choice.text += shown;
      StartRead(&event_);
      return;
    }
    if (shown.empty()) {
      StartRead(&event_);
      return;
    }
    // A token whose text is held back (a possible stop string) sends its logprobs later.
    Send(ChunkJson(header_, shown, choice.first_chunk, std::nullopt, choice.logprobs.Take(),
                   token.choice()),
         [this](bool sent) {
           if (!sent) context_.TryCancel();  // the client is gone: the read below then fails
           StartRead(&event_);
         });
    choice.first_chunk = false;
  }

  void OnDone(const grpc::Status& status) override {
    if (status.ok() && finished_) {
      if (!request_.stream) {
        front_.Respond(*exchange_, 200,
                       JsonText(CompletionJson(header_, Answers(), finish_.usage())));
      } else {
        for (uint32_t i = 0; i < choices_.size(); ++i) {
          ChoiceOut& choice = choices_[i];
          const std::string rest = choice.trimmer.Flush();
          if (!rest.empty()) {
            Send(ChunkJson(header_, rest, choice.first_chunk, std::nullopt, choice.logprobs.Take(),
                           i),
                 nullptr);
            choice.first_chunk = false;
          }
          const std::optional<std::string> none =
              header_.chat ? std::nullopt : std::optional<std::string>("");
          Send(ChunkJson(header_, none, choice.first_chunk, ReasonOf(i), choice.logprobs.Take(), i),
               nullptr);
        }
        if (request_.include_usage) Send(UsageChunkJson(header_, finish_.usage()), nullptr);
        exchange_->Send(kSseDone, nullptr);
        exchange_->End();
      }
    } else {
      const absl::Status error = status.ok()
                                     ? absl::InternalError("the generation ended early")
                                     : WithParam(FromGrpc(status), InvalidFieldOf(context_));
      if (!stream_started_) {
        const auto& trailers = context_.GetServerTrailingMetadata();
        if (auto it = trailers.find(kRetryAfterMsMetadata); it != trailers.end()) {
          int64_t ms = 0;
          if (absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), &ms)) {
            exchange_->SetHeader("Retry-After",
                                 absl::StrCat((std::max<int64_t>(ms, 1) + 999) / 1000));
          }
        }
        front_.Fail(*exchange_, error);
      } else {
        // The status line is sent: the error travels as an event, as OpenAI's servers do.
        exchange_->Send(SseEvent(ErrorJson(error.code(), std::string(error.message()), "")),
                        nullptr);
        exchange_->Send(kSseDone, nullptr);
        exchange_->End();
      }
    }
    front_.End(&context_);
    self_.reset();  // may delete this
  }

 private:
  // The request field the router named, as this API's "param" (its message already says what
  // is wrong with it).
  absl::Status WithParam(const absl::Status& error, const std::string& field) const {
    std::string param;
    if (field == "prompt") {
      param = header_.chat ? "messages" : "prompt";
    } else if (field == "sampling.max_new_tokens") {
      param = "max_tokens";
    } else if (field == "sampling.stop_strings") {
      param = "stop";
    } else if (field == "sampling.logprobs") {
      param = header_.chat ? "top_logprobs" : "logprobs";
    } else if (absl::StartsWith(field, "sampling.")) {
      param = field.substr(sizeof("sampling.") - 1);  // the same name in both APIs
    }
    if (param.empty()) return error;
    return ParamError(param, error.message());
  }

  HttpGenerateCall(OpenAiFront& front, std::shared_ptr<HttpExchange> exchange,
                   OpenAiGenerate request, CompletionHeader header)
      : front_(front),
        exchange_(std::move(exchange)),
        request_(std::move(request)),
        header_(std::move(header)) {
    const v1::SamplingParams& sampling = request_.request.sampling();
    const std::vector<std::string> stops(sampling.stop_strings().begin(),
                                         sampling.stop_strings().end());
    for (uint32_t i = 0; i < std::max<uint32_t>(1, sampling.n()); ++i) {
      choices_.push_back(
          {StopStringTrimmer(stops),
           OpenAiLogprobs(header_.chat, sampling.has_logprobs() && request_.logprobs_shown)});
    }
  }

  // How choice `i` ended: a stop string the trimmer found, or the router's reason.
  v1::FinishReason ReasonOf(uint32_t i) const {
    if (choices_[i].trimmer.stopped()) return v1::FINISH_REASON_STOP;
    return i < static_cast<uint32_t>(finish_.choices_size()) ? finish_.choices(i).reason()
                                                             : finish_.reason();
  }

  // A whole response's choices: every one, or (best_of) the request's n with the highest sums
  // of token logprobs, best first (ties: the earlier).
  std::vector<CompletionChoice> Answers() {
    std::vector<uint32_t> order(choices_.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    if (request_.best_of > request_.choices) {
      std::stable_sort(order.begin(), order.end(), [this](uint32_t a, uint32_t b) {
        return choices_[a].logprob_sum > choices_[b].logprob_sum;
      });
      order.resize(request_.choices);
    }
    std::vector<CompletionChoice> answers;
    for (uint32_t i : order) {
      ChoiceOut& choice = choices_[i];
      answers.push_back(
          {choice.text + choice.trimmer.Flush(), ReasonOf(i), choice.logprobs.Take()});
    }
    return answers;
  }

  void Send(const json& event, std::function<void(bool)> sent) {
    if (!stream_started_) {
      stream_started_ = true;
      exchange_->StartStream(200, "text/event-stream");
      front_.CountResponse(200);
    }
    exchange_->Send(SseEvent(event), std::move(sent));
  }

  // What one choice has shown so far.
  struct ChoiceOut {
    StopStringTrimmer trimmer;
    OpenAiLogprobs logprobs;  // of the tokens shown, until the chunk that carries them
    std::string text;         // a whole response's text so far
    bool first_chunk = true;
    double logprob_sum = 0;  // of all its tokens (best_of's ranking)
  };

  OpenAiFront& front_;
  const std::shared_ptr<HttpExchange> exchange_;
  const OpenAiGenerate request_;
  const CompletionHeader header_;
  grpc::ClientContext context_;
  v1::GenerateResponse event_;
  std::vector<ChoiceOut> choices_;  // by the router's choice index (best_of of them)
  v1::Finish finish_;
  bool finished_ = false;
  bool stream_started_ = false;
  std::shared_ptr<HttpGenerateCall> self_;
};

}  // namespace

OpenAiFront::OpenAiFront(std::shared_ptr<grpc::Channel> channel, const Tokenizer& tokenizer,
                         std::optional<ChatTemplate> chat_template, std::function<bool()> ready,
                         OpenAiFrontOptions options,
                         prometheus::Family<prometheus::Counter>* responses)
    : stub_(v1::Yoco::NewStub(std::move(channel))),
      tokenizer_(tokenizer),
      chat_template_(std::move(chat_template)),
      ready_(std::move(ready)),
      options_(std::move(options)),
      responses_(responses),
      started_unix_(absl::ToUnixSeconds(absl::Now())) {}

void OpenAiFront::CountResponse(int status) {
  if (responses_ != nullptr) responses_->Add({{"status", std::to_string(status)}}).Increment();
}

void OpenAiFront::Respond(HttpExchange& exchange, int status, const std::string& body) {
  CountResponse(status);
  exchange.Respond(status, kJson, body);
}

void OpenAiFront::Fail(HttpExchange& exchange, const absl::Status& status) {
  Respond(exchange, HttpStatusOf(status.code()),
          JsonText(ErrorJson(status.code(), std::string(status.message()), RequestParam(status))));
}

bool OpenAiFront::Begin(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return false;
  calls_.insert(context);
  return true;
}

void OpenAiFront::End(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  calls_.erase(context);
  if (calls_.empty()) idle_.SignalAll();
}

bool OpenAiFront::Shutdown(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  for (grpc::ClientContext* context : calls_) context->TryCancel();
  const absl::Time deadline = absl::Now() + timeout;
  while (!calls_.empty() && absl::Now() < deadline) idle_.WaitWithDeadline(&mu_, deadline);
  return calls_.empty();
}

absl::Status OpenAiFront::PrepareContext(const HttpRequest& request,
                                         grpc::ClientContext& context) const {
  absl::Duration timeout = options_.request_timeout;
  if (const std::string header = request.Header("x-request-timeout"); !header.empty()) {
    double seconds = 0;
    if (!absl::SimpleAtod(header, &seconds) || !(seconds > 0 && seconds <= 86400)) {
      return ParamError("X-Request-Timeout", "must be seconds in (0, 86400]");
    }
    timeout = absl::Seconds(seconds);
  }
  context.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
  if (const std::string auth = request.Header("authorization"); !auth.empty()) {
    // gRPC metadata values are printable ASCII; anything else cannot be a token of ours.
    for (char c : auth) {
      if (c < 0x20 || c > 0x7e) {
        return absl::UnauthenticatedError("the Authorization header is malformed");
      }
    }
    context.AddMetadata("authorization", auth);
  }
  // The caller's W3C trace context goes on to the router's service, whose span continues it; a
  // malformed one is dropped (a new trace), as the specification says.
  if (std::optional<TraceContext> trace = ParseTraceparent(request.Header(kTraceparentHeader))) {
    trace->tracestate = CheckedTracestate(request.Header(kTracestateHeader));
    context.AddMetadata(kTraceparentHeader, trace->Traceparent());
    if (!trace->tracestate.empty()) context.AddMetadata(kTracestateHeader, trace->tracestate);
  }
  return absl::OkStatus();
}

void OpenAiFront::Handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
  const std::string path = request.Path();
  const std::string& method = request.method;
  auto only = [&](const char* allowed) {
    if (method == allowed) return true;
    Respond(*exchange, 405,
            JsonText(ErrorJson(absl::StatusCode::kInvalidArgument,
                               absl::StrCat(path, " takes ", allowed, ", not ", method), "")));
    return false;
  };
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_ && path != "/health") {
      return Fail(*exchange, absl::UnavailableError("the router is shutting down"));
    }
  }
  // A compressed body is no malformed JSON: say what to do instead.
  if (const std::string encoding = request.Header("content-encoding");
      !encoding.empty() && !absl::EqualsIgnoreCase(encoding, "identity")) {
    Respond(*exchange, 415,
            JsonText(ErrorJson(absl::StatusCode::kInvalidArgument,
                               absl::StrCat("Content-Encoding ", encoding,
                                            " is not supported: send the body uncompressed"),
                               "")));
    return;
  }
  if (path == "/health") {
    if (only("GET")) Respond(*exchange, 200, "{}");
  } else if (path == "/ready") {
    if (!only("GET")) return;
    if (ready_()) {
      Respond(*exchange, 200, R"({"ready":true})");
    } else {
      Fail(*exchange, absl::UnavailableError("no healthy prefill or decode worker, or draining"));
    }
  } else if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (only("POST")) Generate(request, std::move(exchange), path == "/v1/chat/completions");
  } else if (path == "/v1/models") {
    if (only("GET")) Models(request, std::move(exchange));
  } else if (path == "/tokenize") {
    if (only("POST")) Tokenize(request, std::move(exchange));
  } else if (path == "/detokenize") {
    if (only("POST")) Detokenize(request, std::move(exchange));
  } else if (path == "/v1/cache/precache") {
    if (only("POST")) Precache(request, std::move(exchange));
  } else if (path == "/v1/cache") {
    if (method == "DELETE") {
      EvictCache(request, std::move(exchange), "");
    } else if (only("GET")) {
      ListCache(request, std::move(exchange));
    }
  } else if (absl::StartsWith(path, "/v1/cache/")) {
    if (only("DELETE")) EvictCache(request, std::move(exchange), path.substr(10));
  } else {
    Fail(*exchange, absl::NotFoundError(absl::StrCat("no such endpoint: ", method, " ", path)));
  }
}

void OpenAiFront::Generate(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange,
                           bool chat) {
  absl::BitGen gen;
  const uint64_t seed = absl::Uniform<uint64_t>(gen) >> 1;
  absl::StatusOr<OpenAiGenerate> parsed =
      chat ? ParseChatRequest(request.body, chat_template_ ? &*chat_template_ : nullptr, tokenizer_,
                              options_.defaults, seed)
           : ParseCompletionRequest(request.body, options_.defaults, seed);
  if (!parsed.ok()) return Fail(*exchange, parsed.status());
  if (!parsed->model.empty() && parsed->model != options_.model_name) {
    absl::Status missing = absl::NotFoundError(
        absl::StrCat("model: the model \"", parsed->model,
                     "\" does not exist (this router serves \"", options_.model_name, "\")"));
    return Fail(*exchange, missing);
  }
  CompletionHeader header;
  header.chat = chat;
  header.id = RandomId(chat ? "chatcmpl-" : "cmpl-");
  header.created = absl::ToUnixSeconds(absl::Now());
  header.model = options_.model_name;
  const std::string request_id = request.Header("x-request-id");
  parsed->request.set_request_id(request_id.empty() ? header.id : request_id.substr(0, 128));
  // Echoed, so a client can quote it (the server drops a value that is not printable ASCII; the
  // router then refuses the request, naming the field).
  exchange->SetHeader(kRequestIdMetadata, parsed->request.request_id());
  if (parsed->echo) return Echo(request, std::move(exchange), *parsed, header);
  HttpGenerateCall::Start(*this, *stub_, request, std::move(exchange), *std::move(parsed),
                          std::move(header));
}

void OpenAiFront::Echo(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange,
                       const OpenAiGenerate& parsed, const CompletionHeader& header) {
  v1::ScoreRequest score;
  score.set_request_id(parsed.request.request_id());
  if (parsed.request.has_tokens()) {
    *score.mutable_tokens() = parsed.request.tokens();
  } else {
    score.set_text(parsed.request.text());
  }
  const bool with_logprobs = parsed.request.sampling().has_logprobs();
  score.set_top_logprobs(parsed.request.sampling().logprobs());
  RunUnary<v1::ScoreRequest, v1::ScoreResponse>(
      *this, request, std::move(exchange), std::move(score),
      [this](auto* c, auto* q, auto* r, auto done) {
        stub_->async()->Score(c, q, r, std::move(done));
      },
      [header, with_logprobs](const v1::ScoreResponse& scored) {
        std::string text;
        for (const v1::GeneratedToken& token : scored.tokens()) text += token.text();
        v1::Usage usage;
        usage.set_prompt_tokens(static_cast<uint32_t>(scored.tokens_size()));
        return CompletionJson(header, text, v1::FINISH_REASON_LENGTH, usage,
                              EchoLogprobsJson(scored, with_logprobs));
      });
}

void OpenAiFront::Models(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange) {
  RunUnary<v1::GetModelInfoRequest, v1::ModelInfo>(
      *this, request, std::move(exchange), v1::GetModelInfoRequest(),
      [this](auto* c, auto* q, auto* r, auto done) {
        stub_->async()->GetModelInfo(c, q, r, std::move(done));
      },
      [this](const v1::ModelInfo& info) {
        return json{{"object", "list"},
                    {"data", json::array({{{"id", options_.model_name},
                                           {"object", "model"},
                                           {"created", started_unix_},
                                           {"owned_by", "yoco-serve"},
                                           {"max_model_len", info.max_seq_len()},
                                           {"tokenizer", info.tokenizer()}}})}};
      });
}

void OpenAiFront::Tokenize(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange) {
  absl::StatusOr<json> body = ParseRequestObject(request.body);
  if (!body.ok()) return Fail(*exchange, body.status());
  for (const auto& [key, value] : body->items()) {
    if (key != "model" && key != "prompt" && key != "add_special_tokens") {
      return Fail(*exchange, ParamError(key, "unknown or unsupported field"));
    }
  }
  if (!body->contains("prompt") || !(*body)["prompt"].is_string()) {
    return Fail(*exchange, ParamError("prompt", "must be a string"));
  }
  const json add = body->value("add_special_tokens", json(true));
  if (!add.is_boolean()) return Fail(*exchange, ParamError("add_special_tokens", "must be a bool"));
  v1::TokenizeRequest tokenize;
  tokenize.set_text((*body)["prompt"].get<std::string>());
  const bool bos = add.get<bool>();
  const int max_len = options_.defaults.max_seq_len;
  RunUnary<v1::TokenizeRequest, v1::TokenizeResponse>(
      *this, request, std::move(exchange), std::move(tokenize),
      [this](auto* c, auto* q, auto* r, auto done) {
        stub_->async()->Tokenize(c, q, r, std::move(done));
      },
      [bos, max_len](const v1::TokenizeResponse& r) {
        json tokens = json::array();
        if (bos) tokens.push_back(0);  // what a text prompt starts with (BOS)
        for (int32_t id : r.ids()) tokens.push_back(id);
        return json{{"count", tokens.size()}, {"max_model_len", max_len}, {"tokens", tokens}};
      });
}

void OpenAiFront::Detokenize(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange) {
  absl::StatusOr<json> body = ParseRequestObject(request.body);
  if (!body.ok()) return Fail(*exchange, body.status());
  for (const auto& [key, value] : body->items()) {
    if (key != "model" && key != "tokens") {
      return Fail(*exchange, ParamError(key, "unknown or unsupported field"));
    }
  }
  v1::TokenIds ids;
  if (absl::Status st = AppendTokenIds(body->value("tokens", json()), "tokens", &ids); !st.ok()) {
    return Fail(*exchange, st);
  }
  v1::DetokenizeRequest detokenize;
  *detokenize.mutable_ids() = std::move(*ids.mutable_ids());
  RunUnary<v1::DetokenizeRequest, v1::DetokenizeResponse>(
      *this, request, std::move(exchange), std::move(detokenize),
      [this](auto* c, auto* q, auto* r, auto done) {
        stub_->async()->Detokenize(c, q, r, std::move(done));
      },
      [](const v1::DetokenizeResponse& r) {
        return json{{"prompt", r.text()}};
      });
}

void OpenAiFront::Precache(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange) {
  absl::StatusOr<json> body = ParseRequestObject(request.body);
  if (!body.ok()) return Fail(*exchange, body.status());
  v1::PrecacheRequest precache;
  for (const auto& [key, value] : body->items()) {
    if (key == "model") {
      if (!value.is_string()) return Fail(*exchange, ParamError(key, "must be a string"));
    } else if (key == "text") {
      if (!value.is_string()) return Fail(*exchange, ParamError(key, "must be a string"));
      precache.set_text(value.get<std::string>());
    } else if (key == "tokens") {
      if (absl::Status st = AppendTokenIds(value, key, precache.mutable_tokens()); !st.ok()) {
        return Fail(*exchange, st);
      }
    } else if (key == "pin") {
      if (!value.is_boolean()) return Fail(*exchange, ParamError(key, "must be true or false"));
      precache.set_pin(value.get<bool>());
    } else if (key == "ttl_seconds") {
      if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
          value.get<int64_t>() > UINT32_MAX) {
        return Fail(*exchange, ParamError(key, "must be a non-negative integer"));
      }
      precache.set_ttl_seconds(static_cast<uint32_t>(value.get<int64_t>()));
    } else if (key == "cache_salt") {
      if (!value.is_string()) return Fail(*exchange, ParamError(key, "must be a string"));
      precache.set_cache_salt(value.get<std::string>());
    } else {
      return Fail(*exchange, ParamError(key, "unknown or unsupported field"));
    }
  }
  if (body->contains("text") == body->contains("tokens")) {
    return Fail(*exchange, ParamError("text", "give the document as text or as tokens"));
  }
  RunUnary<v1::PrecacheRequest, v1::PrecacheResponse>(
      *this, request, std::move(exchange), std::move(precache),
      [this](auto* c, auto* q, auto* r, auto done) {
        stub_->async()->Precache(c, q, r, std::move(done));
      },
      [](const v1::PrecacheResponse& r) {
        return json{
            {"handle", r.handle()}, {"tokens", r.tokens()}, {"cached_tokens", r.cached_tokens()},
            {"bytes", r.bytes()},   {"worker", r.worker()}, {"disk_error", r.disk_error()}};
      });
}

void OpenAiFront::ListCache(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange) {
  v1::ListCacheRequest list;
  if (request.target.find("cache_salt=") != std::string::npos) {
    absl::StatusOr<std::string> salt = PercentDecode(request.Query("cache_salt"));
    if (!salt.ok()) return Fail(*exchange, ParamError("cache_salt", salt.status().message()));
    list.set_cache_salt(*salt);
  }
  RunUnary<v1::ListCacheRequest, v1::ListCacheResponse>(
      *this, request, std::move(exchange), std::move(list),
      [this](auto* c, auto* q, auto* r, auto done) {
        stub_->async()->ListCache(c, q, r, std::move(done));
      },
      [](const v1::ListCacheResponse& r) {
        json data = json::array();
        for (const v1::CacheEntry& e : r.entries()) {
          data.push_back({{"handle", e.handle()},
                          {"tokens", e.tokens()},
                          {"bytes", e.bytes()},
                          {"tier", e.tier()},
                          {"pinned", e.pinned()},
                          {"hits", e.hits()},
                          {"worker", e.worker()},
                          {"expires_unix_ms", e.expires_unix_ms()}});
        }
        return json{{"object", "list"}, {"data", data}};
      });
}

void OpenAiFront::EvictCache(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange,
                             const std::string& handle) {
  v1::EvictCacheRequest evict;
  if (handle.empty()) {
    if (request.Query("all") != "true") {
      return Fail(*exchange, ParamError("all",
                                        "DELETE /v1/cache evicts everything only with "
                                        "?all=true; one snapshot: /v1/cache/{handle}"));
    }
    evict.set_all(true);
  } else {
    evict.set_handle(handle);
  }
  if (request.target.find("cache_salt=") != std::string::npos) {
    absl::StatusOr<std::string> salt = PercentDecode(request.Query("cache_salt"));
    if (!salt.ok()) return Fail(*exchange, ParamError("cache_salt", salt.status().message()));
    evict.set_cache_salt(*salt);
  }
  RunUnary<v1::EvictCacheRequest, v1::EvictCacheResponse>(
      *this, request, std::move(exchange), std::move(evict),
      [this](auto* c, auto* q, auto* r, auto done) {
        stub_->async()->EvictCache(c, q, r, std::move(done));
      },
      [](const v1::EvictCacheResponse& r) {
        return json{{"evicted", r.evicted()}};
      });
}

}  // namespace yoco
