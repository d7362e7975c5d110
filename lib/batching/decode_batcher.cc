// The batching loop: admit from the queue while the batch and the budget allow (first come,
// first served: a large sequence at the head is not overtaken), step, emit, retire.
#include "lib/batching/decode_batcher.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "lib/scheduling/fair_order.h"

namespace yoco {

namespace {

// One position's shared K and V.
int64_t KvRowBytes(const ModelConfig& config) {
  return 2LL * config.kv_dim() * KvDtypeBytes(config.kv_dtype);
}

}  // namespace

int64_t DecodeBatcher::ReservedBytes(const ModelConfig& config, const SequenceState& state,
                                     int max_new_tokens) {
  return state.bytes() + max_new_tokens * KvRowBytes(config);
}

int64_t DecodeBatcher::MaxSequenceRows(const ModelConfig& config, int64_t budget_bytes) {
  const int64_t fixed = SequenceState::Create(config).bytes();  // the self-decoder's states
  return budget_bytes > fixed ? (budget_bytes - fixed) / KvRowBytes(config) : 0;
}

class DecodeBatcher::Loop {
 public:
  Loop(Backend& backend, DecodeBatcherOptions options)
      : backend_(backend),
        options_(options),
        reserve_(options.tenant_reserve_seats >= 0 ? options.tenant_reserve_seats
                                                   : std::max(1, options.max_batch / 4)) {
    thread_ = std::thread([this] { Run(); });
  }

  ~Loop() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    cv_.SignalAll();
    thread_.join();
  }

  absl::StatusOr<uint64_t> Admit(std::vector<DecodeSequence> choices) {
    std::vector<std::unique_ptr<Entry>> entries;
    for (DecodeSequence& seq : choices) {
      if (seq.max_new_tokens < 1) {
        return absl::InvalidArgumentError("max_new_tokens must be >= 1");
      }
      const Generation& g = seq.generation;
      const int64_t bytes = ReservedBytes(backend_.model().config(), g.state(),
                                          seq.max_new_tokens + static_cast<int>(g.replay_left()));
      if (bytes > options_.memory_budget_bytes) {
        // Not load: no wait makes it fit, so the caller must look elsewhere.
        return absl::FailedPreconditionError(
            absl::StrCat("the sequence needs ", bytes,
                         " bytes of state memory, more than this decode worker's whole budget of ",
                         options_.memory_budget_bytes));
      }
      const int64_t growth = bytes - g.state().bytes();
      entries.push_back(
          std::make_unique<Entry>(Entry{0, 0, std::move(seq), bytes, growth, {}, 0, false}));
    }
    if (entries.empty()) return absl::InvalidArgumentError("no sequence to admit");
    absl::MutexLock lock(&mu_);
    if (static_cast<int>(queue_.size() + entries.size()) > options_.max_queue) {
      return absl::ResourceExhaustedError(
          absl::StrCat("decode queue is full (", options_.max_queue, ")"));
    }
    const uint64_t id = next_id_ + 1;
    for (auto& e : entries) {
      e->key = ++next_id_;
      e->id = id;
      order_.Add(e->key, e->seq.scheduling);
      queue_[e->key] = std::move(e);
    }
    cv_.SignalAll();
    return id;
  }

  void Cancel(uint64_t id) {
    absl::MutexLock lock(&mu_);
    cancelled_.push_back(id);
    cv_.SignalAll();
  }

  void CancelChoice(uint64_t id, uint32_t choice) {
    absl::MutexLock lock(&mu_);
    cancelled_choices_.push_back({id, choice});
    cv_.SignalAll();
  }

  DecodeBatcherStats stats() const {
    absl::MutexLock lock(&mu_);
    DecodeBatcherStats s = stats_;
    s.memory_budget_bytes = options_.memory_budget_bytes;
    return s;
  }

 private:
  struct Entry {
    uint64_t key;  // in queue_ and order_
    uint64_t id;   // what Cancel names: the first key of its request's choices
    DecodeSequence seq;
    int64_t bytes;               // alone: ReservedBytes
    int64_t growth;              // of those, the rows it may still add
    StateLedger::Charge charge;  // while active
    int generated;
    bool cancelled;
    bool failed = false;  // its step failed; already told
  };

