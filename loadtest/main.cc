// yoco-loadtest: a seeded RAG/shared-prefix/random load against the router's gRPC API, with an
// SLO report. Flags, wiring, run; the generators, driver and statistics live beside it.
#include <fstream>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "lib/files/key_file.h"
#include "lib/rpc/service_flags.h"
#include "lib/rpc/tls_credentials.h"
#include "lib/rpc/tls_flags.h"
#include "loadtest/latency_plot.h"
#include "loadtest/load_driver.h"
#include "loadtest/load_summary.h"
#include "loadtest/metrics_scrape.h"
#include "loadtest/workload.h"
#include "yoco/v1/yoco.grpc.pb.h"

ABSL_FLAG(std::string, router, "127.0.0.1:50051", "the router's gRPC address HOST:PORT");
ABSL_FLAG(std::string, workload, "rag", "rag, shared-prefix, chat, random or replay");
ABSL_FLAG(uint64_t, requests, 100, "requests in the run (0: bounded by --duration-seconds)");
ABSL_FLAG(double, duration_seconds, 0, "no request starts after this (0: no bound)");
ABSL_FLAG(int, concurrency, 0, "closed loop: requests in flight");
ABSL_FLAG(double, rate, 0, "open loop: requests per second");
ABSL_FLAG(std::string, arrivals, "poisson", "open loop: poisson or constant");
ABSL_FLAG(uint64_t, seed, 0, "the workload's, arrivals' and sampling seed");
ABSL_FLAG(int, output_tokens, 64, "tokens each request generates (EOS ignored)");
ABSL_FLAG(double, temperature, 0, "sampling temperature (0: greedy)");
ABSL_FLAG(int, documents, 8, "rag: documents");
ABSL_FLAG(int, document_tokens, 1024, "rag: tokens per document (BOS included)");
ABSL_FLAG(int, question_tokens, 32, "rag: tokens of the question after the document");
ABSL_FLAG(double, zipf, 1.0, "rag: document popularity ~ 1/rank^zipf");
ABSL_FLAG(double, unseen_fraction, 0, "rag: fraction of requests about a never-seen document");
ABSL_FLAG(bool, precache, false, "rag: pre-cache every document before the run");
ABSL_FLAG(bool, pin, false, "rag: pin the pre-cached documents");
ABSL_FLAG(int, prefix_tokens, 512, "shared-prefix: tokens of the shared prefix");
ABSL_FLAG(int, suffix_tokens, 64, "shared-prefix: tokens after it");
ABSL_FLAG(int, input_tokens, 256, "random: mean prompt tokens");
ABSL_FLAG(int, input_spread, 0, "random: prompt tokens uniform in mean +- spread");
ABSL_FLAG(int, turns, 4, "chat: requests per session");
ABSL_FLAG(int, system_tokens, 128, "chat: tokens of the shared system prompt");
ABSL_FLAG(int, user_tokens, 32, "chat: tokens of each user message");
ABSL_FLAG(std::string, replay, "",
          "replay: a JSONL file, one request per line: {\"timestamp_ms\": T, \"prompt_tokens\": "
          "[ids] or \"prompt\": TEXT, \"max_tokens\": N}, sent at its timestamp");
ABSL_FLAG(std::string, cache_salt, "", "every request's cache salt");
ABSL_FLAG(std::string, token_file, "", "a tenant's bearer token");
ABSL_FLAG(double, timeout_seconds, 120, "each request's deadline");
ABSL_FLAG(std::string, slo, "", "ttft=MS,tpot=MS: goodput counts requests within both");
ABSL_FLAG(std::string, json, "", "the summary (JSON)");
ABSL_FLAG(std::string, jsonl, "", "one JSON line per request");
ABSL_FLAG(std::string, plot, "", "latency plot (PNG, gnuplot)");
ABSL_FLAG(std::string, scrape, "",
          "http://HOST:PORT/metrics[,...]: the series each server changed during the run go "
          "into the summary");
