// TiktokenBpe: byte-pair encoding compatible with tiktoken (the tokenizer of real YOCO
// checkpoints): a ranks file in tiktoken's format (one "base64-token rank" per line), a
// pre-tokenisation pattern (PCRE2, Unicode classes), and special tokens matched anywhere in the
// text (the reference encodes with allowed_special="all"). Model ids are tiktoken ids + 4.
#ifndef YOCO_LIB_TEXT_TIKTOKEN_BPE_H_
#define YOCO_LIB_TEXT_TIKTOKEN_BPE_H_

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "lib/text/tokenizer.h"

namespace yoco {

// cl100k_base's pre-tokenisation pattern, with the contractions' case variants spelled out
// (as js-tiktoken has it) rather than (?i:...), which PCRE2 would also let match 'ſ' (U+017F).
extern const char kCl100kPattern[];

// The reference's "cl100k_im" special tokens: cl100k's own plus StarCoder-style ones
// (<jupyter_code> shares id 100276 with <|endofprompt|>; decoding 100276 gives <jupyter_code>,
// the later entry, as tiktoken's inverted map does).
std::vector<std::pair<std::string, int32_t>> YocoSpecialTokens();

class TiktokenBpe : public Tokenizer {
 public:
  // Reads a .tiktoken ranks file. Malformed lines are INVALID_ARGUMENT naming the line.
  static absl::StatusOr<std::unique_ptr<TiktokenBpe>> Load(
      const std::string& ranks_path, const std::string& pattern,
      const std::vector<std::pair<std::string, int32_t>>& special_tokens);
  // The same from the file's text.
  static absl::StatusOr<std::unique_ptr<TiktokenBpe>> FromRanks(
      absl::string_view ranks_text, const std::string& pattern,
      const std::vector<std::pair<std::string, int32_t>>& special_tokens);

  ~TiktokenBpe() override;

  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text) const override;
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const override;
  int32_t id_limit() const override { return id_limit_; }

  // Tiktoken ids (no shift) of one pre-tokenised piece.
  void EncodePiece(absl::string_view piece, std::vector<int32_t>* out) const;

 private:
  struct Pattern;
  TiktokenBpe() = default;

  std::unordered_map<std::string, int32_t> ranks_;  // token bytes -> rank
  std::vector<std::string> tokens_;                 // rank -> bytes
  std::map<std::string, int32_t> special_;          // text -> tiktoken id
  std::unordered_map<int32_t, std::string> special_by_id_;
  std::unique_ptr<Pattern> pattern_;
  int32_t id_limit_ = 0;
};

}  // namespace yoco

#endif  // YOCO_LIB_TEXT_TIKTOKEN_BPE_H_
