// UcxTransport over real UCX on loopback, TCP and shared memory: sizes from 1 KiB to 1 GiB
// between two processes, concurrent transfers between several peers, a peer killed on either
// side, cancellation from either side, deadlines on either side, refused bundles. After each
// failure nothing stays open and the survivor still transfers.
#include "lib/transport/ucx_transport.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "lib/engine/state_bundle.h"
#include "tests/transport/child_process.h"
#include "tests/transport/payload_pattern.h"

namespace yoco {
namespace {

using testing::ChildProcess;

constexpr uint64_t kKiB = 1024, kMiB = 1024 * kKiB, kGiB = 1024 * kMiB;

// A transport in this process that records what it receives.
class Peer {
 public:
  struct Event {
    IncomingTransfer transfer;
    absl::Status status;  // OK: received and pattern-checked
  };

  // With `segment_bytes`, transfers land in separately allocated segments of that size.
  explicit Peer(const std::string& tls,
                std::function<absl::Status(absl::string_view)> verify = nullptr,
                const std::string& address_key = "", uint64_t segment_bytes = 0) {
    UcxTransportOptions options;
    options.tls = tls;
    options.address_key = address_key;
    options.net_devices = tls == "tcp" ? "lo" : "";
    ReceiveCallbacks cb;
    cb.on_start = [this](const IncomingTransfer& t) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        started_.push_back(t);
        cv_.notify_all();
      }
      if (cancel_on_start_) transport_->CancelReceive(t.sender, t.id);  // runs inline
      return absl::OkStatus();
    };
    if (segment_bytes > 0) {
      cb.allocate = [segment_bytes](uint64_t size) -> absl::StatusOr<ByteBuffer> {
        auto blocks = std::make_shared<std::vector<std::unique_ptr<uint8_t[]>>>();
        std::vector<ByteBuffer::Segment> segments;
        for (uint64_t at = 0; at < size; at += segment_bytes) {
          const uint64_t n = std::min(segment_bytes, size - at);
          blocks->push_back(std::make_unique<uint8_t[]>(n));
          segments.push_back({blocks->back().get(), n});
        }
        return ByteBuffer(std::move(segments), blocks);
      };
    }
    cb.verify = [verify](const IncomingTransfer& t, const ByteBuffer& buffer) {
      std::string gathered;
      if (buffer.segmented()) {
        for (const ByteBuffer::Segment& s : buffer.segments()) {
          gathered.append(reinterpret_cast<const char*>(s.data), s.size);
        }
      }
      const absl::string_view data = buffer.segmented() ? gathered : buffer.view();
      if (verify) return verify(data);
      return testing::CheckPattern(reinterpret_cast<const uint8_t*>(data.data()), data.size(),
                                   t.size)
                 ? absl::OkStatus()
                 : absl::DataLossError("pattern mismatch");
    };
    cb.on_received = [this](const IncomingTransfer& t, ByteBuffer data) {
      Record({t, absl::OkStatus()});
    };
    cb.on_failed = [this](const IncomingTransfer& t, const absl::Status& st) { Record({t, st}); };
    auto transport = UcxTransport::Create(options, cb);
    EXPECT_TRUE(transport.ok()) << transport.status();
    if (transport.ok()) transport_ = std::move(*transport);
  }

  UcxTransport& transport() { return *transport_; }
  void set_cancel_on_start(bool cancel) { cancel_on_start_ = cancel; }

  // Sends a patterned buffer (seed = size) and returns a future of the sender's verdict.
  std::future<absl::Status> Send(const std::string& to, uint64_t size,
                                 absl::Duration timeout = absl::Seconds(60),
                                 uint64_t* id = nullptr) {
    auto data = std::make_shared<ByteBuffer>(size);
    testing::FillPattern(data->data(), size, size);
    return SendBytes(to, {data->data(), size, data}, timeout, id);
  }