ABSL_FLAG(bool, quiet, false, "no progress line");
ABSL_FLAG(std::string, http, "",
          "http://HOST:PORT: send the requests to this OpenAI-compatible server's streamed "
          "/v1/completions instead of --router's gRPC API (the same workload, measured alike)");
ABSL_FLAG(std::string, http_model, "",
          "--http: the requests' model (default: the first of GET /v1/models)");
ABSL_FLAG(int, vocab_size, 0, "--http: the model's vocabulary size (bounds the random token ids)");
ABSL_FLAG(bool, sweep, false,
          "open-loop runs of --requests each at rising rates from --rate (x --sweep-factor) until "
          "the --slo breaks; reports the maximum sustainable rate");
ABSL_FLAG(double, sweep_factor, 1.5, "--sweep: each rate is the last times this");
ABSL_FLAG(int, sweep_steps, 8, "--sweep: at most this many rates");
ABSL_FLAG(double, sweep_attainment, 0.9,
          "--sweep: a rate holds the SLO when no request fails and this fraction meets it");

namespace {

int Fail(const std::string& message) {
  std::cerr << "yoco-loadtest: " << message << "\n";
  return 1;
}

// The first model an OpenAI-compatible server lists (GET /v1/models).
absl::StatusOr<std::string> FirstModel(const yoco::HttpEndpoint& endpoint) {
  const std::string url = "http://" + endpoint.host + ":" + endpoint.port + "/v1/models";
  auto text = yoco::HttpGet(url);
  if (!text.ok()) return text.status();
  const nlohmann::json models = nlohmann::json::parse(*text, nullptr, false);
  if (!models.is_object() || !models.contains("data") || !models["data"].is_array() ||
      models["data"].empty() || !models["data"][0].contains("id") ||
      !models["data"][0]["id"].is_string()) {
    return absl::UnavailableError(url + " lists no model; give --http-model");
  }
  return models["data"][0]["id"].get<std::string>();
}

absl::StatusOr<yoco::Slo> ParseSlo(const std::string& text) {
  yoco::Slo slo;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    double ms = 0;
    if (!absl::SimpleAtod(kv.second, &ms) || ms <= 0) {
      return absl::InvalidArgumentError("--slo: " + std::string(part) + " is not NAME=MS");
    }
    if (kv.first == "ttft") {
      slo.ttft_ms = ms;
    } else if (kv.first == "tpot") {
      slo.tpot_ms = ms;
    } else {
      return absl::InvalidArgumentError("--slo: " + kv.first + " is not ttft or tpot");
    }
  }
  return slo;
}

bool WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  return static_cast<bool>(f);
}

