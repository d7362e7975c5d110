// Log-softmax at a few ids. The top ids are kept in a small sorted array while the logits are
// scanned once: top_n is at most 20 and most logits fall below the array's last at one compare.
#include "lib/engine/logprobs.h"

#include <algorithm>
#include <cmath>

namespace yoco {

TokenLogprobs LogprobsOf(absl::Span<const float> logits, int32_t token, int top_n) {
  const int32_t n = static_cast<int32_t>(logits.size());
  double max_logit = -INFINITY;
  for (float x : logits) max_logit = std::max(max_logit, static_cast<double>(x));
  double total = 0.0;
  for (float x : logits) total += std::exp(static_cast<double>(x) - max_logit);
  const double log_z = max_logit + std::log(total);
  auto logprob = [&](int32_t id) {
    return static_cast<float>(static_cast<double>(logits[id]) - log_z);
  };

  TokenLogprobs out;
  out.chosen = {token, logprob(token)};
  const size_t keep = static_cast<size_t>(std::min(std::max(top_n, 0), n));
  if (keep == 0) return out;
  // Ranked by (logit desc, id asc): ids arrive ascending, so a later id enters only above a
  // strictly smaller logit.
  std::vector<int32_t> best;
  best.reserve(keep + 1);
  for (int32_t id = 0; id < n; ++id) {
    if (best.size() == keep && logits[id] <= logits[best.back()]) continue;
    auto at = std::upper_bound(best.begin(), best.end(), id,
                               [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    best.insert(at, id);
    if (best.size() > keep) best.pop_back();
  }
  out.top.reserve(keep);
  for (int32_t id : best) out.top.push_back({id, logprob(id)});
  return out;
}

}  // namespace yoco
