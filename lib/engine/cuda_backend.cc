// The forward pass on the GPU, step for step the CPU backend's: rows of all segments stacked for
// every product, mixers per segment over their device state. Every per-segment descriptor the
// kernels read (tokens, positions, retention tasks, attention queries, row copies) is built on
// the host and uploaded in one copy per call.
#include "lib/engine/cuda_backend.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/rope.h"
#include "kernels/cuda/rms_norm.h"
#include "lib/status/status_macros.h"

namespace yoco {
namespace {

std::atomic<uint64_t> next_backend_id{1};

template <typename T>
absl::Status Reserve(DeviceBuffer& b, int64_t n) {
  return b.Reserve(static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(T));
}

}  // namespace

// A state's copy on the device. Valid for a host state while `position` matches it.
struct CudaBackend::Sequence {
  uint64_t backend_id = 0;
  int64_t position = 0;
  DeviceBuffer self_states;  // [layers, self_state_floats]
  DeviceBuffer k, v;         // [capacity, kv_dim]
  int64_t capacity = 0;
  bool host_states_current = true;
};

absl::StatusOr<std::vector<std::string>> CudaDevices() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    return absl::UnavailableError(
        absl::StrCat("no CUDA device: ", e == cudaSuccess ? "none found" : cudaGetErrorString(e)));
  }
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    out.push_back(absl::StrCat(i, ": ", p.name, ", sm_", p.major, p.minor, ", ",
                               p.totalGlobalMem >> 20, " MiB, ", p.multiProcessorCount, " SMs"));
  }
  return out;
}

CudaBackend::CudaBackend(std::shared_ptr<const Model> model, CudaBackendOptions options)
    : model_(std::move(model)), config_(model_->config()), options_(options) {}

