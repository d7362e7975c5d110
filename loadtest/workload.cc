// Seeded workload generators.
#include "loadtest/workload.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "lib/model/strict_json.h"

namespace yoco {
namespace {

constexpr int32_t kFirstOrdinaryId = 4;  // 0..3 are BOS, PAD, EOS, UNK

std::vector<int32_t> RandomTokens(SplitMix64& rng, int n, int32_t vocab_size) {
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (int32_t& id : out) {
    id = kFirstOrdinaryId + static_cast<int32_t>(rng.Below(vocab_size - kFirstOrdinaryId));
  }
  return out;
}

// Streams of one run that must not overlap: documents, the shared prefix, and each request.
uint64_t StreamSeed(uint64_t seed, uint64_t stream, uint64_t index) {
  SplitMix64 mix(seed ^ (stream * 0x9E3779B97F4A7C15ull));
  mix.Next();
  return mix.Next() ^ (index * 0xD1B54A32D192ED03ull);
}

}  // namespace

absl::StatusOr<WorkloadKind> ParseWorkloadKind(const std::string& name) {
  if (name == "rag") return WorkloadKind::kRag;
  if (name == "shared-prefix") return WorkloadKind::kSharedPrefix;
  if (name == "random") return WorkloadKind::kRandom;
  if (name == "chat") return WorkloadKind::kChat;
  if (name == "replay") return WorkloadKind::kReplay;
  return absl::InvalidArgumentError(
      absl::StrCat("--workload: \"", name, "\" is not rag, shared-prefix, chat, random or replay"));
}

const char* WorkloadKindName(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kRag:
      return "rag";
    case WorkloadKind::kSharedPrefix:
      return "shared-prefix";
    case WorkloadKind::kRandom:
      return "random";
    case WorkloadKind::kChat:
      return "chat";
    case WorkloadKind::kReplay:
      return "replay";
  }
  return "?";
}

absl::StatusOr<Workload> Workload::Make(const WorkloadOptions& options) {
  auto bad = [](const char* option, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("--", option, ": ", why));
  };
  if (options.vocab_size <= kFirstOrdinaryId) return bad("vocab", "too small");
  if (options.output_tokens < 1) return bad("output-tokens", "must be at least 1");
  Workload w(options);
  switch (options.kind) {
    case WorkloadKind::kRag: {
      if (options.documents < 1) return bad("documents", "must be at least 1");
      if (options.document_tokens < 1) return bad("document-tokens", "must be at least 1");
      if (options.question_tokens < 1) return bad("question-tokens", "must be at least 1");
      if (!(options.zipf_exponent >= 0)) return bad("zipf", "must be >= 0");
      if (!(options.unseen_fraction >= 0 && options.unseen_fraction <= 1)) {
        return bad("unseen-fraction", "must be in [0, 1]");
      }
      double total = 0;
      for (int k = 0; k < options.documents; ++k) {
        SplitMix64 rng(StreamSeed(options.seed, 1, static_cast<uint64_t>(k)));
        std::vector<int32_t> doc = {0};
        std::vector<int32_t> body =
            RandomTokens(rng, options.document_tokens - 1, options.vocab_size);
        doc.insert(doc.end(), body.begin(), body.end());
        w.documents_.push_back(std::move(doc));
        total += 1.0 / std::pow(k + 1.0, options.zipf_exponent);
        w.popularity_cdf_.push_back(total);
      }
      for (double& c : w.popularity_cdf_) c /= total;
      break;
    }
    case WorkloadKind::kSharedPrefix: {
      if (options.prefix_tokens < 1) return bad("prefix-tokens", "must be at least 1");
      if (options.suffix_tokens < 1) return bad("suffix-tokens", "must be at least 1");
      SplitMix64 rng(StreamSeed(options.seed, 2, 0));
      w.shared_prefix_ = {0};
      std::vector<int32_t> body = RandomTokens(rng, options.prefix_tokens - 1, options.vocab_size);
      w.shared_prefix_.insert(w.shared_prefix_.end(), body.begin(), body.end());
      break;
    }
    case WorkloadKind::kRandom:
      if (options.input_tokens < 1) return bad("input-tokens", "must be at least 1");
      if (options.input_spread < 0 || options.input_spread >= options.input_tokens) {
        return bad("input-spread", "must be in [0, input-tokens)");
      }
      break;
    case WorkloadKind::kChat: {
      if (options.turns < 1) return bad("turns", "must be at least 1");
      if (options.system_tokens < 1) return bad("system-tokens", "must be at least 1");
      if (options.user_tokens < 1) return bad("user-tokens", "must be at least 1");
      SplitMix64 rng(StreamSeed(options.seed, 4, 0));
      w.shared_prefix_ = {0};
      std::vector<int32_t> body = RandomTokens(rng, options.system_tokens - 1, options.vocab_size);
      w.shared_prefix_.insert(w.shared_prefix_.end(), body.begin(), body.end());
      break;
    }
    case WorkloadKind::kReplay: {
      absl::StatusOr<std::vector<Replayed>> replay = ReadReplay(options);
      if (!replay.ok()) return replay.status();
      w.replay_ = *std::move(replay);
      break;
    }
  }
  return w;
}