  std::future<absl::Status> SendBytes(const std::string& to, SendBuffer buffer,
                                      absl::Duration timeout, uint64_t* id = nullptr,
                                      std::optional<TraceContext> trace = std::nullopt) {
    auto promise = std::make_shared<std::promise<absl::Status>>();
    auto future = promise->get_future();
    const uint64_t sent = transport_->Send(
        to, std::move(buffer), timeout, [promise](absl::Status st) { promise->set_value(st); },
        std::move(trace));
    if (id) *id = sent;
    return future;
  }

  std::optional<Event> NextEvent(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, absl::ToChronoMilliseconds(timeout),
                      [this] { return !events_.empty(); })) {
      return std::nullopt;
    }
    Event e = events_.front();
    events_.erase(events_.begin());
    return e;
  }

  std::optional<IncomingTransfer> NextStart(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, absl::ToChronoMilliseconds(timeout),
                      [this] { return !started_.empty(); })) {
      return std::nullopt;
    }
    IncomingTransfer t = started_.front();
    started_.erase(started_.begin());
    return t;
  }

  // open_transfers() drops to zero once UCX released everything; give it a moment.
  bool Drained() {
    for (int i = 0; i < 200; ++i) {
      if (transport_->open_transfers() == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

 private:
  void Record(Event e) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(e));
    cv_.notify_all();
  }

  std::unique_ptr<UcxTransport> transport_;
  std::atomic<bool> cancel_on_start_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Event> events_;
  std::vector<IncomingTransfer> started_;
};

std::string PeerBinary() { return YOCO_TRANSFER_PEER; }

// A receiver process; returns its worker address.
std::string StartReceiver(ChildProcess& child) {
  auto line = child.ReadLine(20000);
  EXPECT_TRUE(line.has_value()) << "receiver did not start";
  return line ? absl::HexStringToBytes(*line) : std::string();
}

// Skips lines like "start N" and returns the first line with `prefix`-style outcome.
std::optional<std::string> NextOutcome(ChildProcess& child, int timeout_ms) {
  while (auto line = child.ReadLine(timeout_ms)) {
    if (line->rfind("start", 0) != 0) return line;
  }
  return std::nullopt;
}

class TransportTest : public ::testing::TestWithParam<std::string> {};

// A peer on the same host but in another PID namespace (a container; hostNetwork pods share even
// the host name) is alive although no process has its pid here: its pid (77777 in its namespace,
// none here) must never be probed from outside, so transfers to it keep working.
TEST(TransportPidNamespaceTest, APeerInAnotherPidNamespaceIsNotDeclaredDead) {
  if (geteuid() != 0 || system("unshare --pid --fork --mount-proc true 2> /dev/null") != 0) {
    GTEST_SKIP() << "needs root and unshare(1) for a PID namespace";
  }
  if (kill(77777, 0) == 0 || errno != ESRCH) GTEST_SKIP() << "pid 77777 exists here";
  Peer sender("tcp");
  ChildProcess receiver({"/usr/bin/unshare", "--pid", "--fork", "--mount-proc", "/bin/sh", "-c",
                         "echo 77776 > /proc/sys/kernel/ns_last_pid && \"$0\" receive tcp",
                         PeerBinary()});
  ASSERT_TRUE(receiver.started());
  const std::string address = StartReceiver(receiver);
  ASSERT_FALSE(address.empty());
  // Transfers long enough to be in flight when the sender checks its peers' liveness (every
  // 200 ms): a peer wrongly found dead fails them.
  for (int i = 0; i < 3; ++i) {
    const absl::Status sent = sender.Send(address, 256 * kMiB).get();
    EXPECT_TRUE(sent.ok()) << "transfer " << i << ": " << sent;
    EXPECT_EQ(NextOutcome(receiver, 30000), absl::StrCat("ok ", 256 * kMiB));
  }
}

