// tiktoken-compatible BPE. The merge loop follows tiktoken's: repeatedly join the adjacent pair
// whose joined bytes have the lowest rank (leftmost on ties) until no joined pair is a token.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "lib/text/tiktoken_bpe.h"

#include <pcre2.h>

#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace yoco {

const char kCl100kPattern[] =
    R"(('s|'S|'t|'T|'re|'rE|'Re|'RE|'ve|'vE|'Ve|'VE|'m|'M|'ll|'lL|'Ll|'LL|'d|'D)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::vector<std::pair<std::string, int32_t>> YocoSpecialTokens() {
  std::vector<std::pair<std::string, int32_t>> t = {{"<|endoftext|>", 100257},
                                                    {"<|fim_prefix|>", 100258},
                                                    {"<|fim_middle|>", 100259},
                                                    {"<|fim_suffix|>", 100260},
                                                    {"<|endofprompt|>", 100276}};
  const char* starcoder[] = {
      "<fim_prefix>",    "<fim_middle>",   "<fim_suffix>",   "<fim_pad>",        "<reponame>",
      "<filename>",      "<gh_stars>",     "<issue_start>",  "<issue_comment>",  "<issue_closed>",
      "<jupyter_start>", "<jupyter_text>", "<jupyter_code>", "<jupyter_output>", "<empty_output>",
      "<commit_before>", "<commit_msg>",   "<commit_after>"};
  for (int i = 0; i < 18; ++i) t.push_back({starcoder[i], 100264 + i});
  return t;
}

struct TiktokenBpe::Pattern {
  pcre2_code* code = nullptr;
  ~Pattern() {
    if (code) pcre2_code_free(code);
  }
};

TiktokenBpe::~TiktokenBpe() = default;

absl::StatusOr<std::unique_ptr<TiktokenBpe>> TiktokenBpe::Load(
    const std::string& ranks_path, const std::string& pattern,
    const std::vector<std::pair<std::string, int32_t>>& special_tokens) {
  std::ifstream in(ranks_path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", ranks_path));
  std::stringstream ss;
  ss << in.rdbuf();
  auto bpe = FromRanks(ss.str(), pattern, special_tokens);
  if (!bpe.ok())
    return absl::Status(bpe.status().code(),
                        absl::StrCat(ranks_path, ": ", bpe.status().message()));
  return bpe;
}

absl::StatusOr<std::unique_ptr<TiktokenBpe>> TiktokenBpe::FromRanks(
    absl::string_view ranks_text, const std::string& pattern,
    const std::vector<std::pair<std::string, int32_t>>& special_tokens) {
  std::unique_ptr<TiktokenBpe> bpe(new TiktokenBpe());
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(ranks_text, '\n')) {
    ++line_number;
    if (line.empty()) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    std::string bytes;
    int32_t rank = 0;
    if (fields.size() != 2 || !absl::Base64Unescape(fields[0], &bytes) || bytes.empty() ||
        !absl::SimpleAtoi(fields[1], &rank) || rank < 0 || rank > (1 << 24)) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_number, " is not 'base64 rank'"));
    }
    if (static_cast<size_t>(rank) >= bpe->tokens_.size()) bpe->tokens_.resize(rank + 1);
    bpe->tokens_[rank] = bytes;
    bpe->ranks_[bytes] = rank;
  }
  if (bpe->ranks_.empty()) return absl::InvalidArgumentError("no ranks");
  int32_t limit = static_cast<int32_t>(bpe->tokens_.size());
  for (const auto& [text, id] : special_tokens) {
    bpe->special_[text] = id;
    bpe->special_by_id_[id] = text;  // later entries win, as in tiktoken's inverted map
    limit = std::max(limit, id + 1);
  }
  bpe->id_limit_ = limit + kTokenizerIdOffset;

  int error = 0;
  PCRE2_SIZE offset = 0;
  bpe->pattern_ = std::make_unique<Pattern>();
  bpe->pattern_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                      PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (bpe->pattern_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    return absl::InvalidArgumentError(
        absl::StrCat("bad pattern at ", offset, ": ", reinterpret_cast<const char*>(message)));
  }
  return bpe;
}