CudaBackend::~CudaBackend() {
  ClearGraphs();
  for (const TimedSpan& t : spans_) free_events_.insert(free_events_.end(), {t.start, t.stop});
  for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
  if (call_start_ != nullptr) cudaEventDestroy(call_start_);
  if (call_stop_ != nullptr) cudaEventDestroy(call_stop_);
  if (blas_ != nullptr) cublas_->destroy(blas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(std::shared_ptr<const Model> model,
                                                                 CudaBackendOptions options) {
  std::unique_ptr<CudaBackend> b(new CudaBackend(std::move(model), options));
  RETURN_IF_ERROR(b->Init());
  return b;
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::CreateRandom(const ModelConfig& config,
                                                                       bool bf16, uint64_t seed,
                                                                       CudaBackendOptions options) {
  RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<CudaBackend> b(
      new CudaBackend(std::make_shared<const Model>(config, nullptr), options));
  b->random_bf16_ = bf16;
  b->random_seed_ = seed;
  RETURN_IF_ERROR(b->Init());
  return b;
}

absl::Status CudaBackend::Init() {
  id_ = next_backend_id.fetch_add(1);
  if (config_.kv_dtype != KvDtype::kF32) {
    return absl::UnimplementedError("bf16 K/V runs on the CPU backend only (--kv-dtype f32)");
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    return absl::UnavailableError("no CUDA device");
  }
  if (options_.device < 0 || options_.device >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA device ", options_.device, " does not exist (", count, " found)"));
  }
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(options_.device), "cudaSetDevice"));
  cudaDeviceProp p;
  RETURN_IF_ERROR(CudaStatus(cudaGetDeviceProperties(&p, options_.device), "device properties"));
  sm_count_ = p.multiProcessorCount;
  device_name_ = absl::StrCat(p.name, " (device ", options_.device, ", sm_", p.major, p.minor, ")");
  if (config_.self_attention() == SelfAttentionKind::kGatedRetention &&
      !cuda::RetentionChunkwiseFits(config_.self_head_dim())) {
    return absl::InvalidArgumentError(absl::StrCat("self head dim ", config_.self_head_dim(),
                                                   " is too large for the CUDA retention kernel"));
  }
  const int group = config_.n_attn_heads / config_.n_attn_kv_heads;
  if (group * config_.cross_head_dim() > cuda::kMaxGroupWidth ||
      config_.self_head_dim() > cuda::kMaxGroupWidth || config_.cross_head_dim() % 4 != 0 ||
      config_.self_head_dim() % 4 != 0) {
    return absl::InvalidArgumentError(
        "the CUDA attention kernel needs head dims that are multiples of 4 and at most 2048 "
        "query-head floats per KV head");
  }
  RETURN_IF_ERROR(
      CudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
  ASSIGN_OR_RETURN(cublas_, CublasLibrary::Get());
  if (cublas_->create(&blas_) != CUBLAS_STATUS_SUCCESS) {
    blas_ = nullptr;
    return absl::InternalError("cublasCreate failed");
  }
  cublas_->set_stream(blas_, stream_);
  if (model_->has_weights()) {
    ASSIGN_OR_RETURN(weights_, CudaWeights::Upload(config_, model_->weights()));
  } else {
    ASSIGN_OR_RETURN(weights_, CudaWeights::Random(config_, random_bf16_, random_seed_, 0.02f));
  }
  const auto self_freq = cpu::RopeInverseFrequencies(config_.self_head_dim(), config_.rope_theta);
  const auto cross_freq = cpu::RopeInverseFrequencies(config_.cross_head_dim(), config_.rope_theta);
  RETURN_IF_ERROR(Reserve<float>(self_inv_freq_, self_freq.size()));
  RETURN_IF_ERROR(Reserve<float>(cross_inv_freq_, cross_freq.size()));
  RETURN_IF_ERROR(CudaStatus(cudaMemcpy(self_inv_freq_.get(), self_freq.data(),
                                        self_freq.size() * 4, cudaMemcpyHostToDevice),
                             "upload"));
  return CudaStatus(cudaMemcpy(cross_inv_freq_.get(), cross_freq.data(), cross_freq.size() * 4,
                               cudaMemcpyHostToDevice),
                    "upload");
}

absl::StatusOr<CudaBackend::Sequence*> CudaBackend::DeviceSequence(SequenceState* state,
                                                                   int64_t new_rows) {
  const int64_t KV = config_.kv_dim();
  auto seq = std::static_pointer_cast<Sequence>(state->device.handle());
  if (seq == nullptr || seq->backend_id != id_ || seq->position != state->position) {
    seq = std::make_shared<Sequence>();
    seq->backend_id = id_;
    seq->position = state->position;
    const int64_t floats = config_.self_state_floats();
    RETURN_IF_ERROR(Reserve<float>(seq->self_states, floats * config_.n_self_layers()));
    for (int l = 0; l < config_.n_self_layers(); ++l) {
      RETURN_IF_ERROR(CudaStatus(
          cudaMemcpy(seq->self_states.get<float>() + l * floats, state->self_states[l].data(),
                     floats * sizeof(float), cudaMemcpyHostToDevice),
          "state upload"));
    }
    seq->capacity = std::max<int64_t>(state->position + new_rows, 256);
    RETURN_IF_ERROR(Reserve<float>(seq->k, seq->capacity * KV));
    RETURN_IF_ERROR(Reserve<float>(seq->v, seq->capacity * KV));
    if (state->position > 0) {
      // The host keeps keys in lanes and values in strips (KvLayout); the device keeps rows.
      const std::vector<float> k_rows = state->shared_k.ToF32();
      const std::vector<float> v_rows = state->shared_v.ToF32();
      RETURN_IF_ERROR(CudaStatus(cudaMemcpy(seq->k.get(), k_rows.data(),
                                            k_rows.size() * sizeof(float), cudaMemcpyHostToDevice),
                                 "K upload"));
      RETURN_IF_ERROR(CudaStatus(cudaMemcpy(seq->v.get(), v_rows.data(),
                                            v_rows.size() * sizeof(float), cudaMemcpyHostToDevice),
                                 "V upload"));
    }
    state->device.set_handle(seq);
  }
  const int64_t needed = seq->position + new_rows;
  if (needed > seq->capacity) {
    const int64_t capacity = std::max(needed, 2 * seq->capacity);
    DeviceBuffer k, v;
    RETURN_IF_ERROR(Reserve<float>(k, capacity * KV));
    RETURN_IF_ERROR(Reserve<float>(v, capacity * KV));
    const size_t bytes = seq->position * KV * sizeof(float);
    RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(k.get(), seq->k.get(), bytes, cudaMemcpyDeviceToDevice, stream_), "grow"));
    RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(v.get(), seq->v.get(), bytes, cudaMemcpyDeviceToDevice, stream_), "grow"));
    RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), "grow"));
    seq->k = std::move(k);
    seq->v = std::move(v);
    seq->capacity = capacity;
  }
  return seq.get();
}

template <typename Work>
absl::Status CudaBackend::Timed(double CudaProfile::*kind, Work work) {
  if (!options_.profile) return work();
  auto event = [&] {
    cudaEvent_t e = nullptr;
    if (!free_events_.empty()) {
      e = free_events_.back();
      free_events_.pop_back();
    } else {
      cudaEventCreate(&e);
    }
    return e;
  };
  TimedSpan span{kind, event(), event()};
  cudaEventRecord(span.start, stream_);
  absl::Status s = work();
  cudaEventRecord(span.stop, stream_);
  spans_.push_back(span);
  return s;
}

void CudaBackend::CollectProfile() {
  float call_ms = 0;
  cudaEventElapsedTime(&call_ms, call_start_, call_stop_);
  double timed = 0;
  for (const TimedSpan& t : spans_) {
    float ms = 0;
    cudaEventElapsedTime(&ms, t.start, t.stop);
    profile_.*t.kind += ms;
    timed += ms;
    free_events_.insert(free_events_.end(), {t.start, t.stop});
  }
  spans_.clear();
  profile_.other_gpu_ms += std::max(0.0, call_ms - timed);
}

