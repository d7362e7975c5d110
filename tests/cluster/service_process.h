// ServiceProcess: one service binary run as a child process for a test, its stdout and stderr
// appended to a log file. The process is killed when the object goes (and, through
// PR_SET_PDEATHSIG, when the test process dies), so a failing test leaves nothing running.
#ifndef YOCO_TESTS_CLUSTER_SERVICE_PROCESS_H_
#define YOCO_TESTS_CLUSTER_SERVICE_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace yoco::testing {

class ServiceProcess {
 public:
  // Starts `binary` with `args` (argv[1...]) and `env` ("NAME=value", added to this process's
  // environment).
  static absl::StatusOr<std::unique_ptr<ServiceProcess>> Start(
      const std::string& binary, const std::vector<std::string>& args, const std::string& log_path,
      const std::vector<std::string>& env = {});
  ~ServiceProcess();
  ServiceProcess(const ServiceProcess&) = delete;
  ServiceProcess& operator=(const ServiceProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }

  // The number after the first "`marker` N" in the log, once the service has printed it (e.g.
  // "serving on port"). FAILED_PRECONDITION with the log's tail when the process exits first,
  // DEADLINE_EXCEEDED after `timeout`.
  absl::StatusOr<int> WaitForNumberAfter(absl::string_view marker, absl::Duration timeout);

  // The exit status (or 128 + signal) once the process has ended; nullopt while it runs.
  std::optional<int> ExitStatus();

  // Waits for the process to end by itself (a tool run to completion): its exit status, or
  // DEADLINE_EXCEEDED (the process then killed) after `timeout`.
  absl::StatusOr<int> Wait(absl::Duration timeout);

  // SIGKILL, and waits for the process to end. Nothing when it has already ended.
  void Kill();
  // SIGSTOP / SIGCONT: the process hangs with its connections open, then goes on.
  void Pause();
  void Resume();
  // SIGTERM, then the exit status; DEADLINE_EXCEEDED (the process then killed) when it does not
  // end within `timeout`.
  absl::StatusOr<int> Terminate(absl::Duration timeout);

  // What this process wrote to the log so far (a restarted service appends to the same file),
  // and its last `bytes` (for failure messages).
  std::string Log() const;
  std::string LogTail(size_t bytes = 2000) const;

 private:
  ServiceProcess(pid_t pid, std::string log_path, size_t log_start)
      : pid_(pid), log_path_(std::move(log_path)), log_start_(log_start) {}
  void Reap(int options);

  const pid_t pid_;
  const std::string log_path_;
  const size_t log_start_;  // the log's size when this process started
  std::optional<int> exit_status_;
};

}  // namespace yoco::testing

#endif  // YOCO_TESTS_CLUSTER_SERVICE_PROCESS_H_