void TiktokenBpe::EncodePiece(absl::string_view piece, std::vector<int32_t>* out) const {
  if (auto it = ranks_.find(std::string(piece)); it != ranks_.end()) {
    out->push_back(it->second);
    return;
  }
  constexpr int32_t kNone = std::numeric_limits<int32_t>::max();
  // starts[i]: where part i begins; pair_rank[i]: rank of parts i and i+1 joined.
  std::vector<size_t> starts(piece.size() + 1);
  for (size_t i = 0; i <= piece.size(); ++i) starts[i] = i;
  auto rank_of = [&](size_t i) -> int32_t {  // parts i and i+1 joined; needs i + 2 < size
    if (i + 2 >= starts.size()) return kNone;
    auto it = ranks_.find(std::string(piece.substr(starts[i], starts[i + 2] - starts[i])));
    return it == ranks_.end() ? kNone : it->second;
  };
  std::vector<int32_t> pair_rank(starts.size());
  for (size_t i = 0; i < starts.size(); ++i) pair_rank[i] = rank_of(i);
  while (starts.size() > 2) {
    size_t best = 0;
    for (size_t i = 1; i + 2 < starts.size(); ++i) {
      if (pair_rank[i] < pair_rank[best]) best = i;
    }
    if (pair_rank[best] == kNone) break;
    starts.erase(starts.begin() + best + 1);
    pair_rank.erase(pair_rank.begin() + best + 1);
    pair_rank[best] = rank_of(best);
    if (best > 0) pair_rank[best - 1] = rank_of(best - 1);
  }
  for (size_t i = 0; i + 1 < starts.size(); ++i) {
    // Every single byte is a token in a complete ranks file; a byte that is not (a partial
    // file) has no encoding, which the caller's id check then reports.
    auto it = ranks_.find(std::string(piece.substr(starts[i], starts[i + 1] - starts[i])));
    out->push_back(it == ranks_.end() ? -1 - kTokenizerIdOffset : it->second);
  }
}

absl::StatusOr<std::vector<int32_t>> TiktokenBpe::Encode(absl::string_view text) const {
  std::vector<int32_t> ids;
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(pattern_->code, nullptr);
  auto encode_ordinary = [&](absl::string_view segment) -> absl::Status {
    size_t pos = 0;
    while (pos < segment.size()) {
      const int rc = pcre2_match(pattern_->code, reinterpret_cast<PCRE2_SPTR>(segment.data()),
                                 segment.size(), pos, 0, match, nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) return absl::InvalidArgumentError("text is not valid UTF-8");
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
      if (ov[1] == ov[0]) {  // an empty match: step over one character
        pos = ov[1] + 1;
        while (pos < segment.size() && (static_cast<unsigned char>(segment[pos]) & 0xC0) == 0x80)
          ++pos;
        continue;
      }
      EncodePiece(segment.substr(ov[0], ov[1] - ov[0]), &ids);
      pos = ov[1];
    }
    return absl::OkStatus();
  };
  absl::Status status;
  size_t pos = 0;
  while (status.ok() && pos <= text.size()) {
    // The leftmost special token (longest on a tie) splits the text.
    size_t best = absl::string_view::npos;
    const std::pair<const std::string, int32_t>* best_token = nullptr;
    for (const auto& entry : special_) {
      const size_t at = text.find(entry.first, pos);
      if (at != absl::string_view::npos &&
          (at < best || (at == best && entry.first.size() > best_token->first.size()))) {
        best = at;
        best_token = &entry;
      }
    }
    if (best_token == nullptr) {
      status = encode_ordinary(text.substr(pos));
      break;
    }
    status = encode_ordinary(text.substr(pos, best - pos));
    ids.push_back(best_token->second);
    pos = best + best_token->first.size();
  }
  pcre2_match_data_free(match);
  if (!status.ok()) return status;
  for (int32_t& id : ids) {
    if (id < 0) return absl::InvalidArgumentError("text has bytes the ranks file cannot encode");
    id += kTokenizerIdOffset;
  }
  return ids;
}

absl::StatusOr<std::string> TiktokenBpe::Decode(absl::Span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id >= 0 && id < kTokenizerIdOffset) continue;
    if (id < 0) {  // (and id - kTokenizerIdOffset could overflow)
      return absl::InvalidArgumentError(absl::StrCat("token id ", id, " is not in the vocabulary"));
    }
    const int32_t t = id - kTokenizerIdOffset;
    if (auto it = special_by_id_.find(t); it != special_by_id_.end()) {
      out += it->second;
    } else if (t >= 0 && static_cast<size_t>(t) < tokens_.size() && !tokens_[t].empty()) {
      out += tokens_[t];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("token id ", id, " is not in the vocabulary"));
    }
  }
  return out;
}

}  // namespace yoco