absl::Status CudaBackend::Forward(absl::Span<const ForwardSegment> segments,
                                  std::vector<float>* logits) {
  RETURN_IF_ERROR(ValidateSegments(config_, segments));
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(options_.device), "cudaSetDevice"));
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status s = RunLayers(segments, logits);
  if (options_.profile) {
    profile_.total_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    profile_.calls += 1;
    if (s.ok()) {
      CollectProfile();
    } else {
      cudaStreamSynchronize(stream_);
      for (const TimedSpan& t : spans_) free_events_.insert(free_events_.end(), {t.start, t.stop});
      spans_.clear();
    }
  }
  if (!s.ok()) {
    // Device states may be half advanced: the next call starts again from the host states.
    // Where those are stale (lazy_host_states) the sequence is lost; a negative position makes
    // every later call refuse it rather than continue from the stale copy.
    cudaStreamSynchronize(stream_);
    for (const ForwardSegment& seg : segments) {
      auto seq = std::static_pointer_cast<Sequence>(seg.state->device.handle());
      if (seq != nullptr && seq->backend_id == id_ && !seq->host_states_current) {
        seg.state->position = -1;
      }
      seg.state->device.Reset();
    }
  }
  return s;
}

absl::Status CudaBackend::RunLayers(absl::Span<const ForwardSegment> segments,
                                    std::vector<float>* logits) {
  const auto host_start = std::chrono::steady_clock::now();
  const int64_t D = config_.dim;
  const int64_t V = config_.vocab_size;
  rows_.clear();
  row_tokens_.clear();
  out_rows_.clear();
  segment_begin_.clear();
  sequences_.clear();
  max_segment_rows_ = 0;
  max_keys_ = 0;
  max_position_ = 0;
  for (size_t s = 0; s < segments.size(); ++s) {
    const ForwardSegment& seg = segments[s];
    segment_begin_.push_back(static_cast<int64_t>(rows_.size()));
    const int64_t t_count = static_cast<int64_t>(seg.tokens.size());
    for (int64_t t = 0; t < t_count; ++t) {
      const bool wants =
          seg.logits == LogitsMode::kAll || (seg.logits == LogitsMode::kLast && t == t_count - 1);
      if (wants) {
        out_rows_.push_back(static_cast<int64_t>(rows_.size()));
        max_keys_ = std::max(max_keys_, seg.state->position + t + 1);
      }
      rows_.push_back({static_cast<int>(s), seg.state->position + t});
      row_tokens_.push_back(seg.tokens[t]);
      max_position_ = std::max(max_position_, seg.state->position + t);
    }
    max_segment_rows_ = std::max(max_segment_rows_, t_count);
    if (seg.state->position + t_count > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError("position beyond the CUDA backend's 2^31 limit");
    }
    ASSIGN_OR_RETURN(Sequence * seq, DeviceSequence(seg.state, t_count));
    sequences_.push_back(seq);
  }
  // Attention plans its key ranges for a length rounded up to a power of two, so consecutive
  // decode steps launch the same grids and can replay one CUDA graph.
  max_keys_ = std::max<int64_t>(256, std::bit_ceil(static_cast<uint64_t>(max_keys_)));
  window_keys_ = config_.sliding_window
                     ? std::min<int64_t>(*config_.sliding_window,
                                         std::bit_ceil(static_cast<uint64_t>(max_position_ + 1)))
                     : 0;
  const int64_t R = static_cast<int64_t>(rows_.size());
  const int64_t Q = static_cast<int64_t>(out_rows_.size());
  const int64_t F = config_.hidden_dim;
  const int64_t KV = config_.kv_dim();
  for (DeviceBuffer* b : {&h_, &a_, &q_, &k_, &v_, &g_, &o_})
    RETURN_IF_ERROR(Reserve<float>(*b, R * D));
  RETURN_IF_ERROR(Reserve<float>(gt_, R * config_.n_self_heads));
  RETURN_IF_ERROR(Reserve<float>(up_, R * F));
  RETURN_IF_ERROR(Reserve<float>(gate_, R * F));
  RETURN_IF_ERROR(Reserve<float>(kk_, R * KV));
  RETURN_IF_ERROR(Reserve<float>(vv_, R * KV));
  RETURN_IF_ERROR(Reserve<float>(hx_, Q * D));
  RETURN_IF_ERROR(Reserve<float>(logits_, Q * V));
  RETURN_IF_ERROR(UploadDescriptors());
  if (options_.profile) {
    if (call_start_ == nullptr) {
      cudaEventCreate(&call_start_);
      cudaEventCreate(&call_stop_);
    }
    profile_.host_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host_start)
            .count();
    cudaEventRecord(call_start_, stream_);
  }

  RETURN_IF_ERROR(RunOnDevice(segments));
  logits->resize(Q * V);
  if (options_.profile) cudaEventRecord(call_stop_, stream_);
  RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), "forward"));
  const auto copy_start = std::chrono::steady_clock::now();
  if (Q > 0) {
    RETURN_IF_ERROR(staging_.Reserve(Q * V * sizeof(float)));
    RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(staging_.get(), logits_.get(), Q * V * 4, cudaMemcpyDeviceToHost, stream_),
        "logits download"));
    RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), "logits download"));
    std::memcpy(logits->data(), staging_.get(), Q * V * 4);
  }
  RETURN_IF_ERROR(CopyBack(segments));
  if (options_.profile) {
    profile_.host_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - copy_start)
            .count();
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::EnqueueLayers() {
  const int64_t D = config_.dim;
  const int64_t R = static_cast<int64_t>(rows_.size());
  const int64_t Q = static_cast<int64_t>(out_rows_.size());
  // Embedding, scaled by sqrt(dim) in fp32 as the reference.
  const float embed_scale = static_cast<float>(std::sqrt(static_cast<double>(D)));
  RETURN_IF_ERROR(CudaStatus(
      cuda::EmbedRows(weights_->embed.data.get(), weights_->embed.bf16, static_cast<int>(D),
                      d_tokens_, R, embed_scale, h_.get<float>(), stream_),
      "embedding"));
  for (int l = 0; l < config_.n_self_layers(); ++l) RETURN_IF_ERROR(SelfLayer(l));
  RETURN_IF_ERROR(AppendSharedKv());
  if (Q == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CudaStatus(cuda::GatherRows(h_.get<float>(), D, d_out_rows_, Q,
                                              static_cast<int>(D), hx_.get<float>(), D, stream_),
                             "gather"));
  for (int l = 0; l < config_.n_cross_layers(); ++l) RETURN_IF_ERROR(CrossLayer(l));
  RETURN_IF_ERROR(CudaStatus(
      cuda::RmsNorm(hx_.get<float>(), Q, static_cast<int>(D), weights_->final_norm.get<float>(),
                    static_cast<float>(config_.norm_eps), a_.get<float>(), stream_),
      "final norm"));
  return Linear(a_.get<float>(), Q, weights_->output, logits_.get<float>(), false);
}

