// A pattern is parsed into a tree of code-point sets, sequences, alternatives and repeats, built
// into a Thompson NFA over code-point ranges, and determinised by subset construction over the
// classes of code points every range treats alike — with the code-point count (for length
// bounds) as part of each state — then trimmed of every state from which no accepting one can
// be reached.
#include "lib/grammar/regex.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "lib/grammar/regex_syntax.h"

namespace yoco {
namespace {

constexpr int kMaxNfaStates = 50000;  // beyond: the pattern is too large to compile quickly
constexpr size_t kMaxDfaMoves = size_t{1} << 20;  // states x classes: 4 MB at most

// A Thompson NFA: each state has epsilon moves and at most one move on a code-point range.
struct NfaState {
  std::vector<int32_t> epsilon;
  int32_t next = -1;
  uint32_t lo = 0;
  uint32_t hi = 0;
};

struct Fragment {
  int32_t in;
  int32_t out;  // no moves yet: the caller links it on
};

class NfaBuilder {
 public:
  std::vector<NfaState> states;
  bool too_large = false;

  int32_t New() {
    if (states.size() >= kMaxNfaStates) {
      too_large = true;
      return 0;  // the build goes on harmlessly; its result is refused
    }
    states.emplace_back();
    return static_cast<int32_t>(states.size()) - 1;
  }
  void Link(int32_t from, int32_t to) {
    if (!too_large) states[from].epsilon.push_back(to);
  }

  Fragment Build(const RegexNode& n) {
    if (too_large) return {0, 0};
    switch (n.kind) {
      case RegexNode::Kind::kSet:
        return Set(n.set);
      case RegexNode::Kind::kConcat: {
        const int32_t in = New();
        int32_t out = in;
        for (const RegexNode& child : n.children) {
          const Fragment f = Build(child);
          Link(out, f.in);
          out = f.out;
        }
        return {in, out};
      }
      case RegexNode::Kind::kAlt: {
        const int32_t in = New(), out = New();
        for (const RegexNode& child : n.children) {
          const Fragment f = Build(child);
          Link(in, f.in);
          Link(f.out, out);
        }
        return {in, out};
      }
      case RegexNode::Kind::kRepeat: {
        const RegexNode& child = n.children[0];
        const int32_t in = New();
        int32_t at = in;
        for (int i = 0; i < n.min; ++i) {
          const Fragment f = Build(child);
          Link(at, f.in);
          at = f.out;
        }
        if (n.max < 0) {
          const int32_t loop = New();
          const Fragment f = Build(child);
          Link(at, loop);
          Link(loop, f.in);
          Link(f.out, loop);
          return {in, loop};
        }
        const int32_t out = New();
        for (int i = n.min; i < n.max; ++i) {
          Link(at, out);  // this copy and the rest are optional
          const Fragment f = Build(child);
          Link(at, f.in);
          at = f.out;
        }
        Link(at, out);
        return {in, out};
      }
    }
    return {0, 0};
  }

 private:
  Fragment Set(const CodePointRanges& set) {
    const int32_t in = New(), out = New();
    for (const auto& [lo, hi] : set) {
      const int32_t at = New();
      if (too_large) break;
      Link(in, at);
      states[at].lo = lo;
      states[at].hi = hi;
      states[at].next = out;
    }
    return {in, out};
  }
};

}  // namespace

class RegexCompiler {
 public:
  RegexCompiler(const std::vector<NfaState>& nfa, int32_t accept, const RegexOptions& options)
      : nfa_(nfa), accept_(accept), options_(options) {}

  int64_t work() const { return work_; }