// --sweep: open-loop steps at rising rates; each step's requests are new indices of the workload.
int Sweep(std::shared_ptr<grpc::Channel> channel, const yoco::Workload& workload,
          yoco::LoadOptions load, const yoco::Slo& slo) {
  nlohmann::json steps = nlohmann::json::array();
  std::vector<yoco::SweepPoint> points;
  std::string jsonl;
  double rate = load.rate, best = 0;
  for (int step = 0; step < absl::GetFlag(FLAGS_sweep_steps); ++step) {
    yoco::LoadOptions options = load;
    options.rate = rate;
    options.first_index = static_cast<uint64_t>(step) * load.requests;
    yoco::LoadDriver driver(channel, workload, options);
    double duration_s = 0;
    std::vector<yoco::RequestRecord> records = driver.Run(&duration_s);
    const yoco::LoadSummary summary = yoco::SummarizeRun(records, duration_s, slo);
    nlohmann::json j = yoco::ToJson(summary);
    j["offered_rate"] = rate;
    steps.push_back(j);
    points.push_back({rate, summary.requests_per_s, summary.goodput_requests_per_s,
                      summary.ttft_ms.p50, summary.ttft_ms.p99, summary.tpot_ms.p99});
    for (const yoco::RequestRecord& r : records) {
      nlohmann::json line = r.ToJson();
      line["offered_rate"] = rate;
      jsonl += line.dump() + "\n";
    }
    const bool holds = yoco::HoldsSlo(summary, absl::GetFlag(FLAGS_sweep_attainment));
    std::cerr << absl::StrFormat(
        "rate %.2f/s: completed %.2f/s, TTFT p99 %.0f ms, TPOT p99 %.1f ms, SLO met by %.0f%%, "
        "%d errors: %s\n",
        rate, summary.requests_per_s, summary.ttft_ms.p99, summary.tpot_ms.p99,
        100 * summary.slo_attainment, static_cast<int>(summary.requests - summary.ok),
        holds ? "holds" : "breaks");
    if (!holds) break;
    best = rate;
    rate *= absl::GetFlag(FLAGS_sweep_factor);
  }
  nlohmann::json out = {{"workload", yoco::WorkloadKindName(workload.options().kind)},
                        {"seed", load.seed},
                        {"slo", {{"ttft_ms", slo.ttft_ms}, {"tpot_ms", slo.tpot_ms}}},
                        {"sweep_attainment", absl::GetFlag(FLAGS_sweep_attainment)},
                        {"max_sustainable_rate", best},
                        {"steps", steps}};
  std::cout << out.dump(2) << "\n";
  if (!absl::GetFlag(FLAGS_json).empty() &&
      !WriteText(absl::GetFlag(FLAGS_json), out.dump(2) + "\n")) {
    return Fail("cannot write " + absl::GetFlag(FLAGS_json));
  }
  if (!absl::GetFlag(FLAGS_jsonl).empty() && !WriteText(absl::GetFlag(FLAGS_jsonl), jsonl)) {
    return Fail("cannot write " + absl::GetFlag(FLAGS_jsonl));
  }
  if (!absl::GetFlag(FLAGS_plot).empty()) {
    const std::string title =
        absl::StrFormat("%s sweep: max sustainable rate %.2f/s",
                        yoco::WorkloadKindName(workload.options().kind), best);
    if (absl::Status st = yoco::WriteSweepPlot(points, slo.ttft_ms, slo.tpot_ms, title,
                                               absl::GetFlag(FLAGS_plot));
        !st.ok()) {
      return Fail(std::string(st.message()));
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  yoco::ParseServiceFlags(
      argc, argv,
      "a seeded load against the router, with an SLO report.\nusage: yoco-loadtest --router "
      "HOST:PORT --workload rag|shared-prefix|chat|random|replay [workload flags] --requests N "
      "(--concurrency C | --rate R) --seed S --json OUT.json [--jsonl OUT.jsonl] [--plot OUT.png] "
      "[--slo ttft=MS,tpot=MS] [--sweep]");
  auto kind = yoco::ParseWorkloadKind(absl::GetFlag(FLAGS_workload));
  if (!kind.ok()) return Fail(std::string(kind.status().message()));
  auto slo = ParseSlo(absl::GetFlag(FLAGS_slo));
  if (!slo.ok()) return Fail(std::string(slo.status().message()));
  yoco::LoadOptions load;
  load.concurrency = absl::GetFlag(FLAGS_concurrency);
  load.rate = absl::GetFlag(FLAGS_rate);
  const bool replay = *kind == yoco::WorkloadKind::kReplay;
  if (replay && (load.concurrency > 0 || load.rate > 0 || absl::GetFlag(FLAGS_sweep))) {
    return Fail(
        "--workload replay sends at the file's timestamps: no --concurrency, --rate or "
        "--sweep");
  }
  if (!replay && (load.concurrency > 0) == (load.rate > 0)) {
    return Fail("give one of --concurrency C (closed loop) and --rate R (open loop)");
  }
  if (absl::GetFlag(FLAGS_sweep)) {
    if (load.rate <= 0) return Fail("--sweep starts from --rate R (open loop)");
    if (slo->ttft_ms <= 0 && slo->tpot_ms <= 0) return Fail("--sweep needs --slo");
    if (!(absl::GetFlag(FLAGS_sweep_factor) > 1)) return Fail("--sweep-factor must be above 1");
  }
  if (absl::GetFlag(FLAGS_arrivals) == "constant") {
    load.arrivals = yoco::Arrivals::kConstant;
  } else if (absl::GetFlag(FLAGS_arrivals) != "poisson") {
    return Fail("--arrivals: poisson or constant");
  }
  load.requests = absl::GetFlag(FLAGS_requests);
  if (absl::GetFlag(FLAGS_duration_seconds) > 0) {
    load.duration = absl::Seconds(absl::GetFlag(FLAGS_duration_seconds));
  } else if (load.requests == 0) {
    return Fail("give --requests N or --duration-seconds S");
  }
  load.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_seconds));
  load.cache_salt = absl::GetFlag(FLAGS_cache_salt);
  load.seed = absl::GetFlag(FLAGS_seed);
  load.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
  load.progress = !absl::GetFlag(FLAGS_quiet);
  if (!absl::GetFlag(FLAGS_token_file).empty()) {
    auto token = yoco::ReadKeyFile(absl::GetFlag(FLAGS_token_file), "--token-file");
    if (!token.ok()) return Fail(std::string(token.status().message()));
    load.bearer_token = *token;
  }
  auto credentials = yoco::MakeChannelCredentials(yoco::TlsFilesFromFlags());
  if (!credentials.ok()) return Fail(std::string(credentials.status().message()));
  auto channel = grpc::CreateChannel(absl::GetFlag(FLAGS_router), *credentials);

  // The model's vocabulary bounds the random token ids.
  yoco::v1::ModelInfo info;
  if (!absl::GetFlag(FLAGS_http).empty()) {
    auto endpoint = yoco::ParseHttpEndpoint(absl::GetFlag(FLAGS_http));
    if (!endpoint.ok()) return Fail(std::string(endpoint.status().message()));
    if (*kind == yoco::WorkloadKind::kChat) return Fail("--workload chat needs the gRPC API");
    if (absl::GetFlag(FLAGS_precache)) return Fail("--precache needs the gRPC API (--router)");
    if (absl::GetFlag(FLAGS_vocab_size) < 5) return Fail("--http needs --vocab-size N");
    info.set_vocab_size(absl::GetFlag(FLAGS_vocab_size));
    endpoint->model = absl::GetFlag(FLAGS_http_model);
    if (endpoint->model.empty()) {
      auto model = FirstModel(*endpoint);
      if (!model.ok()) return Fail(std::string(model.status().message()));
      endpoint->model = *model;
    }
    load.http = *std::move(endpoint);
  } else {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!load.bearer_token.empty()) {
      context.AddMetadata("authorization", "Bearer " + load.bearer_token);
    }
    const grpc::Status st = yoco::v1::Yoco::NewStub(channel)->GetModelInfo(&context, {}, &info);
    if (!st.ok())
      return Fail("the router at " + absl::GetFlag(FLAGS_router) + ": " + st.error_message());
  }
  yoco::WorkloadOptions w;
  w.kind = *kind;
  w.seed = load.seed;
  w.vocab_size = info.vocab_size();
  w.output_tokens = absl::GetFlag(FLAGS_output_tokens);
  w.documents = absl::GetFlag(FLAGS_documents);
  w.document_tokens = absl::GetFlag(FLAGS_document_tokens);
  w.question_tokens = absl::GetFlag(FLAGS_question_tokens);
  w.zipf_exponent = absl::GetFlag(FLAGS_zipf);
  w.unseen_fraction = absl::GetFlag(FLAGS_unseen_fraction);
  w.prefix_tokens = absl::GetFlag(FLAGS_prefix_tokens);
  w.suffix_tokens = absl::GetFlag(FLAGS_suffix_tokens);
  w.input_tokens = absl::GetFlag(FLAGS_input_tokens);
  w.input_spread = absl::GetFlag(FLAGS_input_spread);
  w.turns = absl::GetFlag(FLAGS_turns);
  w.system_tokens = absl::GetFlag(FLAGS_system_tokens);
  w.user_tokens = absl::GetFlag(FLAGS_user_tokens);
  w.replay_path = absl::GetFlag(FLAGS_replay);
  if (replay && w.replay_path.empty()) return Fail("--workload replay needs --replay FILE");
  auto workload = yoco::Workload::Make(w);
  if (!workload.ok()) return Fail(std::string(workload.status().message()));
  if (replay) {  // the file's requests, at most --requests of them
    const uint64_t in_file = workload->replay_size();
    load.requests = load.requests == 0 ? in_file : std::min<uint64_t>(load.requests, in_file);
  }

  std::vector<std::string> scrape_urls =
      absl::StrSplit(absl::GetFlag(FLAGS_scrape), ',', absl::SkipEmpty());
  std::vector<std::map<std::string, double>> before;
  for (const std::string& url : scrape_urls) {
    auto text = yoco::HttpGet(url);
    if (!text.ok()) return Fail(std::string(text.status().message()));
    before.push_back(yoco::ParsePrometheusText(*text));
  }

  yoco::LoadDriver driver(channel, *workload, load);
  if (absl::GetFlag(FLAGS_precache)) {
    if (absl::Status st = driver.Precache(absl::GetFlag(FLAGS_pin)); !st.ok()) {
      return Fail(std::string(st.message()));
    }
  }
  if (absl::GetFlag(FLAGS_sweep)) return Sweep(channel, *workload, load, *slo);
  double duration_s = 0;
  std::vector<yoco::RequestRecord> records = driver.Run(&duration_s);
  yoco::LoadSummary summary = yoco::SummarizeRun(records, duration_s, *slo);

  nlohmann::json out = yoco::ToJson(summary);
  out["workload"] = yoco::WorkloadKindName(w.kind);
  out["seed"] = load.seed;
  out["load"] =
      load.concurrency > 0 ? nlohmann::json{{"concurrency", load.concurrency}}
      : replay             ? nlohmann::json{{"replay", w.replay_path}}
               : nlohmann::json{{"rate", load.rate}, {"arrivals", absl::GetFlag(FLAGS_arrivals)}};
  out["slo"] = {{"ttft_ms", slo->ttft_ms}, {"tpot_ms", slo->tpot_ms}};
  out["tpot_definition"] = "(e2e - ttft) / (output_tokens - 1), the first token excluded";
  nlohmann::json servers = nlohmann::json::object();
  for (size_t i = 0; i < scrape_urls.size(); ++i) {
    auto text = yoco::HttpGet(scrape_urls[i]);
    if (!text.ok()) return Fail(std::string(text.status().message()));
    servers[scrape_urls[i]] = yoco::ChangedSeries(before[i], yoco::ParsePrometheusText(*text));
  }
  if (!scrape_urls.empty()) out["server_metrics_delta"] = servers;

  std::cout << out.dump(2) << "\n";
  if (!absl::GetFlag(FLAGS_json).empty()) {
    std::ofstream f(absl::GetFlag(FLAGS_json));
    f << out.dump(2) << "\n";
    if (!f) return Fail("cannot write " + absl::GetFlag(FLAGS_json));
  }
  if (!absl::GetFlag(FLAGS_jsonl).empty()) {
    std::ofstream f(absl::GetFlag(FLAGS_jsonl));
    for (const yoco::RequestRecord& r : records) f << r.ToJson().dump() << "\n";
    if (!f) return Fail("cannot write " + absl::GetFlag(FLAGS_jsonl));
  }
  if (!absl::GetFlag(FLAGS_plot).empty()) {
    const std::string title =
        std::string(yoco::WorkloadKindName(w.kind)) + ", " +
        (load.concurrency > 0 ? "concurrency " + std::to_string(load.concurrency)
         : replay             ? std::string("replay")
                              : "rate " + std::to_string(load.rate) + "/s");
    if (absl::Status st = yoco::WriteLatencyPlot(records, title, absl::GetFlag(FLAGS_plot));
        !st.ok()) {
      return Fail(std::string(st.message()));
    }
  }
  return summary.ok == summary.requests ? 0 : 3;
}