std::vector<const void*> CudaBackend::BufferAddresses() const {
  std::vector<const void*> out;
  for (const DeviceBuffer* b :
       {&h_, &a_, &q_, &k_, &v_, &g_, &gt_, &o_, &up_, &gate_, &kk_, &vv_, &hx_, &logits_, &x_bf16_,
        &attention_scratch_, &retention_scratch_, &device_descriptors_}) {
    out.push_back(b->get());
  }
  return out;
}

void CudaBackend::ClearGraphs() {
  for (auto& [key, graph] : graphs_) {
    if (graph.exec != nullptr) cudaGraphExecDestroy(graph.exec);
  }
  graphs_.clear();
}

absl::Status CudaBackend::RunOnDevice(absl::Span<const ForwardSegment> segments) {
  // Decode steps (one token per segment) replay a CUDA graph of the whole pass: hundreds of
  // small launches become one. A step's key is everything that shapes its launches; the first
  // step of a key runs directly (it sizes every buffer, so nothing is allocated while
  // capturing), the second is captured.
  bool decode_only = !options_.profile && !graphs_failed_ && options_.graphs;
  std::string key;
  for (const ForwardSegment& seg : segments) {
    decode_only = decode_only && seg.tokens.size() == 1;
    key.push_back(static_cast<char>('0' + static_cast<int>(seg.logits)));
  }
  if (!decode_only) return EnqueueLayers();
  absl::StrAppend(&key, ":", max_keys_, ":", window_keys_);
  Graph& graph = graphs_[key];
  const std::vector<const void*> buffers = BufferAddresses();
  if (graph.exec != nullptr && graph.buffers != buffers) {
    // A larger call moved a buffer the graph reads or writes: capture it again (buffers only
    // grow, so this shape's sizes still fit and the capture allocates nothing).
    cudaGraphExecDestroy(graph.exec);
    graph.exec = nullptr;
  }
  if (graph.exec == nullptr && graph.runs++ >= 1) {
    graph.buffers = buffers;
    cudaGraph_t captured = nullptr;
    absl::Status s = CudaStatus(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
                                "graph capture");
    if (s.ok()) {
      s = EnqueueLayers();
      const cudaError_t end = cudaStreamEndCapture(stream_, &captured);
      if (s.ok()) s = CudaStatus(end, "graph capture");
    }
    if (s.ok()) s = CudaStatus(cudaGraphInstantiate(&graph.exec, captured, 0), "graph");
    if (captured != nullptr) cudaGraphDestroy(captured);
    if (!s.ok()) {
      // Capture is an optimisation: run this backend without graphs from now on.
      cudaGetLastError();
      graph.exec = nullptr;
      graphs_failed_ = true;
      graph_error_ = std::string(s.message());
      return EnqueueLayers();
    }
  }
  if (graph.exec == nullptr) return EnqueueLayers();
  return CudaStatus(cudaGraphLaunch(graph.exec, stream_), "graph launch");
}