TEST_P(TransportTest, TwoProcessesSizesFromOneKibToOneGibArriveIntact) {
  ChildProcess receiver({PeerBinary(), "receive", GetParam()});
  ASSERT_TRUE(receiver.started());
  const std::string address = StartReceiver(receiver);
  Peer sender(GetParam());
  for (uint64_t size : {kKiB, 4 * kKiB, 64 * kKiB, kMiB, 64 * kMiB, kGiB}) {
    absl::Status st = sender.Send(address, size).get();
    ASSERT_TRUE(st.ok()) << size << ": " << st;
    EXPECT_EQ(NextOutcome(receiver, 30000), absl::StrCat("ok ", size));
  }
  EXPECT_TRUE(sender.Drained());
  EXPECT_EQ(sender.transport().metrics().transfers_sent, 6u);
}

// A receiver may take a transfer into segments of its own (a decode worker takes a bundle part
// into its K/V chunks): eager and rendezvous sizes land whole, in order, the transport's
// checksum taken over the segments.
TEST_P(TransportTest, TransfersLandInTheReceiversSegments) {
  struct Case {
    uint64_t segment_bytes;
    std::vector<uint64_t> sizes;
  };
  // Segments that end anywhere; eager sizes (up to 16 KiB) spanning several.
  for (const Case& c : {Case{3 * kKiB + 7, {1, 5 * kKiB, 16 * kKiB, 64 * kKiB + 7, kMiB}},
                        Case{64 * kKiB + 7, {64 * kKiB + 8, 64 * kMiB + 3}}}) {
    Peer receiver(GetParam(), nullptr, "", c.segment_bytes);
    Peer sender(GetParam());
    const std::string address = receiver.transport().address();
    for (uint64_t size : c.sizes) {
      const absl::Status sent = sender.Send(address, size).get();
      ASSERT_TRUE(sent.ok()) << size << ": " << sent;
      const std::optional<Peer::Event> event = receiver.NextEvent(absl::Seconds(30));
      ASSERT_TRUE(event.has_value());
      EXPECT_TRUE(event->status.ok()) << size << ": " << event->status;
      EXPECT_EQ(event->transfer.size, size);
    }
    EXPECT_TRUE(receiver.Drained());
  }
}

TEST_P(TransportTest, ManyConcurrentTransfersBetweenSeveralPeers) {
  std::vector<std::unique_ptr<Peer>> peers;
  for (int i = 0; i < 3; ++i) peers.push_back(std::make_unique<Peer>(GetParam()));
  std::vector<std::future<absl::Status>> sends;
  uint64_t expected_bytes[3] = {0, 0, 0};
  int expected_count[3] = {0, 0, 0};
  for (int round = 0; round < 12; ++round) {
    for (int from = 0; from < 3; ++from) {
      const int to = (from + 1 + round % 2) % 3;
      const uint64_t size = (round % 3 == 0) ? 3 * kMiB + round : 1000 + 997 * round;
      sends.push_back(peers[from]->Send(peers[to]->transport().address(), size));
      expected_bytes[to] += size;
      ++expected_count[to];
    }
  }
  for (auto& f : sends) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
    EXPECT_TRUE(f.get().ok());
  }
  for (int i = 0; i < 3; ++i) {
    for (int n = 0; n < expected_count[i]; ++n) {
      auto e = peers[i]->NextEvent(absl::Seconds(10));
      ASSERT_TRUE(e.has_value());
      EXPECT_TRUE(e->status.ok()) << e->status;
    }
    EXPECT_EQ(peers[i]->transport().metrics().bytes_received, expected_bytes[i]);
    EXPECT_TRUE(peers[i]->Drained());
  }
}

