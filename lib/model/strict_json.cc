// A SAX pass that checks the limits, then nlohmann's DOM parse of text known to be within them.
#include "lib/model/strict_json.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace yoco {
namespace {

using Json = nlohmann::json;

class LimitChecker : public nlohmann::json_sax<Json> {
 public:
  explicit LimitChecker(const JsonLimits& limits) : limits_(limits) {}

  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t) override { return Value(); }
  bool number_unsigned(number_unsigned_t) override { return Value(); }
  bool number_float(number_float_t, const string_t&) override { return Value(); }
  bool string(string_t&) override { return Value(); }
  bool binary(binary_t&) override { return Value(); }
  bool start_object(std::size_t) override { return Open(std::set<std::string>()); }
  bool start_array(std::size_t) override { return Open(std::nullopt); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }
  bool key(string_t& k) override {
    if (!Value()) return false;
    if (!scopes_.back()->insert(k).second) {
      error_ = absl::StrCat("duplicate key '", k.substr(0, 100), "'");
      return false;
    }
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception&) override {
    error_ = absl::StrCat("not valid JSON (at byte ", position, ")");
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  bool Value() {
    if (++values_ > limits_.max_values) {
      error_ = absl::StrCat("more than ", limits_.max_values, " values");
      return false;
    }
    return true;
  }
  // An object scope holds its keys; an array scope holds nothing.
  bool Open(std::optional<std::set<std::string>> scope) {
    if (!Value()) return false;
    if (static_cast<int>(scopes_.size()) >= limits_.max_depth) {
      error_ = absl::StrCat("nested deeper than ", limits_.max_depth, " levels");
      return false;
    }
    scopes_.push_back(std::move(scope));
    return true;
  }
  bool Close() {
    scopes_.pop_back();
    return true;
  }

  const JsonLimits limits_;
  size_t values_ = 0;
  std::vector<std::optional<std::set<std::string>>> scopes_;
  std::string error_;
};

}  // namespace

absl::StatusOr<Json> ParseStrictJson(absl::string_view text, const JsonLimits& limits) {
  LimitChecker checker(limits);
  if (!Json::sax_parse(text.begin(), text.end(), &checker)) {
    return absl::InvalidArgumentError(checker.error().empty() ? "not valid JSON" : checker.error());
  }
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  return j;
}

}  // namespace yoco