absl::Status CudaBackend::UploadDescriptors() {
  const int64_t R = static_cast<int64_t>(rows_.size());
  const int64_t Q = static_cast<int64_t>(out_rows_.size());
  const int S = static_cast<int>(sequences_.size());
  const int64_t D = config_.dim;
  const int64_t KV = config_.kv_dim();
  const int layers = config_.n_self_layers();
  const bool gret = config_.self_attention() == SelfAttentionKind::kGatedRetention;
  const int64_t floats = config_.self_state_floats();

  std::vector<int32_t> positions, out_positions;
  std::vector<cuda::RetentionTask> chunk, step;
  std::vector<cuda::AttentionQuery> window, cross;
  std::vector<cuda::RowCopy> ring, kv;
  for (int64_t r = 0; r < R; ++r) positions.push_back(static_cast<int32_t>(rows_[r].position));
  for (int64_t i = 0; i < Q; ++i) {
    const Row& row = rows_[out_rows_[i]];
    out_positions.push_back(static_cast<int32_t>(row.position));
    const Sequence* seq = sequences_[row.segment];
    cuda::AttentionQuery q;
    q.row = i;
    q.first = 0;
    q.n = row.position + 1;
    q.old_keys = seq->k.get<float>();
    q.old_values = seq->v.get<float>();
    q.split = std::numeric_limits<int64_t>::max();
    cross.push_back(q);
  }
  chunk_tasks_ = step_tasks_ = 0;
  std::vector<cuda::RetentionChunk> chunk_refs;
  for (int l = 0; l < layers; ++l) {
    int64_t chunk_first = 0;
    for (int s = 0; s < S; ++s) {
      const int64_t r0 = segment_begin_[s];
      const int64_t T = (s + 1 < S ? segment_begin_[s + 1] : R) - r0;
      float* state = sequences_[s]->self_states.get<float>() + l * floats;
      const int64_t p0 = sequences_[s]->position;
      if (gret) {
        if (T == 1) {
          step.push_back({r0, T, state, 0});
        } else {
          if (l == 0) {
            const int64_t n = cuda::RetentionChunkCount(T);
            for (int64_t c = 0; c < n; ++c)
              chunk_refs.push_back({static_cast<int32_t>(chunk.size()), static_cast<int32_t>(c)});
          }
          chunk.push_back({r0, T, state, chunk_first});
          chunk_first += cuda::RetentionChunkCount(T);
        }
        continue;
      }
      const int64_t W = *config_.sliding_window;
      float* ring_k = state;
      float* ring_v = state + W * D;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t p = p0 + t;
        cuda::AttentionQuery q;
        q.row = r0 + t;
        q.first = std::max<int64_t>(0, p - W + 1);
        q.n = p - q.first + 1;
        q.old_keys = ring_k;
        q.old_values = ring_v;
        q.ring = W;
        q.split = p0;
        q.new_keys = k_.get<float>() + r0 * D;
        q.new_values = v_.get<float>() + r0 * D;
        window.push_back(q);
      }
      const int64_t t0 = std::max<int64_t>(0, T - W);
      ring.push_back({k_.get<float>() + (r0 + t0) * D, ring_k, T - t0, p0 + t0, W});
      ring.push_back({v_.get<float>() + (r0 + t0) * D, ring_v, T - t0, p0 + t0, W});
    }
    if (l == 0) {
      chunk_tasks_ = static_cast<int>(chunk.size());
      step_tasks_ = static_cast<int>(step.size());
    }
  }
  for (int s = 0; s < S; ++s) {
    const int64_t r0 = segment_begin_[s];
    const int64_t T = (s + 1 < S ? segment_begin_[s + 1] : R) - r0;
    const Sequence* seq = sequences_[s];
    kv.push_back({kk_.get<float>() + r0 * KV, seq->k.get<float>(), T, seq->position, 0});
    kv.push_back({vv_.get<float>() + r0 * KV, seq->v.get<float>(), T, seq->position, 0});
  }

  // One blob, each array 16-byte aligned.
  descriptors_.clear();
  auto append = [&](const void* data, size_t bytes) {
    const size_t offset = (descriptors_.size() + 15) / 16 * 16;
    descriptors_.resize(offset + bytes);
    if (bytes > 0) std::memcpy(descriptors_.data() + offset, data, bytes);
    return offset;
  };
  const size_t o_tokens = append(row_tokens_.data(), R * 4);
  const size_t o_positions = append(positions.data(), R * 4);
  const size_t o_out_positions = append(out_positions.data(), Q * 4);
  const size_t o_out_rows = append(out_rows_.data(), Q * 8);
  const size_t o_chunk = append(chunk.data(), chunk.size() * sizeof(chunk[0]));
  const size_t o_step = append(step.data(), step.size() * sizeof(step[0]));
  const size_t o_chunk_refs = append(chunk_refs.data(), chunk_refs.size() * sizeof(chunk_refs[0]));
  chunk_count_ = static_cast<int64_t>(chunk_refs.size());
  const size_t o_window = append(window.data(), window.size() * sizeof(window[0]));
  const size_t o_ring = append(ring.data(), ring.size() * sizeof(ring[0]));
  const size_t o_cross = append(cross.data(), cross.size() * sizeof(cross[0]));
  const size_t o_kv = append(kv.data(), kv.size() * sizeof(kv[0]));
  RETURN_IF_ERROR(device_descriptors_.Reserve(descriptors_.size() + 16));
  RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(device_descriptors_.get(), descriptors_.data(),
                                             descriptors_.size(), cudaMemcpyHostToDevice, stream_),
                             "descriptor upload"));
  uint8_t* base = device_descriptors_.get<uint8_t>();
  d_tokens_ = reinterpret_cast<int32_t*>(base + o_tokens);
  d_positions_ = reinterpret_cast<int32_t*>(base + o_positions);
  d_out_positions_ = reinterpret_cast<int32_t*>(base + o_out_positions);
  d_out_rows_ = reinterpret_cast<int64_t*>(base + o_out_rows);
  d_chunk_tasks_ = reinterpret_cast<cuda::RetentionTask*>(base + o_chunk);
  d_step_tasks_ = reinterpret_cast<cuda::RetentionTask*>(base + o_step);
  d_chunks_ = reinterpret_cast<cuda::RetentionChunk*>(base + o_chunk_refs);
  d_window_queries_ = reinterpret_cast<cuda::AttentionQuery*>(base + o_window);
  d_ring_copies_ = reinterpret_cast<cuda::RowCopy*>(base + o_ring);
  d_cross_queries_ = reinterpret_cast<cuda::AttentionQuery*>(base + o_cross);
  d_kv_copies_ = reinterpret_cast<cuda::RowCopy*>(base + o_kv);
  return absl::OkStatus();
}

