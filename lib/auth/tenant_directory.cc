// The tenant file's parser and the directory that keeps it current.
#include "lib/auth/tenant_directory.h"

#include <openssl/sha.h>
#include <sys/stat.h>

#include <algorithm>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "lib/files/bounded_file.h"
#include "lib/log/log.h"
#include "lib/model/strict_json.h"

namespace yoco {
namespace {

using Json = nlohmann::json;

std::array<uint8_t, 32> Sha256(absl::string_view bytes) {
  std::array<uint8_t, 32> digest;
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest.data());
  return digest;
}

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-'))) return false;
  }
  return true;
}

bool ValidToken(absl::string_view token) {
  if (token.size() < kMinTokenBytes || token.size() > kMaxTokenBytes) return false;
  for (char c : token) {
    if (c <= ' ' || c > '~') return false;  // printable ASCII, no spaces: an HTTP header value
  }
  return true;
}

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("tenant file: ", what));
}

// The strings of `field` in a tenant's object (absent: none).
absl::StatusOr<std::vector<std::string>> Strings(const Json& tenant, const std::string& name,
                                                 const char* field) {
  std::vector<std::string> out;
  auto it = tenant.find(field);
  if (it == tenant.end()) return out;
  if (!it->is_array()) return Invalid(absl::StrCat(name, ".", field, " must be an array"));
  for (const Json& v : *it) {
    if (!v.is_string()) {
      return Invalid(absl::StrCat(name, ".", field, " must hold strings only"));
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

absl::StatusOr<TenantLimits> ParseLimits(const Json& json, const std::string& tenant) {
  if (!json.is_object()) return Invalid(absl::StrCat(tenant, ": limits must be an object"));
  TenantLimits limits;
  for (const auto& [field, value] : json.items()) {
    uint64_t* target = field == "max_concurrent_requests"    ? &limits.max_concurrent_requests
                       : field == "prompt_tokens_per_minute" ? &limits.prompt_tokens_per_minute
                       : field == "generated_tokens_per_minute"
                           ? &limits.generated_tokens_per_minute
                       : field == "max_pinned_snapshot_bytes" ? &limits.max_pinned_snapshot_bytes
                                                              : nullptr;
    if (target == nullptr) {
      return Invalid(absl::StrCat(tenant, ": unknown limit \"", absl::CHexEscape(field),
                                  "\" (max_concurrent_requests, prompt_tokens_per_minute, "
                                  "generated_tokens_per_minute, max_pinned_snapshot_bytes)"));
    }
    if (!value.is_number_unsigned() || value.get<uint64_t>() > kMaxTenantLimit) {
      return Invalid(absl::StrCat(tenant, ": limit ", field, " must be an integer in [0, ",
                                  kMaxTenantLimit, "] (0: no limit)"));
    }
    *target = value.get<uint64_t>();
  }
  return limits;
}

absl::StatusOr<TenantScheduling> ParseScheduling(const Json& json, const std::string& tenant) {
  if (!json.is_object()) return Invalid(absl::StrCat(tenant, ": scheduling must be an object"));
  TenantScheduling scheduling;
  for (const auto& [field, value] : json.items()) {
    if (field == "priority") {
      if (!value.is_number_integer() || value.get<int64_t>() < -kMaxSchedulingPriority ||
          value.get<int64_t>() > kMaxSchedulingPriority) {
        return Invalid(absl::StrCat(tenant, ": scheduling.priority must be an integer in [",
                                    -kMaxSchedulingPriority, ", ", kMaxSchedulingPriority,
                                    "] (lower goes first)"));
      }
      scheduling.priority = static_cast<int32_t>(value.get<int64_t>());
    } else if (field == "weight") {
      if (!value.is_number_unsigned() || value.get<uint64_t>() < 1 ||
          value.get<uint64_t>() > kMaxSchedulingWeight) {
        return Invalid(absl::StrCat(tenant, ": scheduling.weight must be an integer in [1, ",
                                    kMaxSchedulingWeight, "]"));
      }
      scheduling.weight = static_cast<uint32_t>(value.get<uint64_t>());
    } else {
      return Invalid(absl::StrCat(tenant, ": unknown scheduling field \"", absl::CHexEscape(field),
                                  "\" (priority, weight)"));
    }
  }
  return scheduling;
}

}  // namespace

absl::StatusOr<TenantTable> ParseTenantFile(absl::string_view text) {
  JsonLimits limits;
  limits.max_depth = 4;
  limits.max_values = 4 * kMaxTenantCredentials;
  absl::StatusOr<Json> json = ParseStrictJson(text, limits);
  if (!json.ok()) return Invalid(json.status().message());
  if (!json->is_object() || json->size() != 1 || !json->contains("tenants") ||
      !(*json)["tenants"].is_object()) {
    return Invalid(
        R"(expected {"tenants": {NAME: {"tokens": [...], "client_identities": [...]}}})");
  }
  const Json& tenants = (*json)["tenants"];
  if (tenants.size() > kMaxTenants) {
    return Invalid(absl::StrCat(tenants.size(), " tenants; at most ", kMaxTenants));
  }
  TenantTable table;
  std::set<std::array<uint8_t, 32>> seen_tokens;
  size_t credentials = 0;
  for (const auto& [name, tenant] : tenants.items()) {
    if (!ValidName(name)) {
      return Invalid(absl::StrCat("tenant name \"", absl::CHexEscape(name),
                                  "\" is not [a-z0-9][a-z0-9._-]{0,62}"));
    }
    if (!tenant.is_object()) return Invalid(absl::StrCat(name, " must be an object"));
    for (const auto& [field, value] : tenant.items()) {
      if (field != "tokens" && field != "client_identities" && field != "limits" &&
          field != "scheduling") {
        return Invalid(absl::StrCat(name, ": unknown field \"", absl::CHexEscape(field), "\""));
      }
    }
    absl::StatusOr<std::vector<std::string>> tokens = Strings(tenant, name, "tokens");
    if (!tokens.ok()) return tokens.status();
    absl::StatusOr<std::vector<std::string>> identities =
        Strings(tenant, name, "client_identities");
    if (!identities.ok()) return identities.status();
    if (tokens->empty() && identities->empty()) {
      return Invalid(absl::StrCat(name, " has neither tokens nor client_identities"));
    }
    credentials += tokens->size() + identities->size();
    if (credentials > kMaxTenantCredentials) {
      return Invalid(absl::StrCat("more than ", kMaxTenantCredentials, " tokens and identities"));
    }
    for (const std::string& token : *tokens) {
      if (!ValidToken(token)) {
        return Invalid(absl::StrCat(name, ": a token must be ", kMinTokenBytes, " to ",
                                    kMaxTokenBytes, " printable ASCII characters without spaces"));
      }
      auto [it, inserted] = table.token_digests.emplace(Sha256(token), name);
      if (!inserted) {  // never say which other tenant holds it: the file may be logged
        return Invalid(absl::StrCat(name, ": a token is given twice"));
      }
    }
    for (const std::string& identity : *identities) {
      if (identity.empty() || identity.size() > 1024) {
        return Invalid(absl::StrCat(name, ": a client identity must be 1 to 1024 bytes"));
      }
      auto [it, inserted] = table.identities.emplace(identity, name);
      if (!inserted) {
        return Invalid(
            absl::StrCat("client identity \"", absl::CHexEscape(identity), "\" is given twice"));
      }
    }
    if (tenant.contains("limits")) {
      absl::StatusOr<TenantLimits> limits = ParseLimits(tenant["limits"], name);
      if (!limits.ok()) return limits.status();
      if (!(*limits == TenantLimits())) table.limits[name] = *limits;
    }
    if (tenant.contains("scheduling")) {
      absl::StatusOr<TenantScheduling> scheduling = ParseScheduling(tenant["scheduling"], name);
      if (!scheduling.ok()) return scheduling.status();
      if (!(*scheduling == TenantScheduling())) table.scheduling[name] = *scheduling;
    }
    table.names.push_back(name);
  }
  std::sort(table.names.begin(), table.names.end());
  return table;
}

std::string TenantCacheSalt(absl::string_view tenant) {
  return absl::StrCat("yoco-tenant\x1f", tenant);
}

absl::StatusOr<std::unique_ptr<TenantDirectory>> TenantDirectory::Open(
    std::string path, absl::Duration reload_interval, std::function<absl::Time()> now) {
  std::unique_ptr<TenantDirectory> directory(
      new TenantDirectory(std::move(path), reload_interval, std::move(now)));
  if (absl::Status st = directory->ReloadIfChanged(); !st.ok()) return st;
  return directory;
}

absl::Status TenantDirectory::ReloadIfChanged() {
  absl::MutexLock lock(&mu_);
  checked_ = now_();
  struct stat st;
  if (stat(path_.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("cannot stat the tenant file ", path_));
  }
  const FileStamp stamp{static_cast<int64_t>(st.st_size), static_cast<int64_t>(st.st_ino),
                        st.st_mtim.tv_sec * int64_t{1000000000} + st.st_mtim.tv_nsec,
                        st.st_ctim.tv_sec * int64_t{1000000000} + st.st_ctim.tv_nsec};
  if (table_ != nullptr && stamp == stamp_) return absl::OkStatus();
  absl::StatusOr<std::string> text = ReadBoundedFile(path_, kMaxTenantFileBytes);
  absl::StatusOr<TenantTable> table =
      text.ok() ? ParseTenantFile(*text) : absl::StatusOr<TenantTable>(text.status());
  if (!table.ok()) {
    absl::Status error(table.status().code(), absl::StrCat(path_, ": ", table.status().message()));
    if (table_ != nullptr && !(stamp == failed_stamp_)) {
      LogWarning("keeping the last good tenant set").With("error", error.message());
    }
    failed_stamp_ = stamp;
    return error;
  }
  table_ = std::make_shared<const TenantTable>(*std::move(table));
  stamp_ = stamp;
  ++loads_;
  return absl::OkStatus();
}

std::shared_ptr<const TenantTable> TenantDirectory::Current() {
  bool due;
  {
    absl::MutexLock lock(&mu_);
    due = now_() - checked_ >= reload_interval_;
  }
  if (due) ReloadIfChanged().IgnoreError();  // a bad file was reported; the old set stays
  absl::MutexLock lock(&mu_);
  return table_;
}

absl::StatusOr<std::string> TenantDirectory::ByToken(absl::string_view token) {
  std::shared_ptr<const TenantTable> table = Current();
  auto it = table->token_digests.find(Sha256(token));
  if (it == table->token_digests.end()) {
    return absl::UnauthenticatedError("the bearer token is not a tenant's");
  }
  return it->second;
}

absl::StatusOr<std::string> TenantDirectory::ByIdentity(absl::Span<const std::string> identities) {
  std::shared_ptr<const TenantTable> table = Current();
  for (const std::string& identity : identities) {
    auto it = table->identities.find(identity);
    if (it != table->identities.end()) return it->second;
  }
  return absl::UnauthenticatedError(
      identities.empty()
          ? "no bearer token and no client certificate: this router serves tenants "
            "only (--tenants)"
          : absl::StrCat("the client certificate (", identities.front(), ") is not a tenant's"));
}

std::vector<std::string> TenantDirectory::Names() { return Current()->names; }

TenantLimits TenantDirectory::Limits(const std::string& tenant) {
  std::shared_ptr<const TenantTable> table = Current();
  auto it = table->limits.find(tenant);
  return it == table->limits.end() ? TenantLimits() : it->second;
}

TenantScheduling TenantDirectory::Scheduling(const std::string& tenant) {
  std::shared_ptr<const TenantTable> table = Current();
  auto it = table->scheduling.find(tenant);
  return it == table->scheduling.end() ? TenantScheduling() : it->second;
}

uint64_t TenantDirectory::loads() const {
  absl::MutexLock lock(&mu_);
  return loads_;
}

}  // namespace yoco