TEST_P(TransportTest, SenderKilledMidTransferFailsCleanlyOnTheReceiver) {
  Peer receiver(GetParam());
  const std::string address_hex = absl::BytesToHexString(receiver.transport().address());
  {
    ChildProcess sender({PeerBinary(), "send", GetParam(), address_hex, std::to_string(kGiB), "1"});
    ASSERT_TRUE(receiver.NextStart(absl::Seconds(30)).has_value());
    sender.Kill();
  }
  auto e = receiver.NextEvent(absl::Seconds(30));
  ASSERT_TRUE(e.has_value()) << "the receiver never noticed the dead sender";
  EXPECT_EQ(e->status.code(), absl::StatusCode::kUnavailable) << e->status;
  EXPECT_TRUE(receiver.Drained());
  // Still usable for another peer.
  ChildProcess next(
      {PeerBinary(), "send", GetParam(), address_hex, std::to_string(kMiB), std::to_string(kMiB)});
  auto ok = receiver.NextEvent(absl::Seconds(30));
  ASSERT_TRUE(ok.has_value());
  EXPECT_TRUE(ok->status.ok()) << ok->status;
}

TEST_P(TransportTest, ReceiverKilledMidTransferFailsCleanlyOnTheSender) {
  Peer sender(GetParam());
  std::future<absl::Status> result;
  {
    ChildProcess receiver({PeerBinary(), "receive", GetParam()});
    const std::string address = StartReceiver(receiver);
    result = sender.Send(address, kGiB);
    ASSERT_EQ(receiver.ReadLine(30000), absl::StrCat("start ", kGiB));
    receiver.Kill();
  }
  ASSERT_EQ(result.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(result.get().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(sender.Drained());
  ChildProcess other({PeerBinary(), "receive", GetParam()});
  const std::string address = StartReceiver(other);
  EXPECT_TRUE(sender.Send(address, 5 * kMiB).get().ok());
  EXPECT_EQ(NextOutcome(other, 30000), absl::StrCat("ok ", 5 * kMiB));
}

// Workers restart under new addresses: the connections to the dead ones are closed and freed
// (they used to be kept for the life of the process, one more per restart).
TEST_P(TransportTest, PeersThatDiedAreFreed) {
  Peer sender(GetParam());
  for (int i = 0; i < 4; ++i) {
    ChildProcess receiver({PeerBinary(), "receive", GetParam()});
    const std::string address = StartReceiver(receiver);
    ASSERT_TRUE(sender.Send(address, kMiB).get().ok());
    EXPECT_EQ(NextOutcome(receiver, 30000), absl::StrCat("ok ", kMiB));
    receiver.Kill();
    // The next send finds it gone (if the liveness check has not already).
    EXPECT_FALSE(sender.Send(address, kMiB, absl::Seconds(10)).get().ok());
  }
  for (int i = 0; i < 500 && sender.transport().peers_held() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(sender.transport().peers_held(), 0u);
  ChildProcess live({PeerBinary(), "receive", GetParam()});
  EXPECT_TRUE(sender.Send(StartReceiver(live), kMiB).get().ok());
  EXPECT_EQ(sender.transport().peers_held(), 1u);
}

TEST_P(TransportTest, CancelFromEitherSide) {
  Peer a(GetParam()), b(GetParam());
  // The sender cancels at once. Its verdict is CANCELLED; the receiver ends the transfer exactly
  // once, CANCELLED unless the data had already moved (shared memory pulls it in one step).
  uint64_t id = 0;
  auto sent = a.Send(b.transport().address(), 256 * kMiB, absl::Seconds(60), &id);
  a.transport().CancelSend(id);
  EXPECT_EQ(sent.get().code(), absl::StatusCode::kCancelled);
  auto e = b.NextEvent(absl::Seconds(30));
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->status.ok() || e->status.code() == absl::StatusCode::kCancelled) << e->status;

  // The receiver cancels when the transfer starts: both sides see CANCELLED.
  b.set_cancel_on_start(true);
  sent = a.Send(b.transport().address(), 256 * kMiB);
  EXPECT_EQ(sent.get().code(), absl::StatusCode::kCancelled);
  e = b.NextEvent(absl::Seconds(30));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->status.code(), absl::StatusCode::kCancelled) << e->status;
  b.set_cancel_on_start(false);

  EXPECT_TRUE(a.Drained());
  EXPECT_TRUE(b.Drained());
  EXPECT_TRUE(a.Send(b.transport().address(), 2 * kMiB).get().ok());
  EXPECT_GE(a.transport().metrics().failed_cancelled, 2u);
}

// A sender's trace context reaches the receiver with the transfer (eager and rendezvous);
// a transfer sent without one has none.
TEST_P(TransportTest, ATraceContextArrivesWithItsTransfer) {
  Peer a(GetParam()), b(GetParam());
  TraceContext trace;
  trace.trace_id = NewTraceId();
  trace.span_id = NewSpanId();
  trace.sampled = true;
  for (uint64_t size : {kKiB, 4 * kMiB}) {
    auto data = std::make_shared<ByteBuffer>(size);
    testing::FillPattern(data->data(), size, size);
    const absl::Time before = absl::Now();
    EXPECT_TRUE(a.SendBytes(b.transport().address(), {data->data(), size, data}, absl::Seconds(60),
                            nullptr, trace)
                    .get()
                    .ok());
    auto e = b.NextEvent(absl::Seconds(30));
    ASSERT_TRUE(e.has_value());
    EXPECT_TRUE(e->status.ok()) << e->status;
    ASSERT_TRUE(e->transfer.trace.has_value()) << size;
    EXPECT_EQ(e->transfer.trace->trace_id, trace.trace_id);
    EXPECT_EQ(e->transfer.trace->span_id, trace.span_id);
    EXPECT_TRUE(e->transfer.trace->sampled);
    EXPECT_GE(e->transfer.started, before);
  }
  EXPECT_TRUE(a.Send(b.transport().address(), kKiB).get().ok());
  auto e = b.NextEvent(absl::Seconds(30));
  ASSERT_TRUE(e.has_value());
  EXPECT_FALSE(e->transfer.trace.has_value());
}

TEST_P(TransportTest, DeadlinesExpireOnEitherSide) {
  // Sender side: the receiver process is stopped, so nothing completes before the deadline.
  Peer sender(GetParam());
  {
    ChildProcess receiver({PeerBinary(), "receive", GetParam()});
    const std::string address = StartReceiver(receiver);
    receiver.Signal(SIGSTOP);
    auto result = sender.Send(address, 64 * kMiB, absl::Milliseconds(300));
    ASSERT_EQ(result.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    EXPECT_EQ(result.get().code(), absl::StatusCode::kDeadlineExceeded);
    receiver.Signal(SIGCONT);
    EXPECT_NE(NextOutcome(receiver, 10000).value_or(""), absl::StrCat("ok ", 64 * kMiB));
  }
  EXPECT_TRUE(sender.Drained());

  // Receiver side: the sender stops mid-transfer; the receiver gives up at the deadline the
  // sender announced. Over shared memory the receiver pulls the data straight from the
  // stopped sender's memory, so a stopped sender cannot stall it: TCP only.
  if (GetParam() != "tcp") return;
  Peer receiver(GetParam());
  ChildProcess stopped({PeerBinary(), "send", GetParam(),
                        absl::BytesToHexString(receiver.transport().address()),
                        std::to_string(kGiB), std::to_string(kGiB), "2000"});
  ASSERT_TRUE(receiver.NextStart(absl::Seconds(30)).has_value());
  stopped.Signal(SIGSTOP);
  auto e = receiver.NextEvent(absl::Seconds(10));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->status.code(), absl::StatusCode::kDeadlineExceeded) << e->status;
  // UCX may still write into the receive buffer until the stopped sender resumes or dies; the
  // buffer is released then.
  stopped.Kill();
  EXPECT_TRUE(receiver.Drained());
}

TEST_P(TransportTest, UnreachablePeerIsUnavailableAndOthersStillWork) {
  Peer a(GetParam());
  std::string gone_address;
  {
    Peer gone(GetParam());
    gone_address = gone.transport().address();
  }
  auto result = a.Send(gone_address, kMiB, absl::Seconds(20));
  ASSERT_EQ(result.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  const absl::Status st = result.get();
  EXPECT_TRUE(st.code() == absl::StatusCode::kUnavailable ||
              st.code() == absl::StatusCode::kDeadlineExceeded)
      << st;
  Peer b(GetParam());
  EXPECT_TRUE(a.Send(b.transport().address(), kMiB).get().ok());
  EXPECT_TRUE(a.Drained());
}

// Addresses arrive over gRPC from whoever can reach a worker. Forged ones (our header, then
// random bytes: this used to abort the process inside UCX) and ones sealed with another
// cluster's key are refused with INVALID_ARGUMENT; the transport keeps working.
TEST_P(TransportTest, ForgedOrForeignAddressesAreRefused) {
  const std::string key = "this-cluster-transport-key";
  Peer a(GetParam(), nullptr, key);
  Peer same_cluster(GetParam(), nullptr, key);
  Peer other_cluster(GetParam(), nullptr, "another-cluster-transport-key");
  Peer no_key(GetParam());
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    std::string forged = "YUCX";
    for (int i = 0; i < 12 + trial * 40; ++i) forged.push_back(static_cast<char>(rng()));
    EXPECT_EQ(a.SendBytes(forged, {"x", 1, nullptr}, absl::Seconds(5)).get().code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(a.Send(other_cluster.transport().address(), kKiB).get().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.Send(no_key.transport().address(), kKiB).get().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(a.Send(same_cluster.transport().address(), kMiB).get().ok());
  EXPECT_TRUE(a.Drained());
}

INSTANTIATE_TEST_SUITE_P(Loopback, TransportTest, ::testing::Values("tcp", "sm"));

TEST(TransportBundleTest, CorruptedOrForeignBundlesAreRefused) {
  ModelConfig config;
  config.dim = 64;
  config.n_layers = 2;
  config.hidden_dim = 64;
  config.n_self_heads = 2;
  config.n_attn_heads = 2;
  config.n_attn_kv_heads = 1;
  config.vocab_size = 50;
  const uint64_t fingerprint = 0x1234;
  StateBundle bundle;
  bundle.model_fingerprint = fingerprint;
  bundle.state = SequenceState::Create(config);
  bundle.state.position = 3;
  const std::vector<float> k(3 * config.kv_dim(), 0.5f), v(3 * config.kv_dim(), -0.5f);
  bundle.state.shared_k.Append(k.data(), 3);
  bundle.state.shared_v.Append(v.data(), 3);
  bundle.pending_token = 7;
  Peer receiver("tcp", [&](absl::string_view data) {
    return ParseStateBundle(data, config, fingerprint).status();
  });
  Peer sender("tcp");
  auto send = [&](std::string bytes) {
    auto owner = std::make_shared<std::string>(std::move(bytes));
    return sender
        .SendBytes(receiver.transport().address(), {owner->data(), owner->size(), owner},
                   absl::Seconds(20))
        .get();
  };
  const std::string good = SerializeStateBundle(bundle);
  EXPECT_TRUE(send(good).ok());
  std::string corrupt = good;
  corrupt[corrupt.size() / 2] ^= 0x10;
  EXPECT_EQ(send(corrupt).code(), absl::StatusCode::kDataLoss);
  StateBundle foreign = bundle;
  foreign.model_fingerprint = 99;
  EXPECT_EQ(send(SerializeStateBundle(foreign)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(receiver.transport().metrics().transfers_received, 1u);
  EXPECT_EQ(receiver.transport().metrics().failed_refused, 2u);
  EXPECT_TRUE(receiver.Drained());
}

}  // namespace
}  // namespace yoco