absl::Status CudaBackend::Linear(const float* x, int64_t m, const DeviceMatrix& w, float* y,
                                 bool accumulate) {
  return Timed(&CudaProfile::linear_ms,
               [&] { return DeviceLinear(blas_, stream_, x, m, w, y, accumulate, &x_bf16_); });
}

absl::Status CudaBackend::FusedLinear(const float* x, int64_t m,
                                      absl::Span<const DeviceLinearOutput> outputs) {
  return Timed(&CudaProfile::linear_ms,
               [&] { return DeviceLinearFused(blas_, stream_, x, m, outputs, &x_bf16_); });
}

absl::Status CudaBackend::SelfLayer(int layer) {
  const DeviceSelfLayer& w = weights_->self_layers[layer];
  const int64_t R = static_cast<int64_t>(rows_.size());
  const int D = config_.dim;
  RETURN_IF_ERROR(
      CudaStatus(cuda::RmsNorm(h_.get<float>(), R, D, w.mixer_norm.get<float>(),
                               static_cast<float>(config_.norm_eps), a_.get<float>(), stream_),
                 "mixer norm"));
  if (config_.self_attention() == SelfAttentionKind::kGatedRetention) {
    RETURN_IF_ERROR(RetentionMixer(layer));
  } else {
    RETURN_IF_ERROR(SlidingWindowMixer(layer));
  }
  return Ffn(w.ffn, w.ffn_norm, h_.get<float>(), R);
}

absl::Status CudaBackend::SelfQkv(const DeviceSelfLayer& w, float key_scale, bool gates) {
  const int64_t R = static_cast<int64_t>(rows_.size());
  const int D = config_.dim;
  const int Hs = config_.n_self_heads;
  const int ds = config_.self_head_dim();
  const DeviceLinearOutput projections[] = {{&w.q, q_.get<float>()},
                                            {&w.k, k_.get<float>()},
                                            {&w.v, v_.get<float>()},
                                            {&w.g, g_.get<float>()},
                                            {&w.gt, gt_.get<float>()}};
  RETURN_IF_ERROR(FusedLinear(a_.get<float>(), R, absl::MakeConstSpan(projections, gates ? 5 : 3)));
  const float* freq = self_inv_freq_.get<float>();
  RETURN_IF_ERROR(CudaStatus(
      cuda::ApplyRope(q_.get<float>(), R, D, Hs, ds, d_positions_, freq, 1.0f, stream_), "rope"));
  return CudaStatus(
      cuda::ApplyRope(k_.get<float>(), R, D, Hs, ds, d_positions_, freq, key_scale, stream_),
      "rope");
}

