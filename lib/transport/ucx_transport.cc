// UcxTransport on UCP active messages (DATA, REPLY, CANCEL: lib/transport/ucx_wire.h). All UCX
// calls happen on the progress thread; public methods queue commands for it.
#include "lib/transport/ucx_transport.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <new>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "lib/checksum/crc32c.h"
#include "lib/transport/peer_liveness.h"
#include "lib/transport/transport_address.h"
#include "lib/transport/ucx_handles.h"
#include "lib/transport/ucx_wire.h"

namespace yoco {
namespace {

// A control message (REPLY or CANCEL) in flight: header and text live until UCX is done.
struct ControlMessage {
  std::vector<uint8_t> header;
  std::string text;
};

absl::Status UcsError(const char* what, ucs_status_t status) {
  return absl::UnavailableError(absl::StrCat(what, ": ", ucs_status_string(status)));
}

// Writes buffer.size() bytes from `from` into `buffer`, segment by segment when it has them.
void CopyInto(ByteBuffer& buffer, const uint8_t* from) {
  if (!buffer.segmented()) {
    if (buffer.size() > 0) std::memcpy(buffer.data(), from, buffer.size());
    return;
  }
  for (const ByteBuffer::Segment& s : buffer.segments()) {
    std::memcpy(s.data, from, s.size);
    from += s.size;
  }
}

uint32_t ChecksumOf(const ByteBuffer& buffer) {
  if (!buffer.segmented()) return Crc32c(buffer.data(), buffer.size());
  uint32_t crc = 0;
  for (const ByteBuffer::Segment& s : buffer.segments()) crc = Crc32cExtend(crc, s.data, s.size);
  return crc;
}

}  // namespace

ByteBuffer::ByteBuffer(std::vector<Segment> segments, std::shared_ptr<void> owner)
    : segments_(std::move(segments)), owner_(std::move(owner)) {
  for (const Segment& s : segments_) size_ += s.size;
}

class UcxTransport::Impl {
 public:
  Impl(const UcxTransportOptions& options, ReceiveCallbacks callbacks)
      : options_(options), callbacks_(std::move(callbacks)) {
    std::random_device rd;
    id_ = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
  }

  ~Impl() {
    if (thread_.joinable()) {
      stopping_ = true;
      Wake();
      thread_.join();
    }
    if (epoll_fd_ >= 0) close(epoll_fd_);
    if (wake_fd_ >= 0) close(wake_fd_);
  }

