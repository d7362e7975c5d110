// Child processes for the cluster tests: fork + exec, with only async-signal-safe calls between
// the two (the test process has gRPC threads running).
#include "tests/cluster/service_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace yoco::testing {

absl::StatusOr<std::unique_ptr<ServiceProcess>> ServiceProcess::Start(
    const std::string& binary, const std::vector<std::string>& args, const std::string& log_path,
    const std::vector<std::string>& env) {
  // Everything the child needs is built before the fork: it may not allocate.
  std::vector<std::string> argv_strings = {binary};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings = env;
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  envp.push_back(nullptr);

  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", log_path, ": ", strerror(errno)));
  }
  const off_t log_start = lseek(log_fd, 0, SEEK_END);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the test died before the line above
    const int null_fd = open("/dev/null", O_RDONLY);
    dup2(null_fd, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(log_fd);
  return std::unique_ptr<ServiceProcess>(
      new ServiceProcess(pid, log_path, static_cast<size_t>(log_start)));
}

ServiceProcess::~ServiceProcess() { Kill(); }

void ServiceProcess::Reap(int options) {
  if (exit_status_) return;
  int status = 0;
  if (waitpid(pid_, &status, options) != pid_) return;
  if (WIFEXITED(status)) {
    exit_status_ = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    exit_status_ = 128 + WTERMSIG(status);
  }
}

std::optional<int> ServiceProcess::ExitStatus() {
  Reap(WNOHANG);
  return exit_status_;
}

void ServiceProcess::Kill() {
  if (ExitStatus()) return;
  kill(pid_, SIGKILL);
  Reap(0);
}

void ServiceProcess::Pause() { kill(pid_, SIGSTOP); }
void ServiceProcess::Resume() { kill(pid_, SIGCONT); }

absl::StatusOr<int> ServiceProcess::Terminate(absl::Duration timeout) {
  if (!ExitStatus()) kill(pid_, SIGTERM);
  return Wait(timeout);
}

absl::StatusOr<int> ServiceProcess::Wait(absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (!ExitStatus()) {
    if (absl::Now() > end) {
      Kill();
      return absl::DeadlineExceededError(
          absl::StrCat("still running after ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return *exit_status_;
}

absl::StatusOr<int> ServiceProcess::WaitForNumberAfter(absl::string_view marker,
                                                       absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  for (;;) {
    const std::string log = Log();
    const size_t at = absl::string_view(log).find(marker);
    if (at != std::string::npos) {
      const size_t digits = at + marker.size() + 1;
      size_t stop = digits;
      while (stop < log.size() && isdigit(static_cast<unsigned char>(log[stop]))) ++stop;
      int number = 0;
      if (stop < log.size() && absl::SimpleAtoi(log.substr(digits, stop - digits), &number)) {
        return number;
      }
    }
    if (ExitStatus()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "exited (status ", *exit_status_, ") before printing \"", marker, "\": ", LogTail()));
    }
    if (absl::Now() > end) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no \"", marker, "\" after ", absl::FormatDuration(timeout), ": ", LogTail()));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

std::string ServiceProcess::Log() const {
  std::ifstream in(log_path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(log_start_));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string ServiceProcess::LogTail(size_t bytes) const {
  const std::string log = Log();
  return log.size() <= bytes ? log : log.substr(log.size() - bytes);
}

}  // namespace yoco::testing