PlannedRequest Workload::Request(uint64_t index) const {
  SplitMix64 rng(StreamSeed(options_.seed, 3, index));
  PlannedRequest r;
  r.max_tokens = static_cast<uint32_t>(options_.output_tokens);
  switch (options_.kind) {
    case WorkloadKind::kRag: {
      if (rng.Uniform() < options_.unseen_fraction) {
        // A document nobody asked about before: its own random tokens.
        r.prompt = {0};
        std::vector<int32_t> doc =
            RandomTokens(rng, options_.document_tokens - 1, options_.vocab_size);
        r.prompt.insert(r.prompt.end(), doc.begin(), doc.end());
      } else {
        const double u = rng.Uniform();
        r.document =
            static_cast<int>(std::upper_bound(popularity_cdf_.begin(), popularity_cdf_.end(), u) -
                             popularity_cdf_.begin());
        r.document = std::min(r.document, options_.documents - 1);
        r.prompt = documents_[static_cast<size_t>(r.document)];
      }
      std::vector<int32_t> question =
          RandomTokens(rng, options_.question_tokens, options_.vocab_size);
      r.prompt.insert(r.prompt.end(), question.begin(), question.end());
      break;
    }
    case WorkloadKind::kSharedPrefix: {
      r.prompt = shared_prefix_;
      std::vector<int32_t> suffix = RandomTokens(rng, options_.suffix_tokens, options_.vocab_size);
      r.prompt.insert(r.prompt.end(), suffix.begin(), suffix.end());
      break;
    }
    case WorkloadKind::kChat: {
      r.prompt = shared_prefix_;
      std::vector<int32_t> user = RandomTokens(rng, options_.user_tokens, options_.vocab_size);
      r.prompt.insert(r.prompt.end(), user.begin(), user.end());
      break;
    }
    case WorkloadKind::kReplay:
      return replay_[index % replay_.size()].request;
    case WorkloadKind::kRandom: {
      const int length = options_.input_tokens - options_.input_spread +
                         static_cast<int>(rng.Below(2 * options_.input_spread + 1));
      r.prompt = {0};
      std::vector<int32_t> body = RandomTokens(rng, length - 1, options_.vocab_size);
      r.prompt.insert(r.prompt.end(), body.begin(), body.end());
      break;
    }
  }
  return r;
}

PlannedRequest Workload::NextTurn(const std::vector<int32_t>& previous,
                                  const std::vector<int32_t>& answer, uint64_t index) const {
  SplitMix64 rng(StreamSeed(options_.seed, 3, index));
  PlannedRequest r;
  r.max_tokens = static_cast<uint32_t>(options_.output_tokens);
  r.prompt = previous;
  r.prompt.insert(r.prompt.end(), answer.begin(), answer.end());
  std::vector<int32_t> user = RandomTokens(rng, options_.user_tokens, options_.vocab_size);
  r.prompt.insert(r.prompt.end(), user.begin(), user.end());
  return r;
}

absl::StatusOr<std::vector<Workload::Replayed>> Workload::ReadReplay(
    const WorkloadOptions& options) {
  auto bad = [&](size_t line, const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--replay ", options.replay_path, " line ", line, ": ", why));
  };
  std::ifstream in(options.replay_path);
  if (!in) return absl::NotFoundError(absl::StrCat("--replay: cannot read ", options.replay_path));
  std::vector<Replayed> out;
  std::string text;
  for (size_t line = 1; std::getline(in, text); ++line) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    absl::StatusOr<nlohmann::json> parsed = ParseStrictJson(text, JsonLimits{});
    if (!parsed.ok()) return bad(line, std::string(parsed.status().message()));
    const nlohmann::json& j = *parsed;
    if (!j.is_object()) return bad(line, "not a JSON object");
    Replayed r;
    const nlohmann::json at = j.value("timestamp_ms", nlohmann::json(0));
    if (!at.is_number() || at.get<double>() < 0) return bad(line, "timestamp_ms must be >= 0");
    r.at_s = at.get<double>() / 1000;
    const nlohmann::json max_tokens = j.value("max_tokens", nlohmann::json(options.output_tokens));
    if (!max_tokens.is_number_integer() || max_tokens.get<int64_t>() < 1 ||
        max_tokens.get<int64_t>() > (1 << 20)) {
      return bad(line, "max_tokens must be an integer in [1, 1048576]");
    }
    r.request.max_tokens = static_cast<uint32_t>(max_tokens.get<int64_t>());
    if (j.contains("prompt_tokens") == j.contains("prompt")) {
      return bad(line, "give prompt_tokens (ids) or prompt (text)");
    }
    if (j.contains("prompt")) {
      if (!j["prompt"].is_string() || j["prompt"].get<std::string>().empty()) {
        return bad(line, "prompt must be a non-empty string");
      }
      r.request.text = j["prompt"].get<std::string>();
    } else {
      if (!j["prompt_tokens"].is_array() || j["prompt_tokens"].empty()) {
        return bad(line, "prompt_tokens must be a non-empty array of ids");
      }
      for (const nlohmann::json& id : j["prompt_tokens"]) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
            id.get<int64_t>() >= options.vocab_size) {
          return bad(line, "prompt_tokens: ids must be in the vocabulary");
        }
        r.request.prompt.push_back(static_cast<int32_t>(id.get<int64_t>()));
      }
    }
    out.push_back(std::move(r));
  }
  if (out.empty()) return bad(0, "no requests");
  std::stable_sort(out.begin(), out.end(),
                   [](const Replayed& a, const Replayed& b) { return a.at_s < b.at_s; });
  return out;
}

}  // namespace yoco