  void Run() {
    std::vector<std::unique_ptr<Entry>> active;
    std::vector<Generation*> generations;
    std::vector<int32_t> tokens;
    // Active sequences' state memory, each shared K/V chunk once.
    StateLedger ledger;
    while (true) {
      std::vector<std::unique_ptr<Entry>> retired_queued;
      bool stopping = false;
      {
        absl::MutexLock lock(&mu_);
        while (!stopping_ && active.empty() && queue_.empty() && cancelled_.empty() &&
               cancelled_choices_.empty()) {
          cv_.Wait(&mu_);
        }
        stopping = stopping_;
        if (stopping_) {
          for (auto& [id, e] : queue_) retired_queued.push_back(std::move(e));
          queue_.clear();
          order_ = FairOrder();
          for (auto& e : active) e->cancelled = true;
        }
        // Cancellations: queued ones leave now, active ones at this step boundary.
        for (uint64_t id : cancelled_) {
          for (auto& e : active) e->cancelled |= e->id == id;
          // A request's choices have consecutive keys from its id.
          for (auto queued = queue_.lower_bound(id);
               queued != queue_.end() && queued->second->id == id;) {
            order_.Remove(queued->first);
            retired_queued.push_back(std::move(queued->second));
            queued = queue_.erase(queued);
          }
        }
        cancelled_.clear();
        for (const auto& [id, choice] : cancelled_choices_) {
          for (auto& e : active) e->cancelled |= e->id == id && e->seq.choice == choice;
          for (auto queued = queue_.lower_bound(id);
               queued != queue_.end() && queued->second->id == id; ++queued) {
            if (queued->second->seq.choice != choice) continue;
            order_.Remove(queued->first);
            retired_queued.push_back(std::move(queued->second));
            queue_.erase(queued);
            break;
          }
        }
        cancelled_choices_.clear();
        // The next in FairOrder joins while it fits; one that does not waits for room, and the
        // others behind it (a smaller one passing it could starve it).
        while (!stopping_ && !order_.empty() &&
               static_cast<int>(active.size()) < options_.max_batch) {
          auto next = queue_.find(*order_.Peek());
          Entry& e = *next->second;
          if (ledger.bytes() + ledger.Cost(e.seq.generation.state(), e.growth) >
              options_.memory_budget_bytes) {
            break;
          }
          e.charge = ledger.Add(e.seq.generation.state(), e.growth);
          active.push_back(std::move(next->second));
          queue_.erase(next);
          order_.Pop();
        }
        AdmitToReserveSeats(active, ledger);
        stats_.queued = static_cast<int>(queue_.size());
      }
      for (auto& e : retired_queued) Emit(*e, Finished(DecodeFinish::kCancelled));
      // Cancelled active sequences leave before the step.
      Retire(
          active, &ledger, [](const Entry& e) { return e.cancelled; }, DecodeFinish::kCancelled);
      PublishStats(active, ledger.bytes(), 0);
      if (stopping && active.empty()) return;
      if (active.empty()) continue;

      generations.clear();
      for (auto& e : active) generations.push_back(&e->seq.generation);
      const absl::Status st = Generation::NextBatch(backend_, generations, &tokens);
      if (!st.ok()) {
        // A failing step fails its sequences, not the worker.
        for (auto& e : active) {
          DecodeEvent ev = Finished(DecodeFinish::kError);
          ev.status = st;
          Emit(*e, ev);
        }
        for (auto& e : active) ledger.Remove(e->charge);
        active.clear();
        PublishStats(active, ledger.bytes(), 0);
        continue;
      }
      const int batch = static_cast<int>(active.size());
      for (size_t i = 0; i < active.size(); ++i) {
        Entry& e = *active[i];
        if (tokens[i] == kNonFiniteLogits) {
          DecodeEvent ev = Finished(DecodeFinish::kError);
          ev.status = NonFiniteLogitsError(e.seq.generation.state().position);
          Emit(e, ev);
          e.failed = true;
          continue;
        }
        if (e.seq.generation.replayed()) continue;  // the client has it already
        ++e.generated;
        DecodeEvent ev;
        ev.token = tokens[i];
        ev.logprobs = e.seq.generation.pending_logprobs();
        ev.generated = e.generated;
        Emit(e, ev);
      }
      // Failed sequences leave silently: their error event was their end.
      for (auto it = active.begin(); it != active.end();) {
        if ((*it)->failed) {
          ledger.Remove((*it)->charge);
          it = active.erase(it);
        } else {
          ++it;
        }
      }
      Retire(
          active, &ledger,
          [](const Entry& e) {
            return !e.seq.generation.replayed() &&
                   (Stop(e) != DecodeFinish::kLength || e.generated >= e.seq.max_new_tokens);
          },
          std::nullopt);
      PublishStats(active, ledger.bytes(), batch);
    }
  }

