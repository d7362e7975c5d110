// gnuplot through the shell, its script and data in a folder removed afterwards.
#include "lib/plot/gnuplot.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace yoco {

std::string PlotDataDir(const std::string& png_path) {
  const std::string dir = png_path + ".plot";
  std::error_code ignored;
  std::filesystem::create_directories(dir, ignored);
  return dir;
}

absl::Status RunGnuplot(const std::string& script, const std::string& dir) {
  if (dir.find('\'') != std::string::npos) {
    // The folder is quoted for the shell below; the tools' own paths never hold a quote.
    return absl::InvalidArgumentError(absl::StrCat("plot path holds a quote: ", dir));
  }
  {
    std::ofstream out(dir + "/plot.gp");
    out << script;
  }
  const std::string command = absl::StrCat("gnuplot '", dir, "/plot.gp' 2> '", dir, "/err'");
  const int rc = std::system(command.c_str());
  std::string error;
  if (rc != 0) {
    std::ifstream err(dir + "/err");
    std::getline(err, error);
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat("gnuplot failed (is gnuplot installed?): ", error));
  }
  return absl::OkStatus();
}

}  // namespace yoco