  absl::Status Init() {
    ucp_config_t* raw_config = nullptr;
    ucs_status_t st = ucp_config_read(nullptr, nullptr, &raw_config);
    if (st != UCS_OK) return UcsError("ucp_config_read", st);
    UcpConfigPtr config(raw_config);
    const std::string tls = options_.tls + ",self";
    if ((st = ucp_config_modify(config.get(), "TLS", tls.c_str())) != UCS_OK)
      return UcsError("UCX_TLS", st);
    if (!options_.net_devices.empty() &&
        (st = ucp_config_modify(config.get(), "NET_DEVICES", options_.net_devices.c_str())) !=
            UCS_OK) {
      return UcsError("UCX_NET_DEVICES", st);
    }
    // A dead peer is noticed within a few seconds even on transports without a connection to
    // reset (shared memory).
    if ((st = ucp_config_modify(config.get(), "KEEPALIVE_INTERVAL", "1s")) != UCS_OK) {
      return UcsError("UCX_KEEPALIVE_INTERVAL", st);
    }

    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    ucp_context_h context = nullptr;
    if ((st = ucp_init(&params, config.get(), &context)) != UCS_OK) return UcsError("ucp_init", st);
    context_.reset(context);

    ucp_worker_params_t wparams{};
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
    ucp_worker_h worker = nullptr;
    if ((st = ucp_worker_create(context_.get(), &wparams, &worker)) != UCS_OK) {
      return UcsError("ucp_worker_create", st);
    }
    worker_.reset(worker);

    ucp_address_t* address = nullptr;
    size_t address_length = 0;
    if ((st = ucp_worker_get_address(worker_.get(), &address, &address_length)) != UCS_OK) {
      return UcsError("ucp_worker_get_address", st);
    }
    UcpAddressPtr address_owner(address, UcpAddressDeleter{worker_.get()});
    address_ =
        SealTransportAddress({static_cast<uint32_t>(getpid()), HostId(),
                              std::string(reinterpret_cast<const char*>(address), address_length)},
                             options_.address_key);

    for (unsigned id : {kUcxData, kUcxReply, kUcxCancel}) {
      ucp_am_handler_param_t hp{};
      hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                      UCP_AM_HANDLER_PARAM_FIELD_ARG;
      hp.id = id;
      hp.cb = id == kUcxData    ? &Impl::OnDataAm
              : id == kUcxReply ? &Impl::OnReplyAm
                                : &Impl::OnCancelAm;
      hp.arg = this;
      if ((st = ucp_worker_set_am_recv_handler(worker_.get(), &hp)) != UCS_OK) {
        return UcsError("ucp_worker_set_am_recv_handler", st);
      }
    }

    int worker_fd = -1;
    if ((st = ucp_worker_get_efd(worker_.get(), &worker_fd)) != UCS_OK)
      return UcsError("ucp_worker_get_efd", st);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    if (wake_fd_ < 0 || epoll_fd_ < 0)
      return absl::InternalError("cannot create the progress thread's fds");
    for (int fd : {worker_fd, wake_fd_}) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = fd;
      if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0)
        return absl::InternalError("epoll_ctl failed");
    }
    thread_ = std::thread([this] { Loop(); });
    return absl::OkStatus();
  }

  const std::string& address() const { return address_; }
  uint64_t id() const { return id_; }
  const TransferMetrics& metrics() const { return metrics_; }
  size_t open_transfers() const { return open_.load(); }
  size_t peers_held() const { return peers_held_.load(); }

  uint64_t Send(const std::string& peer, SendBuffer buffer, absl::Duration timeout,
                std::function<void(absl::Status)> done, std::optional<TraceContext> trace) {
    const uint64_t id = next_id_.fetch_add(1) + 1;
    auto t = std::make_shared<Outgoing>();
    t->impl = this;
    t->id = id;
    t->peer_address = peer;
    t->buffer = std::move(buffer);
    t->start = absl::Now();
    t->deadline = t->start + timeout;
    t->timeout_ms =
        static_cast<uint32_t>(std::min<int64_t>(absl::ToInt64Milliseconds(timeout), UINT32_MAX));
    t->done = std::move(done);
    t->trace = std::move(trace);
    Post([this, t] { StartSend(t); });
    return id;
  }

  void CancelSend(uint64_t id) {
    Post([this, id] {
      auto it = outgoing_.find(id);
      if (it == outgoing_.end()) return;
      Outgoing* t = it->second.get();
      SendCancel(t);
      FinishOutgoing(t, absl::CancelledError("transfer cancelled by the sender"));
    });
  }

  void CancelReceive(uint64_t sender, uint64_t id) {
    Post([this, sender, id] {
      auto it = incoming_.find({sender, id});
      if (it == incoming_.end()) return;
      FinishIncoming(it->second.get(), absl::CancelledError("transfer cancelled by the receiver"));
    });
  }

 private:
  struct Peer {
    Impl* impl = nullptr;
    std::string address;
    uint32_t pid = 0;  // 0 when the peer is on another host
    ucp_ep_h ep = nullptr;
    bool failed = false;
    bool closed = false;  // its endpoint is closed: freed once no transfer points at it
  };

  struct Outgoing {
    Impl* impl = nullptr;
    uint64_t id = 0;
    std::string peer_address;
    Peer* peer = nullptr;  // null once the peer's endpoint is closed
    SendBuffer buffer;
    std::vector<uint8_t> header;  // DATA's, encoded: lives until UCX is done with the send
    absl::Time start, deadline;
    uint32_t timeout_ms = 0;
    std::function<void(absl::Status)> done;
    std::optional<TraceContext> trace;  // sent in the DATA header
    void* request = nullptr;            // the DATA send, while UCX holds it
    bool finished = false;              // `done` was called; waiting for UCX to release the request
    bool abandoned = false;  // the peer is gone and its endpoint closed: buffer released early
  };

  struct Incoming {
    Impl* impl = nullptr;
    IncomingTransfer info;
    ByteBuffer buffer;
    uint32_t crc = 0;
    bool has_crc = false;
    absl::Time deadline;
    ucp_ep_h reply_ep = nullptr;
    uint32_t sender_pid = 0;        // 0 when the sender is on another host
    void* request = nullptr;        // the rendezvous receive, while UCX holds it
    std::vector<ucp_dt_iov_t> iov;  // a segmented buffer's segments, while UCX writes them
    bool finished = false;
  };

  using IncomingKey = std::pair<uint64_t, uint64_t>;

  // --- thread plumbing ---

  // Runs `fn` on the progress thread: inline when already there (a callback calling back into
  // the transport), queued otherwise.
  void Post(std::function<void()> fn) {
    if (std::this_thread::get_id() == loop_thread_id_) {
      fn();
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      commands_.push_back(std::move(fn));
    }
    Wake();
  }

  void Wake() {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
  }

  void Loop() {
    loop_thread_id_ = std::this_thread::get_id();
    while (!stopping_) {
      RunCommands();
      bool progressed = false;
      while (ucp_worker_progress(worker_.get()) != 0) progressed = true;
      if (progressed) last_progress_ = absl::Now();
      ClosePendingEndpoints();
      const absl::Duration until = ExpireDeadlines();
      if (!commands_empty()) continue;
      // While data moves, keep polling: sleeping until the next event between fragments costs
      // bandwidth. A transfer that has gone quiet (waiting on a slow peer) does not spin.
      if ((!outgoing_.empty() || !incoming_.empty()) &&
          absl::Now() - last_progress_ < absl::Milliseconds(2)) {
        continue;
      }
      const ucs_status_t st = ucp_worker_arm(worker_.get());
      if (st == UCS_ERR_BUSY) continue;
      epoll_event events[2];
      const int timeout_ms =
          static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(until) + 1, 1, 100));
      epoll_wait(epoll_fd_, events, 2, timeout_ms);
      uint64_t drained;
      while (read(wake_fd_, &drained, sizeof drained) > 0) {
      }
    }
    Shutdown();
  }

  bool commands_empty() {
    absl::MutexLock lock(&mu_);
    return commands_.empty();
  }

  void RunCommands() {
    std::deque<std::function<void()>> batch;
    {
      absl::MutexLock lock(&mu_);
      batch.swap(commands_);
    }
    for (auto& fn : batch) fn();
  }

  // Fails everything still open, then lets UCX finish cancelled requests and closes endpoints.
  void Shutdown() {
    RunCommands();
    std::vector<Outgoing*> out;
    for (auto& [id, t] : outgoing_) out.push_back(t.get());
    for (Outgoing* t : out) {
      if (!t->finished) {
        SendCancel(t);
        FinishOutgoing(t, absl::CancelledError("transport shut down"));
      }
    }
    std::vector<Incoming*> in;
    for (auto& [key, t] : incoming_) in.push_back(t.get());
    for (Incoming* t : in) {
      if (!t->finished) FinishIncoming(t, absl::CancelledError("transport shut down"));
    }
    for (auto& [address, peer] : peers_) {
      if (!peer->failed) {
        peer->failed = true;
        closing_.push_back(peer.get());
      }
    }
    const absl::Time give_up = absl::Now() + absl::Seconds(5);
    while ((!outgoing_.empty() || !incoming_.empty() || !closing_.empty() || !control_.empty() ||
            !close_requests_.empty()) &&
           absl::Now() < give_up) {
      ucp_worker_progress(worker_.get());
      ClosePendingEndpoints();
    }
  }

  // --- endpoints ---

  Peer* GetPeer(const std::string& address, absl::Status* status) {
    auto it = peers_.find(address);
    if (it != peers_.end() && !it->second->failed) return it->second.get();
    // UCX aborts on bytes that are not a worker address: only authenticated ones reach it.
    absl::StatusOr<TransportAddress> opened = OpenTransportAddress(address, options_.address_key);
    if (!opened.ok()) {
      *status = opened.status();
      return nullptr;
    }
    auto peer = std::make_unique<Peer>();
    peer->impl = this;
    peer->address = address;
    peer->pid = opened->host == HostId() ? opened->pid : 0;
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(opened->ucx.data());
    params.err_mode =
        ucx_detects_failures_ ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    params.err_handler.cb = &Impl::OnEndpointError;
    params.err_handler.arg = peer.get();
    const ucs_status_t st = ucp_ep_create(worker_.get(), &params, &peer->ep);
    if (st != UCS_OK) {
      *status = UcsError("cannot connect to the peer", st);
      return nullptr;
    }
    Peer* raw = peer.get();
    ++peers_held_;
    if (it != peers_.end()) {
      retired_peers_.push_back(std::move(it->second));  // a failed peer still closing
      it->second = std::move(peer);
    } else {
      peers_.emplace(address, std::move(peer));
    }
    return raw;
  }

  static void OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status) {
    Peer* peer = static_cast<Peer*>(arg);
    peer->impl->PeerFailed(peer, status);
  }

  void PeerFailed(Peer* peer, ucs_status_t status) {
    PeerFailed(peer, absl::UnavailableError(
                         absl::StrCat("peer connection failed: ", ucs_status_string(status))));
  }

  void PeerFailed(Peer* peer, const absl::Status& error) {
    if (peer->failed) return;
    peer->failed = true;
    std::vector<Outgoing*> affected;
    for (auto& [id, t] : outgoing_) {
      if (t->peer == peer && !t->finished) affected.push_back(t.get());
    }
    for (Outgoing* t : affected) FinishOutgoing(t, error);
    closing_.push_back(peer);
  }

  // Endpoints of failed peers are closed outside UCX callbacks. Once an endpoint is closed its
  // peer can no longer read a send buffer, so sends UCX still holds (a rendezvous whose
  // acknowledgement will never come) give their buffers back.
  void ClosePendingEndpoints() {
    for (Peer* peer : closing_) {
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = UCP_EP_CLOSE_FLAG_FORCE;
      void* request = ucp_ep_close_nbx(peer->ep, &param);
      if (request != nullptr && !UCS_PTR_IS_ERR(request)) {
        close_requests_.push_back({request, peer});
      } else {
        AbandonSends(peer);
        peer->closed = true;
      }
    }
    closing_.clear();
    for (size_t i = 0; i < close_requests_.size();) {
      if (ucp_request_check_status(close_requests_[i].first) != UCS_INPROGRESS) {
        ucp_request_free(close_requests_[i].first);
        AbandonSends(close_requests_[i].second);
        close_requests_[i].second->closed = true;
        close_requests_.erase(close_requests_.begin() + i);
      } else {
        ++i;
      }
    }
    FreeClosedPeers();
  }

  // A worker that restarts comes back under a new address: without this every restart of every
  // peer would leave a Peer behind for the life of the process.
  void FreeClosedPeers() {
    auto unused = [this](const Peer* peer) {
      if (!peer->closed) return false;
      for (const auto& [id, t] : outgoing_) {
        if (t->peer == peer) return false;  // UCX may still call back with it
      }
      return true;
    };
    for (auto it = peers_.begin(); it != peers_.end();) {
      if (unused(it->second.get())) {
        it = peers_.erase(it);
        --peers_held_;
      } else {
        ++it;
      }
    }
    for (auto it = retired_peers_.begin(); it != retired_peers_.end();) {
      if (unused(it->get())) {
        it = retired_peers_.erase(it);
        --peers_held_;
      } else {
        ++it;
      }
    }
  }

  void AbandonSends(Peer* peer) {
    for (auto& [id, t] : outgoing_) {
      if (t->peer != peer) continue;
      if (t->request != nullptr && !t->abandoned) {
        t->abandoned = true;
        t->buffer = SendBuffer{};
        --open_;
      }
      t->peer = nullptr;  // the endpoint is closed: nothing may use it, and the peer can go
    }
  }

  // --- sending ---

  void StartSend(const std::shared_ptr<Outgoing>& shared) {
    auto owned = std::make_unique<Outgoing>(std::move(*shared));
    Outgoing* t = owned.get();
    outgoing_.emplace(t->id, std::move(owned));
    ++open_;
    absl::Status status;
    t->peer = GetPeer(t->peer_address, &status);
    if (t->peer == nullptr) {
      FinishOutgoing(t, status);
      return;
    }
    const uint32_t crc = options_.checksum ? Crc32c(t->buffer.data, t->buffer.size) : 0;
    DataHeader h{id_,
                 t->id,
                 t->buffer.size,
                 crc,
                 t->timeout_ms,
                 HostId(),
                 static_cast<uint32_t>(getpid()),
                 options_.checksum ? DataHeader::kHasChecksum : 0};
    if (t->trace.has_value()) {
      h.flags |= DataHeader::kHasTrace;
      h.trace_id = t->trace->trace_id;
      h.span_id = t->trace->span_id;
      h.trace_flags = t->trace->sampled ? 1 : 0;
    }
    t->header = Encode(h);
    ucp_request_param_t param{};
    param.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    param.cb.send = &Impl::OnDataSent;
    param.user_data = t;
    param.flags =
        UCP_AM_SEND_FLAG_REPLY |
        (t->buffer.size <= options_.eager_limit ? UCP_AM_SEND_FLAG_EAGER : UCP_AM_SEND_FLAG_RNDV);
    void* request = ucp_am_send_nbx(t->peer->ep, kUcxData, t->header.data(), t->header.size(),
                                    t->buffer.data, t->buffer.size, &param);
    if (UCS_PTR_IS_ERR(request)) {
      FinishOutgoing(t, UcsError("send failed", UCS_PTR_STATUS(request)));
    } else if (request != nullptr) {
      t->request = request;
    }
  }

  static void OnDataSent(void* request, ucs_status_t status, void* user_data) {
    Outgoing* t = static_cast<Outgoing*>(user_data);
    Impl* self = t->impl;
    t->request = nullptr;
    ucp_request_free(request);
    if (t->finished) {
      self->EraseOutgoing(t);
    } else if (status != UCS_OK) {
      self->FinishOutgoing(t, UcsError("send failed", status));
    }
    // On success the transfer waits for the receiver's REPLY.
  }

  void SendCancel(Outgoing* t) {
    if (t->peer == nullptr || t->peer->failed) return;
    auto msg = std::make_unique<ControlMessage>();
    msg->header = Encode(CancelHeader{id_, t->id});
    SendControl(t->peer->ep, kUcxCancel, std::move(msg));
  }

  void SendControl(ucp_ep_h ep, unsigned am, std::unique_ptr<ControlMessage> msg) {
    ucp_request_param_t param{};
    param.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    param.cb.send = &Impl::OnControlSent;
    param.flags = UCP_AM_SEND_FLAG_EAGER;
    ControlMessage* raw = msg.get();
    param.user_data = this;
    void* request = ucp_am_send_nbx(ep, am, raw->header.data(), raw->header.size(),
                                    raw->text.data(), raw->text.size(), &param);
    if (request != nullptr && !UCS_PTR_IS_ERR(request)) control_.emplace(request, std::move(msg));
  }

  static void OnControlSent(void* request, ucs_status_t status, void* user_data) {
    Impl* self = static_cast<Impl*>(user_data);
    self->control_.erase(request);  // best effort: a control message to a dead peer is moot
    ucp_request_free(request);
  }

  // Calls `done` exactly once; the record (and the caller's buffer) is released as soon as UCX
  // no longer references it.
  void FinishOutgoing(Outgoing* t, const absl::Status& status) {
    if (t->finished) return;
    t->finished = true;
    if (status.ok()) {
      ++metrics_.transfers_sent;
      metrics_.bytes_sent += t->buffer.size;
      metrics_.RecordLatency(absl::ToDoubleMilliseconds(absl::Now() - t->start));
    } else {
      metrics_.RecordFailure(status);
    }
    auto done = std::move(t->done);
    if (t->request != nullptr) {
      ucp_request_cancel(worker_.get(), t->request);  // OnDataSent erases the record
    } else {
      EraseOutgoing(t);
    }
    if (done) done(status);
  }

  void EraseOutgoing(Outgoing* t) {
    const bool counted = !t->abandoned;
    if (outgoing_.erase(t->id) > 0 && counted) --open_;
  }

  static ucs_status_t OnReplyAm(void* arg, const void* header, size_t header_length, void* data,
                                size_t length, const ucp_am_recv_param_t* param) {
    Impl* self = static_cast<Impl*>(arg);
    // A rendezvous descriptor not received is dropped by UCX when the callback returns UCS_OK.
    const std::optional<ReplyHeader> h = DecodeReplyHeader(header, header_length);
    if (!h.has_value() || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) return UCS_OK;
    auto it = self->outgoing_.find(h->id);
    if (it == self->outgoing_.end() || it->second->finished) return UCS_OK;
    const std::string text(static_cast<const char*>(data), length);
    const auto code = static_cast<absl::StatusCode>(h->code);
    self->FinishOutgoing(it->second.get(), code == absl::StatusCode::kOk
                                               ? absl::OkStatus()
                                               : absl::Status(code, text));
    return UCS_OK;
  }

  // --- receiving ---

  static ucs_status_t OnDataAm(void* arg, const void* header, size_t header_length, void* data,
                               size_t length, const ucp_am_recv_param_t* param) {
    static_cast<Impl*>(arg)->ReceiveData(header, header_length, data, length, param);
    return UCS_OK;
  }

  void ReceiveData(const void* header, size_t header_length, void* data, size_t length,
                   const ucp_am_recv_param_t* param) {
    const bool rndv = param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
    const ucp_ep_h reply_ep =
        (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? param->reply_ep : nullptr;
    // Returning without receiving a rendezvous descriptor drops it (UCX releases it when the
    // callback returns); releasing it here instead crashes UCX 1.13.
    auto refuse = [&](const IncomingTransfer& info, const absl::Status& status) {
      if (reply_ep != nullptr) Reply(reply_ep, info.id, status);
      metrics_.RecordFailure(status);
      if (callbacks_.on_failed) callbacks_.on_failed(info, status);
    };
    const std::optional<DataHeader> decoded = DecodeDataHeader(header, header_length);
    if (!decoded.has_value()) return;  // not ours; no transfer to answer
    const DataHeader& h = *decoded;
    IncomingTransfer info{h.sender, h.id, h.size};
    info.started = absl::Now();
    if (h.flags & DataHeader::kHasTrace) {
      info.trace = TraceContext{
          .trace_id = h.trace_id, .span_id = h.span_id, .sampled = (h.trace_flags & 1) != 0};
    }
    if (h.size != length) return refuse(info, absl::InvalidArgumentError("transfer size mismatch"));
    if (h.size > options_.max_receive_bytes) {
      return refuse(info, absl::ResourceExhaustedError(
                              absl::StrCat("transfer of ", h.size, " bytes exceeds the ",
                                           options_.max_receive_bytes, "-byte limit")));
    }
    const IncomingKey key{h.sender, h.id};
    if (incoming_.count(key))
      return refuse(info, absl::InvalidArgumentError("duplicate transfer id"));
    auto owned = std::make_unique<Incoming>();
    Incoming* t = owned.get();
    t->impl = this;
    t->info = info;
    t->crc = h.crc;
    t->has_crc = h.flags & DataHeader::kHasChecksum;
    t->reply_ep = reply_ep;
    t->sender_pid = h.host == HostId() ? h.sender_pid : 0;
    t->deadline = absl::Now() + absl::Milliseconds(h.timeout_ms);
    incoming_.emplace(key, std::move(owned));
    ++open_;
    // on_start may refuse, or cancel the transfer (CancelReceive runs inline here and erases the
    // record, so look it up again).
    absl::Status accepted = callbacks_.on_start ? callbacks_.on_start(info) : absl::OkStatus();
    if (incoming_.find(key) == incoming_.end()) return;
    if (accepted.ok()) {
      if (callbacks_.allocate) {
        absl::StatusOr<ByteBuffer> buffer = callbacks_.allocate(h.size);
        if (buffer.ok() && buffer->size() != h.size) {
          buffer = absl::InternalError("allocate returned a buffer of the wrong size");
        }
        if (buffer.ok()) {
          t->buffer = std::move(*buffer);
        } else {
          accepted = buffer.status();
        }
      } else {
        try {
          t->buffer = ByteBuffer(h.size);
        } catch (const std::bad_alloc&) {
          accepted = absl::ResourceExhaustedError("receiver is out of memory");
        }
      }
    }
    if (!accepted.ok()) {
      FinishIncoming(t, accepted);
      return;
    }
    if (!rndv) {
      CopyInto(t->buffer, static_cast<const uint8_t*>(data));
      CompleteIncoming(t);
      return;
    }
    ucp_request_param_t rparam{};
    rparam.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    rparam.cb.recv_am = &Impl::OnDataReceived;
    rparam.user_data = t;
    void* target = t->buffer.data();
    size_t count = length;  // bytes, or for an IOV its entries
    if (t->buffer.segmented()) {
      for (const ByteBuffer::Segment& s : t->buffer.segments()) t->iov.push_back({s.data, s.size});
      rparam.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
      rparam.datatype = ucp_dt_make_iov();
      target = t->iov.data();
      count = t->iov.size();
    }
    void* request = ucp_am_recv_data_nbx(worker_.get(), data, target, count, &rparam);
    if (UCS_PTR_IS_ERR(request)) {
      FinishIncoming(t, UcsError("receive failed", UCS_PTR_STATUS(request)));
    } else if (request == nullptr) {
      CompleteIncoming(t);
    } else {
      t->request = request;
    }
  }

  static void OnDataReceived(void* request, ucs_status_t status, size_t length, void* user_data) {
    Incoming* t = static_cast<Incoming*>(user_data);
    Impl* self = t->impl;
    t->request = nullptr;
    ucp_request_free(request);
    if (t->finished) {
      self->EraseIncoming(t);
    } else if (status != UCS_OK) {
      self->FinishIncoming(t, absl::UnavailableError(absl::StrCat("receive failed (sender gone?): ",
                                                                  ucs_status_string(status))));
    } else {
      self->CompleteIncoming(t);
    }
  }

  // All bytes are here: check the transport checksum, then the content, then hand over.
  void CompleteIncoming(Incoming* t) {
    absl::Status status;
    if (t->has_crc && ChecksumOf(t->buffer) != t->crc) {
      status = absl::DataLossError("transfer checksum mismatch");
    } else if (callbacks_.verify) {
      status = callbacks_.verify(t->info, t->buffer);
    }
    if (!status.ok()) {
      FinishIncoming(t, status);
      return;
    }
    t->finished = true;
    ++metrics_.transfers_received;
    metrics_.bytes_received += t->info.size;
    // The acknowledgement follows the hand-over: a sender told OK can count on the receiver
    // holding the data (a decode worker's budget check for the next bundle sees this one).
    const ucp_ep_h reply_ep = t->reply_ep;
    const IncomingTransfer info = t->info;
    ByteBuffer data = std::move(t->buffer);
    EraseIncoming(t);
    if (callbacks_.on_received) callbacks_.on_received(info, std::move(data));
    if (reply_ep != nullptr) Reply(reply_ep, info.id, absl::OkStatus());
  }

  // Ends a receive without data: tells the sender (unless it asked for this), frees the buffer
  // once UCX releases it, reports.
  void FinishIncoming(Incoming* t, const absl::Status& status, bool tell_sender = true) {
    if (t->finished) return;
    t->finished = true;
    metrics_.RecordFailure(status);
    if (tell_sender && t->reply_ep != nullptr) Reply(t->reply_ep, t->info.id, status);
    const IncomingTransfer info = t->info;
    if (t->request != nullptr) {
      ucp_request_cancel(worker_.get(), t->request);  // OnDataReceived erases the record
    } else {
      EraseIncoming(t);
    }
    if (callbacks_.on_failed) callbacks_.on_failed(info, status);
  }

  void EraseIncoming(Incoming* t) {
    if (incoming_.erase({t->info.sender, t->info.id}) > 0) --open_;
  }

  void Reply(ucp_ep_h ep, uint64_t id, const absl::Status& status) {
    auto msg = std::make_unique<ControlMessage>();
    msg->header = Encode(ReplyHeader{id, static_cast<int32_t>(status.code())});
    msg->text = std::string(status.message());
    SendControl(ep, kUcxReply, std::move(msg));
  }

  static ucs_status_t OnCancelAm(void* arg, const void* header, size_t header_length, void* data,
                                 size_t length, const ucp_am_recv_param_t* param) {
    Impl* self = static_cast<Impl*>(arg);
    const std::optional<CancelHeader> h = DecodeCancelHeader(header, header_length);
    if (!h.has_value()) return UCS_OK;
    auto it = self->incoming_.find({h->sender, h->id});
    if (it != self->incoming_.end()) {
      self->FinishIncoming(it->second.get(),
                           absl::CancelledError("transfer cancelled by the sender"),
                           /*tell_sender=*/false);
    }
    return UCS_OK;
  }

  // Expires overdue transfers on both sides; returns the time until the next deadline.
  absl::Duration ExpireDeadlines() {
    const absl::Time now = absl::Now();
    if (now >= next_liveness_check_) {
      CheckPeerProcesses();
      next_liveness_check_ = now + absl::Milliseconds(200);
    }
    absl::Time next = std::min(now + absl::Seconds(1), next_liveness_check_);
    std::vector<Outgoing*> late_out;
    for (auto& [id, t] : outgoing_) {
      if (t->finished) continue;
      if (t->deadline <= now) {
        late_out.push_back(t.get());
      } else {
        next = std::min(next, t->deadline);
      }
    }
    for (Outgoing* t : late_out) {
      SendCancel(t);
      FinishOutgoing(t, absl::DeadlineExceededError("transfer deadline exceeded (sender)"));
    }
    std::vector<Incoming*> late_in;
    for (auto& [key, t] : incoming_) {
      if (t->finished) continue;
      if (t->deadline <= now) {
        late_in.push_back(t.get());
      } else {
        next = std::min(next, t->deadline);
      }
    }
    for (Incoming* t : late_in) {
      FinishIncoming(t, absl::DeadlineExceededError("transfer deadline exceeded (receiver)"));
    }
    return next - now;
  }

  // Same-host peers whose process exited fail their transfers, whatever UCX noticed.
  void CheckPeerProcesses() {
    std::vector<Peer*> dead;
    for (auto& [address, peer] : peers_) {
      if (!peer->failed && ProcessGone(peer->pid)) dead.push_back(peer.get());
    }
    for (Peer* peer : dead) PeerFailed(peer, absl::UnavailableError("peer process exited"));
    std::vector<Incoming*> orphaned;
    for (auto& [key, t] : incoming_) {
      if (!t->finished && ProcessGone(t->sender_pid)) orphaned.push_back(t.get());
    }
    for (Incoming* t : orphaned) {
      FinishIncoming(t, absl::UnavailableError("sender process exited"), /*tell_sender=*/false);
    }
  }

  const UcxTransportOptions options_;
  const bool ucx_detects_failures_ = UcxDetectsPeerFailure(options_.tls);
  absl::Time next_liveness_check_ = absl::InfinitePast();
  absl::Time last_progress_ = absl::InfinitePast();
  const ReceiveCallbacks callbacks_;
  uint64_t id_ = 0;
  std::string address_;
  TransferMetrics metrics_;
  std::atomic<uint64_t> next_id_{0};
  std::atomic<size_t> open_{0};
  std::atomic<bool> stopping_{false};

  // Owned by the progress thread (declared before the worker so they outlive no UCX object).
  UcpContextPtr context_;
  UcpWorkerPtr worker_;
  std::map<std::string, std::unique_ptr<Peer>> peers_;
  std::vector<std::unique_ptr<Peer>> retired_peers_;
  std::atomic<size_t> peers_held_{0};  // in peers_ and retired_peers_
  std::vector<Peer*> closing_;
  std::vector<std::pair<void*, Peer*>> close_requests_;
  std::map<uint64_t, std::unique_ptr<Outgoing>> outgoing_;
  std::map<IncomingKey, std::unique_ptr<Incoming>> incoming_;
  std::map<void*, std::unique_ptr<ControlMessage>> control_;

  absl::Mutex mu_;
  std::deque<std::function<void()>> commands_ ABSL_GUARDED_BY(mu_);
  int wake_fd_ = -1;
  int epoll_fd_ = -1;
  std::thread thread_;
  std::atomic<std::thread::id> loop_thread_id_{};
};

