// Drawing needle-in-a-haystack documents from the task's templates.
#include "tools/yoco_eval/docqa_task.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "lib/files/bounded_file.h"
#include "lib/model/strict_json.h"
#include "nlohmann/json.hpp"
#include "tools/yoco_eval/default_task.h"

namespace yoco {
namespace {

constexpr size_t kMaxTaskFileBytes = 1 << 20;
// Word lists the filler templates may name, as {key}.
const char* const kFillerWords[] = {"cities", "weather", "activity", "day", "adjective"};

absl::StatusOr<std::vector<std::string>> StringList(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || !j.at(key).is_array() || j.at(key).empty()) {
    return absl::InvalidArgumentError(absl::StrCat("'", key, "' must be a non-empty list"));
  }
  std::vector<std::string> out;
  for (const nlohmann::json& s : j.at(key)) {
    if (!s.is_string() || s.get<std::string>().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("'", key, "' must hold non-empty strings"));
    }
    out.push_back(s.get<std::string>());
  }
  return out;
}

absl::StatusOr<std::string> String(const nlohmann::json& j, const char* key,
                                   const char* placeholder) {
  if (!j.contains(key) || !j.at(key).is_string()) {
    return absl::InvalidArgumentError(absl::StrCat("'", key, "' must be a string"));
  }
  std::string s = j.at(key).get<std::string>();
  if (s.find(placeholder) == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("'", key, "' lacks ", placeholder));
  }
  return s;
}

}  // namespace

absl::StatusOr<DocQaTask> DocQaTask::Load(const std::string& path) {
  auto text = ReadBoundedFile(path, kMaxTaskFileBytes);
  if (!text.ok()) return text.status();
  return Parse(*text, path);
}

DocQaTask DocQaTask::Default() {
  auto task = Parse(kDefaultDocQaTask, "the built-in task");
  // The build embeds a file the tests parse; a broken one never reaches a binary.
  if (!task.ok()) std::abort();
  return *std::move(task);
}

absl::StatusOr<DocQaTask> DocQaTask::Parse(const std::string& text, const std::string& source) {
  auto parsed = ParseStrictJson(text, JsonLimits{});
  auto fail = [&](const absl::Status& s) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", s.message()));
  };
  if (!parsed.ok()) return fail(parsed.status());
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) return fail(absl::InvalidArgumentError("must be a JSON object"));
  DocQaTask t;
  for (auto [key, list] :
       {std::pair{"first_names", &t.first_names_}, std::pair{"last_names", &t.last_names_},
        std::pair{"filler", &t.filler_}}) {
    auto l = StringList(j, key);
    if (!l.ok()) return fail(l.status());
    *list = *std::move(l);
  }
  for (const char* key : kFillerWords) {
    auto l = StringList(j, key);
    if (!l.ok()) return fail(l.status());
    t.words_[key] = *std::move(l);
  }
  for (const char* key : {"jobs"}) {
    auto l = StringList(j, key);
    if (!l.ok()) return fail(l.status());
    t.words_[key] = *std::move(l);
  }
  auto question = String(j, "question_format", "{question}");
  if (!question.ok()) return fail(question.status());
  t.question_format_ = *std::move(question);
  if (!j.contains("relations") || !j.at("relations").is_object()) {
    return fail(absl::InvalidArgumentError("'relations' must be an object"));
  }
  for (const char* name : {"age", "city", "code", "job"}) {
    if (!j.at("relations").contains(name)) {
      return fail(absl::InvalidArgumentError(absl::StrCat("'relations' lacks '", name, "'")));
    }
    const nlohmann::json& r = j.at("relations").at(name);
    Relation rel;
    auto facts = StringList(r, "facts");
    if (!facts.ok()) return fail(facts.status());
    for (const std::string& f : *facts) {
      if (f.find("{name}") == std::string::npos || f.find("{value}") == std::string::npos) {
        return fail(absl::InvalidArgumentError(
            absl::StrCat("relation '", name, "': a fact lacks {name} or {value}: ", f)));
      }
    }
    rel.facts = *std::move(facts);
    auto q = String(r, "question", "{name}");
    if (!q.ok()) return fail(q.status());
    rel.question = *std::move(q);
    t.relations_[name] = std::move(rel);
    t.relation_names_.push_back(name);
  }
  return t;
}