absl::Status CudaBackend::RetentionMixer(int layer) {
  const DeviceSelfLayer& w = weights_->self_layers[layer];
  const int64_t R = static_cast<int64_t>(rows_.size());
  const int D = config_.dim;
  const int Hs = config_.n_self_heads;
  const int ds = config_.self_head_dim();
  float* q = q_.get<float>();
  float* k = k_.get<float>();
  float* v = v_.get<float>();
  float* g = g_.get<float>();
  float* gt = gt_.get<float>();
  float* o = o_.get<float>();
  const float key_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(ds)));
  RETURN_IF_ERROR(SelfQkv(w, key_scale, /*gates=*/true));
  RETURN_IF_ERROR(CudaStatus(cuda::LogSigmoidDecay(gt, R * Hs, stream_), "decay"));
  const cuda::RetentionShape shape{Hs, ds, D};
  RETURN_IF_ERROR(
      Reserve<float>(retention_scratch_, cuda::RetentionScratchFloats(shape, chunk_count_)));
  RETURN_IF_ERROR(Timed(&CudaProfile::retention_ms, [&] {
    return CudaStatus(
        cuda::GatedRetentionChunkwise(shape, d_chunk_tasks_ + int64_t{layer} * chunk_tasks_,
                                      chunk_tasks_, d_chunks_, chunk_count_, q, k, v, gt, o,
                                      retention_scratch_.get<float>(), stream_),
        "retention");
  }));
  RETURN_IF_ERROR(Timed(&CudaProfile::retention_ms, [&] {
    return CudaStatus(cuda::GatedRetentionStep(shape, d_step_tasks_ + int64_t{layer} * step_tasks_,
                                               step_tasks_, q, k, v, gt, o, stream_),
                      "retention step");
  }));
  // Per-head RMSNorm without weight, the swish gate, then out_proj into the residual.
  RETURN_IF_ERROR(CudaStatus(
      cuda::RmsNorm(o, R * Hs, ds, nullptr, static_cast<float>(config_.norm_eps), o, stream_),
      "head norm"));
  RETURN_IF_ERROR(CudaStatus(cuda::SiluMul(g, o, R * D, stream_), "gate"));
  return Linear(g, R, w.out, h_.get<float>(), /*accumulate=*/true);
}

absl::Status CudaBackend::SlidingWindowMixer(int layer) {
  const DeviceSelfLayer& w = weights_->self_layers[layer];
  const int64_t R = static_cast<int64_t>(rows_.size());
  const int D = config_.dim;
  const int Hs = config_.n_self_heads;
  const int ds = config_.self_head_dim();
  const float* q = q_.get<float>();
  float* o = o_.get<float>();
  RETURN_IF_ERROR(SelfQkv(w, 1.0f, /*gates=*/false));
  const cuda::AttentionShape shape{Hs, Hs, ds, D, D};
  const int64_t W = *config_.sliding_window;
  const int64_t max_keys = window_keys_;
  RETURN_IF_ERROR(Reserve<float>(attention_scratch_,
                                 cuda::AttentionScratchFloats(shape, R, max_keys, sm_count_)));
  RETURN_IF_ERROR(Timed(&CudaProfile::attention_ms, [&] {
    return CudaStatus(cuda::Attention(shape, d_window_queries_ + int64_t{layer} * R, R, max_keys, q,
                                      o, attention_scratch_.get<float>(), sm_count_, stream_),
                      "window attention");
  }));
  const int S = static_cast<int>(sequences_.size());
  RETURN_IF_ERROR(CudaStatus(cuda::CopyRows(d_ring_copies_ + int64_t{layer} * 2 * S, 2 * S,
                                            std::min<int64_t>(W, max_segment_rows_), D, stream_),
                             "ring update"));
  return Linear(o, R, w.out, h_.get<float>(), /*accumulate=*/true);
}

absl::Status CudaBackend::Ffn(const DeviceFfn& w, const DeviceBuffer& norm, float* h,
                              int64_t rows) {
  const int D = config_.dim;
  const int64_t F = config_.hidden_dim;
  RETURN_IF_ERROR(
      CudaStatus(cuda::RmsNorm(h, rows, D, norm.get<float>(), static_cast<float>(config_.norm_eps),
                               a_.get<float>(), stream_),
                 "ffn norm"));
  const DeviceLinearOutput projections[] = {{&w.fc1, up_.get<float>()},
                                            {&w.gate, gate_.get<float>()}};
  RETURN_IF_ERROR(FusedLinear(a_.get<float>(), rows, projections));
  RETURN_IF_ERROR(
      CudaStatus(cuda::SiluMul(up_.get<float>(), gate_.get<float>(), rows * F, stream_), "swiglu"));
  return Linear(up_.get<float>(), rows, w.fc2, h, /*accumulate=*/true);
}

absl::Status CudaBackend::AppendSharedKv() {
  const int64_t R = static_cast<int64_t>(rows_.size());
  const int D = config_.dim;
  const int KV = config_.kv_dim();
  RETURN_IF_ERROR(
      CudaStatus(cuda::RmsNorm(h_.get<float>(), R, D, weights_->kv_norm.get<float>(),
                               static_cast<float>(config_.norm_eps), a_.get<float>(), stream_),
                 "kv norm"));
  const DeviceLinearOutput projections[] = {{&weights_->kv_k, kk_.get<float>()},
                                            {&weights_->kv_v, vv_.get<float>()}};
  RETURN_IF_ERROR(FusedLinear(a_.get<float>(), R, projections));
  RETURN_IF_ERROR(CudaStatus(
      cuda::ApplyRope(kk_.get<float>(), R, KV, config_.n_attn_kv_heads, config_.cross_head_dim(),
                      d_positions_, cross_inv_freq_.get<float>(), 1.0f, stream_),
      "rope"));
  const int S = static_cast<int>(sequences_.size());
  return CudaStatus(cuda::CopyRows(d_kv_copies_, 2 * S, max_segment_rows_, KV, stream_),
                    "shared K/V append");
}

