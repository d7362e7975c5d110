// A server interceptor lives exactly as long as its call: it is destroyed with the call's
// ServerContext, before the context drops its reference to the call, so under the lock a
// registered context can still be cancelled.
#include "lib/rpc/health_watchers.h"

#include <grpcpp/grpcpp.h>

#include <cstring>
#include <set>

#include "absl/synchronization/mutex.h"

namespace yoco {
namespace {

constexpr char kWatchMethod[] = "/grpc.health.v1.Health/Watch";

absl::Mutex& Mutex() {
  static absl::Mutex mu;
  return mu;
}

std::set<grpc::ServerContextBase*>& Open() {
  static auto* open = new std::set<grpc::ServerContextBase*>;
  return *open;
}

class WatchInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit WatchInterceptor(grpc::ServerContextBase* context) : context_(context) {
    absl::MutexLock lock(&Mutex());
    Open().insert(context_);
  }
  ~WatchInterceptor() override {
    absl::MutexLock lock(&Mutex());
    Open().erase(context_);
  }
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    methods->Proceed();
  }

 private:
  grpc::ServerContextBase* const context_;
};

class WatchTracker : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    if (info->method() == nullptr || std::strcmp(info->method(), kWatchMethod) != 0) {
      return nullptr;  // not intercepted
    }
    return new WatchInterceptor(info->server_context());
  }
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> HealthWatchTracker() {
  return std::make_unique<WatchTracker>();
}

int EndHealthWatches() {
  absl::MutexLock lock(&Mutex());
  for (grpc::ServerContextBase* context : Open()) context->TryCancel();
  return static_cast<int>(Open().size());
}

}  // namespace yoco