  absl::StatusOr<CharDfa> Run(int32_t start) {
    CharDfa dfa;
    Classes(&dfa);
    const int classes = dfa.classes_;
    std::vector<std::pair<std::vector<int32_t>, int64_t>> states;
    absl::flat_hash_map<std::pair<std::vector<int32_t>, int64_t>, int32_t> ids;
    auto id_of = [&](std::vector<int32_t> set, int64_t count) -> int32_t {
      auto key = std::make_pair(std::move(set), count);
      auto it = ids.find(key);
      if (it != ids.end()) return it->second;
      const int32_t id = static_cast<int32_t>(states.size());
      ids.emplace(key, id);
      states.push_back(std::move(key));
      return id;
    };
    id_of(Closure({start}), 0);
    std::vector<int32_t> moved;
    for (size_t s = 0; s < states.size(); ++s) {
      if (states.size() > static_cast<size_t>(options_.max_states) ||
          states.size() * classes > kMaxDfaMoves) {
        return absl::InvalidArgumentError(
            absl::StrCat("the pattern needs more than ", states.size() - 1,
                         " automaton states (with its length bounds, if any)"));
      }
      if (work_ > options_.max_work) {
        return absl::InvalidArgumentError("the pattern is too complex to compile");
      }
      const int64_t count = states[s].second;
      dfa.next_.resize((s + 1) * classes, CharDfa::kDead);
      for (int k = 0; k < classes; ++k) {
        const uint32_t cp = dfa.class_starts_[k];  // it stands for its class
        if ((cp < 128 && !options_.ascii[cp]) || (cp >= 0xd800 && cp <= 0xdfff)) continue;
        moved.clear();
        work_ += static_cast<int64_t>(states[s].first.size());
        for (int32_t n : states[s].first) {
          const NfaState& st = nfa_[n];
          if (st.next >= 0 && cp >= st.lo && cp <= st.hi) moved.push_back(st.next);
        }
        if (moved.empty()) continue;
        int64_t next_count = count + 1;
        if (options_.max_chars >= 0 && next_count > options_.max_chars) continue;
        if (options_.max_chars < 0) next_count = std::min(next_count, options_.min_chars);
        const int32_t to = id_of(Closure(moved), next_count);
        dfa.next_[s * classes + k] = to;
      }
    }
    const size_t n = states.size();
    dfa.accepting_.assign(n, 0);
    for (size_t s = 0; s < n; ++s) {
      const auto& set = states[s].first;
      dfa.accepting_[s] = std::binary_search(set.begin(), set.end(), accept_) &&
                          states[s].second >= options_.min_chars;
    }
    // Trim: keep only moves into states from which an accepting one can be reached.
    std::vector<std::vector<int32_t>> into(n);
    for (size_t s = 0; s < n; ++s) {
      for (int k = 0; k < classes; ++k) {
        const int32_t to = dfa.next_[s * classes + k];
        if (to != CharDfa::kDead) into[to].push_back(static_cast<int32_t>(s));
      }
    }
    std::vector<uint8_t> live(n, 0);
    std::vector<int32_t> work;
    for (size_t s = 0; s < n; ++s) {
      if (dfa.accepting_[s]) live[s] = 1, work.push_back(static_cast<int32_t>(s));
    }
    while (!work.empty()) {
      const int32_t s = work.back();
      work.pop_back();
      for (int32_t from : into[s]) {
        if (!live[from]) live[from] = 1, work.push_back(from);
      }
    }
    if (!live[0]) {
      return absl::InvalidArgumentError(options_.min_chars > 0 || options_.max_chars >= 0
                                            ? "no text matches the pattern within its length bounds"
                                            : "no text matches the pattern");
    }
    dfa.open_.assign(n, 0);
    dfa.live_.resize(n);
    for (size_t s = 0; s < n; ++s) {
      for (int k = 0; k < classes; ++k) {
        int32_t& to = dfa.next_[s * classes + k];
        if (to != CharDfa::kDead && !live[to]) to = CharDfa::kDead;
        if (to == CharDfa::kDead) continue;
        dfa.open_[s] = 1;
        const uint32_t lo = dfa.class_starts_[k];
        const uint32_t hi = k + 1 < classes ? dfa.class_starts_[k + 1] - 1 : kMaxCodePoint;
        auto& ranges = dfa.live_[s];
        if (!ranges.empty() && ranges.back().second + 1 == lo) {
          ranges.back().second = hi;
        } else {
          ranges.push_back({lo, hi});
        }
      }
    }
    return dfa;
  }

