// DocQaTask: the document-QA task of models/yoco-docqa-tiny (docqa_task.json): word lists and
// sentence templates from which needle-in-a-haystack documents, their questions and answers
// are drawn. The same file drove the training data (tools/train/docqa_data.py); this side draws
// its own documents with its own seeds, so the evaluation is never a training example.
#ifndef YOCO_TOOLS_YOCO_EVAL_DOCQA_TASK_H_
#define YOCO_TOOLS_YOCO_EVAL_DOCQA_TASK_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/random/split_mix64.h"

namespace yoco {

// One fact: "the `relation` of `name` is `value`" (relations: code, city, job, age).
struct DocQaFact {
  std::string relation, name, value;
};

class DocQaTask {
 public:
  // INVALID_ARGUMENT naming what is wrong with the file (a missing list, an empty one, a
  // template without its placeholder).
  static absl::StatusOr<DocQaTask> Load(const std::string& path);
  // The same from the file's text; `source` names it in errors.
  static absl::StatusOr<DocQaTask> Parse(const std::string& text, const std::string& source);
  // The task yoco-docqa-tiny was trained on (built into the binary).
  static DocQaTask Default();

  // A fact about a random person, for a random relation.
  DocQaFact RandomFact(SplitMix64& rng) const;
  // A document of at most `length` bytes (sentences joined by spaces): facts about other people
  // and filler sentences, with `needle` stated once at `depth` (0: first sentence, 1: last).
  // No other sentence states the needle's relation for its name. With `facts`, every fact the
  // document states (the needle's among them) is added there: each is asked about unambiguously.
  std::string Document(SplitMix64& rng, int length, const DocQaFact& needle, double depth,
                       std::vector<DocQaFact>* facts = nullptr) const;
  // "\nQ: <question>\nA:": what follows the document in a prompt.
  std::string Question(const DocQaFact& fact) const;

 private:
  struct Relation {
    std::vector<std::string> facts;  // templates with {name} and {value}
    std::string question;            // template with {name}
  };
  std::string Value(SplitMix64& rng, const std::string& relation) const;
  std::string Filler(SplitMix64& rng) const;
  std::string Fact(SplitMix64& rng, const DocQaFact& fact) const;
  const std::string& Pick(SplitMix64& rng, const std::vector<std::string>& list) const {
    return list[rng.Below(list.size())];
  }

  std::vector<std::string> first_names_, last_names_;
  std::map<std::string, std::vector<std::string>> words_;  // cities, jobs, filler word lists
  std::vector<std::string> filler_;
  std::map<std::string, Relation> relations_;
  std::vector<std::string> relation_names_;  // sorted
  std::string question_format_;
};

}  // namespace yoco

#endif  // YOCO_TOOLS_YOCO_EVAL_DOCQA_TASK_H_
