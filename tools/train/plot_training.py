"""Draws a training log (train.py's log.jsonl) as a PNG with gnuplot: the LM and answer losses
(moving averages over 20 steps, log scale) and the held-out answer accuracy per length.

  python3 tools/train/plot_training.py build/train/docqa/log.jsonl models/yoco-docqa-tiny/training.png
"""

import json
import os
import subprocess
import sys
import tempfile


def moving_average(values, window):
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def main():
    log_path, png_path = sys.argv[1], sys.argv[2]
    # A resumed run repeats the steps after its checkpoint: the later record of a step wins.
    by_step = {}
    for line in open(log_path):
        if line.strip():
            r = json.loads(line)
            by_step[r["step"]] = r
    rows = [by_step[s] for s in sorted(by_step)]
    steps = [r["step"] for r in rows]
    lm = moving_average([r["lm_loss"] for r in rows], 20)
    qa = moving_average([r["answer_loss"] for r in rows], 20)
    evals = [r for r in rows if "answer_accuracy" in r]
    lengths = sorted({int(n) for r in evals for n in r["answer_accuracy"]})
    with tempfile.TemporaryDirectory() as tmp:
        loss_dat = os.path.join(tmp, "loss.dat")
        with open(loss_dat, "w") as f:
            for s, a, b in zip(steps, lm, qa):
                f.write(f"{s} {a} {max(b, 1e-4)}\n")
        acc_dat = os.path.join(tmp, "accuracy.dat")
        with open(acc_dat, "w") as f:
            for r in evals:
                acc = r["answer_accuracy"]
                f.write(" ".join([str(r["step"])] + [str(100 * acc.get(str(n), 0)) for n in lengths])
                        + "\n")
        acc_plots = ", ".join(
            f"'{acc_dat}' using 1:{i + 2} axes x1y2 with linespoints lw 2 title 'accuracy {n} B'"
            for i, n in enumerate(lengths))
        script = f"""
set terminal pngcairo size 900,500
set output '{png_path}'
set xlabel 'step'
set ylabel 'loss (20-step mean)'
set logscale y
set y2label 'held-out answer accuracy (%)'
set y2range [0:100]
set y2tics
set ytics nomirror
set key outside bottom center horizontal
set grid
plot '{loss_dat}' using 1:2 with lines lw 2 title 'LM loss', \\
     '{loss_dat}' using 1:3 with lines lw 2 title 'answer loss'{", " + acc_plots if acc_plots else ""}
"""
        subprocess.run(["gnuplot"], input=script.encode(), check=True)


if __name__ == "__main__":
    main()
