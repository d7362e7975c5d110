// CudaBackend: the YOCO forward pass on an NVIDIA GPU, the CPU backend's twin. Weights live on
// the device as stored (bf16 matrices multiply on the tensor cores with fp32 accumulation;
// fp32 matrices in plain fp32), activations and states are fp32, and each sequence's state is
// kept on the device between calls (SequenceState::device) so a decode step uploads nothing
// but its tokens. Host states stay the source of truth for bundles and snapshots: after each
// call the new shared K/V rows and (unless lazy_host_states) the self-decoder states are
// copied back. One instance per thread, like CpuBackend.
#ifndef YOCO_LIB_ENGINE_CUDA_BACKEND_H_
#define YOCO_LIB_ENGINE_CUDA_BACKEND_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gated_retention.h"
#include "lib/engine/backend.h"
#include "lib/engine/cublas_library.h"
#include "lib/engine/cuda_weights.h"
#include "lib/engine/device_buffer.h"

namespace yoco {

struct CudaBackendOptions {
  int device = 0;
  // Leave the self-decoder states on the device after each call; SyncState copies them back.
  // Saves a decode step the copy of every layer's state (Hs·ds² floats per layer).
  bool lazy_host_states = false;
  // Time every matrix product, mixer kernel and host transfer (CUDA events; costs a little):
  // profile() then says where a call's time went. Profiled calls run without graphs.
  bool profile = false;
  // Replay decode steps (one token per segment) as CUDA graphs, one per batch shape.
  bool graphs = true;
};

// Milliseconds by kind of work, summed over the calls since the last reset.
struct CudaProfile {
  double linear_ms = 0;     // cuBLAS products (with their bf16 casts)
  double retention_ms = 0;  // gated retention kernels
  double attention_ms = 0;  // cross-decoder and SWA attention
  double other_gpu_ms = 0;  // norms, RoPE, gates, copies: the rest of the GPU time
  double host_ms = 0;       // descriptor and state uploads, copy-back, logits download
  double total_ms = 0;      // wall time of the calls
  int calls = 0;
};

// The devices this process can use, as "N: name, memory" lines; an error when there are none.
absl::StatusOr<std::vector<std::string>> CudaDevices();

class CudaBackend : public Backend {
 public:
  // Uploads the model's weights. UNAVAILABLE when there is no usable device.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(std::shared_ptr<const Model> model,
                                                             CudaBackendOptions options = {});
  // A backend over random weights made on the device (CudaWeights::Random), for benchmarks of
  // large shapes. Its model() has the config but no host weights: only Forward may be used.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> CreateRandom(const ModelConfig& config,
                                                                   bool bf16, uint64_t seed,
                                                                   CudaBackendOptions options = {});
  ~CudaBackend() override;

  const Model& model() const override { return *model_; }
  absl::Status Forward(absl::Span<const ForwardSegment> segments,
                       std::vector<float>* logits) override;
  absl::Status SyncState(SequenceState* state) override;

  // "NVIDIA H200 (device 0, sm_90)".
  const std::string& device_name() const { return device_name_; }
  int64_t weight_bytes() const { return weights_->bytes; }
  cudaStream_t stream() const { return stream_; }
  const CudaProfile& profile() const { return profile_; }
  // Why decode graphs were turned off, when capturing one failed (empty otherwise).
  const std::string& graph_error() const { return graph_error_; }
  void ResetProfile() { profile_ = {}; }

 private:
  struct Sequence;  // a state's device copy
  struct Row {
    int segment;
    int64_t position;
  };

  CudaBackend(std::shared_ptr<const Model> model, CudaBackendOptions options);
  absl::Status Init();
  absl::StatusOr<Sequence*> DeviceSequence(SequenceState* state, int64_t new_rows);
  absl::Status RunLayers(absl::Span<const ForwardSegment> segments, std::vector<float>* logits);
  absl::Status SelfLayer(int layer);
  // q, k, v projections of the normed input (and, with `gates`, retention's g and decay gate in
  // the same launch), RoPE on q and k, k then times key_scale.
  absl::Status SelfQkv(const DeviceSelfLayer& w, float key_scale, bool gates);
  absl::Status RetentionMixer(int layer);
  absl::Status SlidingWindowMixer(int layer);
  absl::Status Ffn(const DeviceFfn& w, const DeviceBuffer& norm, float* h, int64_t rows);
  absl::Status AppendSharedKv();
  absl::Status CrossLayer(int layer);
  absl::Status Linear(const float* x, int64_t m, const DeviceMatrix& w, float* y, bool accumulate);
  // Several products of the same x (q/k/v/g, fc1/gate, the shared K/V's k/v) as one launch where
  // the GEMV takes them all.
  absl::Status FusedLinear(const float* x, int64_t m, absl::Span<const DeviceLinearOutput> outputs);
  absl::Status UploadDescriptors();
  absl::Status EnqueueLayers();  // every launch of the pass, on stream_
  absl::Status RunOnDevice(absl::Span<const ForwardSegment> segments);
  void ClearGraphs();
  absl::Status CopyBack(absl::Span<const ForwardSegment> segments);
  // Records `kind`'s events around `work` when profiling (kind: &profile_.linear_ms etc.).
  template <typename Work>
  absl::Status Timed(double CudaProfile::*kind, Work work);
  void CollectProfile();

  std::shared_ptr<const Model> model_;
  const ModelConfig& config_;
  CudaBackendOptions options_;
  uint64_t id_ = 0;  // tells this backend's device copies from another's
  std::string device_name_;
  int sm_count_ = 0;
  cudaStream_t stream_ = nullptr;
  const CublasLibrary* cublas_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  std::unique_ptr<CudaWeights> weights_;
  bool random_bf16_ = true;  // CreateRandom's weights
  uint64_t random_seed_ = 0;
  DeviceBuffer self_inv_freq_, cross_inv_freq_;

  // Per call, on the host.
  std::vector<Row> rows_;
  std::vector<int32_t> row_tokens_;
  std::vector<int64_t> out_rows_;
  std::vector<int64_t> segment_begin_;
  std::vector<Sequence*> sequences_;
  int64_t max_keys_ = 0;      // longest shared K/V a cross query reads
  int64_t max_position_ = 0;  // largest row position
  int64_t window_keys_ = 0;   // SWA: keys a window query may read, rounded up like max_keys_

  // Per call, on the device: one upload of every descriptor the kernels read.
  std::vector<uint8_t> descriptors_;
  DeviceBuffer device_descriptors_;
  int32_t* d_tokens_ = nullptr;
  int32_t* d_positions_ = nullptr;                // [R]
  int32_t* d_out_positions_ = nullptr;            // [Q]
  int64_t* d_out_rows_ = nullptr;                 // [Q]
  cuda::RetentionTask* d_chunk_tasks_ = nullptr;  // [layers][chunk_tasks_]
  cuda::RetentionTask* d_step_tasks_ = nullptr;   // [layers][step_tasks_]
  int chunk_tasks_ = 0, step_tasks_ = 0;
  cuda::RetentionChunk* d_chunks_ = nullptr;  // every chunk task's chunks (same for all layers)
  int64_t chunk_count_ = 0;
  cuda::AttentionQuery* d_window_queries_ = nullptr;  // [layers][R]
  cuda::RowCopy* d_ring_copies_ = nullptr;            // [layers][2 * segments]
  cuda::AttentionQuery* d_cross_queries_ = nullptr;   // [Q]
  cuda::RowCopy* d_kv_copies_ = nullptr;              // [2 * segments]
  int64_t max_segment_rows_ = 0;

  CudaProfile profile_;
  struct Graph {
    int runs = 0;
    cudaGraphExec_t exec = nullptr;
    std::vector<const void*> buffers;  // BufferAddresses() when captured
  };
  // Every device buffer a pass's launches name directly (graphs bake these addresses in).
  std::vector<const void*> BufferAddresses() const;
  std::map<std::string, Graph> graphs_;  // by decode batch shape
  bool graphs_failed_ = false;
  std::string graph_error_;  // why capture failed, if it did
  struct TimedSpan {
    double CudaProfile::*kind;
    cudaEvent_t start, stop;
  };
  std::vector<TimedSpan> spans_;  // this call's
  std::vector<cudaEvent_t> free_events_;
  cudaEvent_t call_start_ = nullptr, call_stop_ = nullptr;

  // Activations, grown on demand.
  DeviceBuffer h_, a_, q_, k_, v_, g_, gt_, o_, up_, gate_, kk_, vv_, hx_, logits_, x_bf16_,
      attention_scratch_, retention_scratch_;
  PinnedBuffer staging_;  // logits and new K/V rows on their way to host vectors
};

}  // namespace yoco

#endif  // YOCO_LIB_ENGINE_CUDA_BACKEND_H_
