// Span: the handle's bookkeeping; a span that does not record costs one branch per call.
#include "lib/trace/span.h"

#include <utility>

namespace yoco {

Span::Span(std::shared_ptr<SpanSink> sink, TraceContext context, const SpanId& parent,
           std::string name, SpanKind kind, absl::Time start)
    : context_(std::move(context)), sink_(std::move(sink)), data_(std::make_unique<SpanData>()) {
  data_->trace_id = context_.trace_id;
  data_->span_id = context_.span_id;
  data_->parent_span_id = parent;
  data_->tracestate = context_.tracestate;
  data_->name = std::move(name);
  data_->kind = kind;
  data_->start = start;
}

Span& Span::operator=(Span&& other) {
  if (this != &other) {
    End();
    context_ = std::move(other.context_);
    sink_ = std::move(other.sink_);
    data_ = std::move(other.data_);
  }
  return *this;
}

Span& Span::Set(absl::string_view key, AttributeValue value) {
  if (data_ == nullptr) return *this;
  for (SpanAttribute& a : data_->attributes) {
    if (a.key == key) {
      a.value = std::move(value);
      return *this;
    }
  }
  data_->attributes.push_back({std::string(key), std::move(value)});
  return *this;
}

Span& Span::SetAttribute(absl::string_view key, absl::string_view value) {
  return Set(key, std::string(value));
}

Span& Span::SetAttribute(absl::string_view key, int64_t value) { return Set(key, value); }

Span& Span::SetAttribute(absl::string_view key, double value) { return Set(key, value); }

Span& Span::SetAttribute(absl::string_view key, bool value) { return Set(key, value); }

Span& Span::AddEvent(absl::string_view name, absl::Time time) {
  if (data_ != nullptr) data_->events.push_back({std::string(name), time, {}});
  return *this;
}

Span& Span::SetError(absl::string_view message) {
  if (data_ != nullptr) {
    data_->error = true;
    data_->error_message = std::string(message);
  }
  return *this;
}

Span& Span::SetStatus(const absl::Status& status) {
  if (status.ok()) return *this;
  SetAttribute("error.type", absl::StatusCodeToString(status.code()));
  return SetError(status.message());
}

void Span::End(absl::Time end) {
  if (data_ == nullptr) return;
  data_->end = end;
  std::unique_ptr<SpanData> data = std::move(data_);
  sink_->Export(std::move(*data));
  sink_.reset();
}

}  // namespace yoco
