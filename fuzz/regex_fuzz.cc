// The regex compiler (routers compile what clients send) and the automaton it makes: any pattern
// gives an automaton or INVALID_ARGUMENT, quickly, never a crash. The input is a pattern, then
// (after the first NUL) bytes to feed; whatever the automaton takes leaves it able to finish.
#include <cstddef>
#include <cstdint>
#include <string>

#include "lib/grammar/regex.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t cut = input.find('\0');
  yoco::RegexOptions options;
  options.search = size % 2 == 1;
  if (size % 3 == 0) options.max_chars = static_cast<int64_t>(size % 17);
  absl::StatusOr<yoco::CharDfa> dfa = yoco::CompileRegex(input.substr(0, cut), options);
  if (!dfa.ok()) {
    if (dfa.status().code() != absl::StatusCode::kInvalidArgument) __builtin_trap();
    return 0;
  }
  if (cut == std::string::npos) return 0;
  yoco::CharDfa::Cursor at = dfa->Start();
  for (size_t i = cut + 1; i < input.size(); ++i) {
    dfa->Step(&at, static_cast<uint8_t>(input[i]));
    if (!dfa->Accepting(at) && !dfa->Open(at)) __builtin_trap();  // a dead end
  }
  return 0;
}
