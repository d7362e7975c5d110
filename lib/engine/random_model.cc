// Random checkpoint generation. The normal draws use Box-Muller over a 64-bit Mersenne
// Twister so the same seed gives the same model with any standard library.
#include "lib/engine/random_model.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lib/engine/model_weights.h"
#include "lib/engine/safetensors_writer.h"
#include "lib/status/status_macros.h"

namespace yoco {
namespace {

class NormalSource {
 public:
  explicit NormalSource(uint64_t seed) : rng_(seed) {}
  double Next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    // u1 in (0, 1], u2 in [0, 1).
    const double u1 = (static_cast<double>(rng_() >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * M_PI * u2);
    has_spare_ = true;
    return r * std::cos(2.0 * M_PI * u2);
  }

 private:
  std::mt19937_64 rng_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

void AppendElement(DType dtype, float v, std::string* out) {
  if (dtype == DType::kF32) {
    out->append(reinterpret_cast<const char*>(&v), 4);
  } else if (dtype == DType::kBF16) {
    const uint16_t b = FloatToBf16(v);
    out->append(reinterpret_cast<const char*>(&b), 2);
  } else {
#if defined(__F16C__)
    // Clang 14 has no _Float16 on x86; F16C rounds to nearest even as the conversion does.
    const uint16_t h = _cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT);
#else
    const _Float16 h = static_cast<_Float16>(v);
#endif
    out->append(reinterpret_cast<const char*>(&h), 2);
  }
}

}  // namespace

absl::Status WriteRandomModel(const ModelConfig& config, const RandomModelOptions& options,
                              const std::string& dir) {
  RETURN_IF_ERROR(config.Validate());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", dir, ": ", ec.message()));

  NormalSource normal(options.seed);
  std::vector<TensorToWrite> tensors;
  for (const auto& [name, shape] : ModelWeights::ExpectedTensors(config)) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    const bool is_norm = absl::EndsWith(name, "norm.weight");
    TensorToWrite t{name, options.dtype, shape, {}};
    t.bytes.reserve(count * DTypeSize(options.dtype));
    for (int64_t i = 0; i < count; ++i) {
      float v;
      if (is_norm) {
        v = options.random_norms ? static_cast<float>(1.0 + 0.1 * normal.Next()) : 1.0f;
      } else {
        v = static_cast<float>(options.weight_std * normal.Next());
      }
      AppendElement(options.dtype, v, &t.bytes);
    }
    tensors.push_back(std::move(t));
  }
  RETURN_IF_ERROR(WriteSafetensors((std::filesystem::path(dir) / "model.safetensors").string(),
                                   std::move(tensors)));
  std::ofstream params(std::filesystem::path(dir) / "params.json", std::ios::trunc);
  params << config.ToJson();
  if (!params) return absl::DataLossError(absl::StrCat("cannot write ", dir, "/params.json"));
  return absl::OkStatus();
}

}  // namespace yoco
