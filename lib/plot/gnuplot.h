// Runs a gnuplot script: how the tools (yoco-loadtest, yoco-eval) draw their PNGs.
#ifndef YOCO_LIB_PLOT_GNUPLOT_H_
#define YOCO_LIB_PLOT_GNUPLOT_H_

#include <string>

#include "absl/status/status.h"

namespace yoco {

// Writes `script` to `dir`/plot.gp, runs gnuplot on it, then removes `dir` (the script and
// whatever data files it read from there). UNAVAILABLE with gnuplot's first error line when
// gnuplot is missing or fails.
absl::Status RunGnuplot(const std::string& script, const std::string& dir);

// A private folder for a plot's data files next to `png_path`.
std::string PlotDataDir(const std::string& png_path);

}  // namespace yoco

#endif  // YOCO_LIB_PLOT_GNUPLOT_H_