std::string DocQaTask::Value(SplitMix64& rng, const std::string& relation) const {
  if (relation == "code") return absl::StrCat(1000 + rng.Below(9000));
  if (relation == "age") return absl::StrCat(18 + rng.Below(72));
  return Pick(rng, words_.at(relation == "city" ? "cities" : "jobs"));
}

DocQaFact DocQaTask::RandomFact(SplitMix64& rng) const {
  DocQaFact f;
  f.relation = Pick(rng, relation_names_);
  f.name = absl::StrCat(Pick(rng, first_names_), " ", Pick(rng, last_names_));
  f.value = Value(rng, f.relation);
  return f;
}

std::string DocQaTask::Filler(SplitMix64& rng) const {
  std::string s = Pick(rng, filler_);
  // Each placeholder is filled by its own draw, in a fixed order.
  for (const char* key : kFillerWords) {
    const std::string placeholder =
        absl::StrCat("{", std::string(key) == "cities" ? "city" : key, "}");
    const size_t at = s.find(placeholder);
    if (at != std::string::npos) s.replace(at, placeholder.size(), Pick(rng, words_.at(key)));
  }
  return s;
}

std::string DocQaTask::Fact(SplitMix64& rng, const DocQaFact& fact) const {
  return absl::StrReplaceAll(Pick(rng, relations_.at(fact.relation).facts),
                             {{"{name}", fact.name}, {"{value}", fact.value}});
}

std::string DocQaTask::Document(SplitMix64& rng, int length, const DocQaFact& needle, double depth,
                                std::vector<DocQaFact>* facts) const {
  const std::string needle_text = Fact(rng, needle);
  const int budget = length - static_cast<int>(needle_text.size()) - 1;
  std::set<std::pair<std::string, std::string>> stated = {{needle.relation, needle.name}};
  std::vector<std::string> sentences;
  int used = 0;
  std::string person;
  std::optional<DocQaFact> drawn;  // the fact the sentence states, if any
  for (;;) {
    std::string s;
    if (rng.Uniform() < 0.6) {
      // A few facts per person, so a question must pick the right relation as well.
      if (person.empty() || rng.Uniform() < 0.5) {
        person = absl::StrCat(Pick(rng, first_names_), " ", Pick(rng, last_names_));
      }
      DocQaFact f{Pick(rng, relation_names_), person, ""};
      if (!stated.insert({f.relation, f.name}).second) continue;
      f.value = Value(rng, f.relation);
      s = Fact(rng, f);
      drawn = std::move(f);
    } else {
      s = Filler(rng);
      drawn.reset();
    }
    const int extra = static_cast<int>(s.size()) + (sentences.empty() ? 0 : 1);
    if (used + extra > budget) break;
    if (drawn.has_value() && facts != nullptr) facts->push_back(*drawn);
    sentences.push_back(std::move(s));
    used += extra;
  }
  const size_t at =
      std::min(sentences.size(),
               static_cast<size_t>(std::lround(depth * static_cast<double>(sentences.size()))));
  sentences.insert(sentences.begin() + static_cast<std::ptrdiff_t>(at), needle_text);
  if (facts != nullptr) facts->push_back(needle);
  std::string out;
  for (const std::string& s : sentences) absl::StrAppend(&out, out.empty() ? "" : " ", s);
  return out;
}

std::string DocQaTask::Question(const DocQaFact& fact) const {
  const std::string q =
      absl::StrReplaceAll(relations_.at(fact.relation).question, {{"{name}", fact.name}});
  return absl::StrReplaceAll(question_format_, {{"{question}", q}});
}

}  // namespace yoco
