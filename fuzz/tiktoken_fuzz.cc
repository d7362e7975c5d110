// The tiktoken-compatible BPE (the tokenizer of real checkpoints) on any text: encoding never
// crashes; valid UTF-8 always encodes, and decodes back to the same bytes (special tokens
// included, since the reference encodes them wherever they appear; <|endofprompt|> shares its
// id with <jupyter_code> and decodes as the latter, as in tiktoken); invalid UTF-8 is refused.
// Decoding the input read as ids never crashes either. The ranks: every single byte plus merges
// of common English and multi-byte pieces, so merging is exercised.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "lib/text/tiktoken_bpe.h"
#include "lib/text/utf8_stream.h"

namespace {

const yoco::TiktokenBpe& Bpe() {
  static const std::unique_ptr<yoco::TiktokenBpe> bpe = [] {
    std::string ranks;
    int rank = 0;
    for (int b = 0; b < 256; ++b) {
      absl::StrAppend(&ranks, absl::Base64Escape(std::string(1, static_cast<char>(b))), " ", rank++,
                      "\n");
    }
    for (const char* merge :
         {"th",   "he",   "in", "er",  "an",       " t",       "the",          " the",
          "ing",  "on",   " a", "re",  "\xc3\xa9", "\xe2\x82", "\xe2\x82\xac", "  ",
          "    ", "\n\n", "12", "123", "<|",       "|>"}) {
      absl::StrAppend(&ranks, absl::Base64Escape(merge), " ", rank++, "\n");
    }
    auto made =
        yoco::TiktokenBpe::FromRanks(ranks, yoco::kCl100kPattern, yoco::YocoSpecialTokens());
    if (!made.ok()) __builtin_trap();
    return std::move(*made);
  }();
  return *bpe;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const bool valid = yoco::ToValidUtf8(text) == text;
  auto ids = Bpe().Encode(text);
  if (valid != ids.ok()) __builtin_trap();
  if (ids.ok()) {
    auto back = Bpe().Decode(*ids);
    const std::string want = absl::StrReplaceAll(text, {{"<|endofprompt|>", "<jupyter_code>"}});
    if (!back.ok() || *back != want) __builtin_trap();
  }
  std::vector<int32_t> raw(size / 4);
  if (!raw.empty()) std::memcpy(raw.data(), data, raw.size() * 4);
  Bpe().Decode(raw).IgnoreError();
  return 0;
}