 private:
  // Code points that every move and the allowed ASCII treat alike share a class (surrogates one
  // of their own, never moved on): the table holds one column per class.
  void Classes(CharDfa* dfa) const {
    std::vector<uint32_t> starts = {0, 0xd800, 0xe000};
    for (const NfaState& st : nfa_) {
      if (st.next < 0) continue;
      starts.push_back(st.lo);
      if (st.hi < kMaxCodePoint) starts.push_back(st.hi + 1);
    }
    for (uint32_t c = 1; c < 128; ++c) {
      if (options_.ascii[c] != options_.ascii[c - 1]) starts.push_back(c);
    }
    starts.push_back(128);
    std::sort(starts.begin(), starts.end());
    starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
    dfa->class_starts_ = starts;
    dfa->classes_ = static_cast<int32_t>(starts.size());
    for (uint32_t c = 0; c < 128; ++c) {
      dfa->ascii_class_[c] = static_cast<uint8_t>(
          std::upper_bound(starts.begin(), starts.end(), c) - starts.begin() - 1);
    }
  }

  // The states reachable from `seeds` by epsilon moves that matter to the future: those with a
  // byte move, and the accepting one. Sorted.
  std::vector<int32_t> Closure(const std::vector<int32_t>& seeds) {
    ++epoch_;
    if (seen_.size() < nfa_.size()) seen_.resize(nfa_.size(), 0);
    std::vector<int32_t> stack = seeds, out;
    while (!stack.empty()) {
      const int32_t s = stack.back();
      stack.pop_back();
      if (seen_[s] == epoch_) continue;
      seen_[s] = epoch_;
      ++work_;
      if (nfa_[s].next >= 0 || s == accept_) out.push_back(s);
      for (int32_t e : nfa_[s].epsilon) {
        if (seen_[e] != epoch_) stack.push_back(e);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  const std::vector<NfaState>& nfa_;
  int32_t accept_;
  const RegexOptions& options_;
  std::vector<uint32_t> seen_;
  uint32_t epoch_ = 0;
  int64_t work_ = 0;
};

absl::StatusOr<CharDfa> CompileRegex(absl::string_view pattern, const RegexOptions& options) {
  absl::StatusOr<std::vector<RegexBranch>> branches = ParseRegex(pattern);
  if (!branches.ok()) return branches.status();
  NfaBuilder nfa;
  const int32_t start = nfa.New(), accept = nfa.New();
  RegexNode anything;  // what a search may skip before and after its match
  anything.kind = RegexNode::Kind::kRepeat;
  anything.children.push_back(RegexNode::Set({{0, kMaxCodePoint}}));
  for (const RegexBranch& b : *branches) {
    Fragment f = nfa.Build(b.node);
    if (options.search && !b.anchored_start) {
      const Fragment before = nfa.Build(anything);
      nfa.Link(before.out, f.in);
      f.in = before.in;
    }
    if (options.search && !b.anchored_end) {
      const Fragment after = nfa.Build(anything);
      nfa.Link(f.out, after.in);
      f.out = after.out;
    }
    nfa.Link(start, f.in);
    nfa.Link(f.out, accept);
  }
  if (nfa.too_large) {
    return absl::InvalidArgumentError(
        absl::StrCat("the pattern is too large (more than ", kMaxNfaStates, " automaton states)"));
  }
  RegexCompiler compiler(nfa.states, accept, options);
  absl::StatusOr<CharDfa> dfa = compiler.Run(start);
  if (options.work_used != nullptr) *options.work_used = compiler.work();
  return dfa;
}

}  // namespace yoco