UcxTransport::UcxTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UcxTransport::~UcxTransport() = default;

absl::StatusOr<std::unique_ptr<UcxTransport>> UcxTransport::Create(
    const UcxTransportOptions& options, ReceiveCallbacks callbacks) {
  auto impl = std::make_unique<Impl>(options, std::move(callbacks));
  if (absl::Status st = impl->Init(); !st.ok()) return st;
  return std::unique_ptr<UcxTransport>(new UcxTransport(std::move(impl)));
}

const std::string& UcxTransport::address() const { return impl_->address(); }
uint64_t UcxTransport::id() const { return impl_->id(); }
const TransferMetrics& UcxTransport::metrics() const { return impl_->metrics(); }
size_t UcxTransport::peers_held() const { return impl_->peers_held(); }

size_t UcxTransport::open_transfers() const { return impl_->open_transfers(); }

uint64_t UcxTransport::Send(const std::string& peer_address, SendBuffer buffer,
                            absl::Duration timeout, std::function<void(absl::Status)> done,
                            std::optional<TraceContext> trace) {
  return impl_->Send(peer_address, std::move(buffer), timeout, std::move(done), std::move(trace));
}

void UcxTransport::CancelSend(uint64_t id) { impl_->CancelSend(id); }
void UcxTransport::CancelReceive(uint64_t sender, uint64_t id) { impl_->CancelReceive(sender, id); }

}  // namespace yoco