absl::Status CudaBackend::CrossLayer(int layer) {
  const DeviceCrossLayer& w = weights_->cross_layers[layer];
  const int64_t Q = static_cast<int64_t>(out_rows_.size());
  const int D = config_.dim;
  const int Ha = config_.n_attn_heads;
  const int da = config_.cross_head_dim();
  float* a = a_.get<float>();
  float* q = q_.get<float>();
  float* o = o_.get<float>();
  RETURN_IF_ERROR(CudaStatus(cuda::RmsNorm(hx_.get<float>(), Q, D, w.mixer_norm.get<float>(),
                                           static_cast<float>(config_.norm_eps), a, stream_),
                             "mixer norm"));
  RETURN_IF_ERROR(Linear(a, Q, w.q, q, false));
  RETURN_IF_ERROR(CudaStatus(cuda::ApplyRope(q, Q, D, Ha, da, d_out_positions_,
                                             cross_inv_freq_.get<float>(), 1.0f, stream_),
                             "rope"));
  const cuda::AttentionShape shape{Ha, config_.n_attn_kv_heads, da, D, config_.kv_dim()};
  RETURN_IF_ERROR(Reserve<float>(attention_scratch_,
                                 cuda::AttentionScratchFloats(shape, Q, max_keys_, sm_count_)));
  RETURN_IF_ERROR(Timed(&CudaProfile::attention_ms, [&] {
    return CudaStatus(cuda::Attention(shape, d_cross_queries_, Q, max_keys_, q, o,
                                      attention_scratch_.get<float>(), sm_count_, stream_),
                      "cross attention");
  }));
  RETURN_IF_ERROR(Linear(o, Q, w.out, hx_.get<float>(), /*accumulate=*/true));
  return Ffn(w.ffn, w.ffn_norm, hx_.get<float>(), Q);
}

absl::Status CudaBackend::CopyBack(absl::Span<const ForwardSegment> segments) {
  const int64_t KV = config_.kv_dim();
  const int64_t floats = config_.self_state_floats();
  for (size_t s = 0; s < segments.size(); ++s) {
    SequenceState* state = segments[s].state;
    Sequence* seq = sequences_[s];
    const int64_t p0 = state->position;
    const int64_t T = static_cast<int64_t>(segments[s].tokens.size());
    const size_t bytes = T * KV * sizeof(float);
    RETURN_IF_ERROR(staging_.Reserve(2 * bytes));
    float* k = staging_.get<float>();
    float* v = k + T * KV;
    RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(k, seq->k.get<float>() + p0 * KV, bytes, cudaMemcpyDeviceToHost, stream_),
        "K download"));
    RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(v, seq->v.get<float>() + p0 * KV, bytes, cudaMemcpyDeviceToHost, stream_),
        "V download"));
    RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), "K/V download"));
    if (state->position == 0) {  // an empty state takes this backend's K/V dtype (fp32)
      state->shared_k = KvRows::SharedKeys(KvDtype::kF32, KV);
      state->shared_v = KvRows::SharedValues(KvDtype::kF32, KV);
    }
    state->shared_k.Append(k, T);
    state->shared_v.Append(v, T);
    seq->host_states_current = false;
    if (!options_.lazy_host_states) {
      for (int l = 0; l < config_.n_self_layers(); ++l) {
        RETURN_IF_ERROR(CudaStatus(
            cudaMemcpy(state->self_states[l].data(), seq->self_states.get<float>() + l * floats,
                       floats * 4, cudaMemcpyDeviceToHost),
            "state download"));
      }
      seq->host_states_current = true;
    }
    state->position = p0 + T;
    seq->position = p0 + T;
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::SyncState(SequenceState* state) {
  auto seq = std::static_pointer_cast<Sequence>(state->device.handle());
  if (seq == nullptr || seq->backend_id != id_ || seq->position != state->position ||
      seq->host_states_current) {
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(CudaStatus(cudaSetDevice(options_.device), "cudaSetDevice"));
  const int64_t floats = config_.self_state_floats();
  for (int l = 0; l < config_.n_self_layers(); ++l) {
    RETURN_IF_ERROR(CudaStatus(
        cudaMemcpy(state->self_states[l].data(), seq->self_states.get<float>() + l * floats,
                   floats * 4, cudaMemcpyDeviceToHost),
        "state download"));
  }
  seq->host_states_current = true;
  return absl::OkStatus();
}

}  // namespace yoco