  static DecodeFinish Stop(const Entry& e) {
    const int32_t last = e.seq.generation.pending_token();
    return FinishFor(StopAfter(e.seq.generation.sampling(), e.seq.stop_at_eos, last));
  }

  static DecodeEvent Finished(DecodeFinish reason) {
    DecodeEvent ev;
    ev.finished = true;
    ev.reason = reason;
    return ev;
  }

  static void Emit(Entry& e, DecodeEvent ev) {
    if (ev.finished) ev.generated = e.generated;
    if (e.seq.on_event) e.seq.on_event(ev);
  }

  // Removes entries matching `done`, emitting their finish (`reason`, or the stop they hit).
  template <typename Pred>
  void Retire(std::vector<std::unique_ptr<Entry>>& active, StateLedger* ledger, Pred done,
              std::optional<DecodeFinish> reason) {
    for (auto it = active.begin(); it != active.end();) {
      if (done(**it)) {
        Emit(**it, Finished(reason ? *reason : Stop(**it)));
        ledger->Remove((*it)->charge);
        it = active.erase(it);
      } else {
        ++it;
      }
    }
  }

  // Full batch: the earliest waiting sequence of a tenant with none active takes a reserve seat
  // (DecodeBatcherOptions::tenant_reserve_seats), if its memory fits, one per tenant.
  void AdmitToReserveSeats(std::vector<std::unique_ptr<Entry>>& active, StateLedger& ledger)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (stopping_ || static_cast<int>(active.size()) < options_.max_batch) return;
    std::set<std::string> seated;
    for (const auto& e : active) seated.insert(e->seq.scheduling.tenant);
    for (auto it = queue_.begin();
         it != queue_.end() && static_cast<int>(active.size()) < options_.max_batch + reserve_;) {
      Entry& e = *it->second;
      if (seated.count(e.seq.scheduling.tenant) > 0 ||
          ledger.bytes() + ledger.Cost(e.seq.generation.state(), e.growth) >
              options_.memory_budget_bytes) {
        ++it;
        continue;
      }
      seated.insert(e.seq.scheduling.tenant);
      e.charge = ledger.Add(e.seq.generation.state(), e.growth);
      order_.Remove(it->first);
      active.push_back(std::move(it->second));
      it = queue_.erase(it);
    }
  }

  void PublishStats(const std::vector<std::unique_ptr<Entry>>& active, int64_t in_use, int batch) {
    absl::MutexLock lock(&mu_);
    stats_.active = static_cast<int>(active.size());
    stats_.memory_in_use_bytes = in_use;
    if (batch > 0) {
      ++stats_.steps;
      stats_.tokens += static_cast<uint64_t>(batch);
      stats_.last_batch_size = batch;
    }
  }

  Backend& backend_;
  const DecodeBatcherOptions options_;
  const int reserve_;  // seats beyond max_batch for tenants with none (tenant_reserve_seats)

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  std::map<uint64_t, std::unique_ptr<Entry>> queue_ ABSL_GUARDED_BY(mu_);  // by id
  FairOrder order_ ABSL_GUARDED_BY(mu_);                                   // of queue_'s ids
  std::vector<uint64_t> cancelled_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<uint64_t, uint32_t>> cancelled_choices_ ABSL_GUARDED_BY(mu_);
  DecodeBatcherStats stats_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

DecodeBatcher::DecodeBatcher(Backend& backend, DecodeBatcherOptions options)
    : loop_(std::make_unique<Loop>(backend, options)) {}
DecodeBatcher::~DecodeBatcher() = default;

absl::StatusOr<uint64_t> DecodeBatcher::Admit(DecodeSequence sequence) {
  std::vector<DecodeSequence> one;
  one.push_back(std::move(sequence));
  return loop_->Admit(std::move(one));
}
absl::StatusOr<uint64_t> DecodeBatcher::AdmitChoices(std::vector<DecodeSequence> choices) {
  return loop_->Admit(std::move(choices));
}
void DecodeBatcher::Cancel(uint64_t id) { loop_->Cancel(id); }
void DecodeBatcher::CancelChoice(uint64_t id, uint32_t choice) { loop_->CancelChoice(id, choice); }
DecodeBatcherStats DecodeBatcher::stats() const { return loop_->stats(); }

}  // namespace yoco
