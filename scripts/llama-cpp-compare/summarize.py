#!/usr/bin/env python3
"""The table compare.sh prints: llama-bench's and `yoco bench`'s batch-1 decode, per pass.

llama.cpp's `tg128` is its decode after an empty prompt (`-d 0`, what `llama-bench -n 128`
reports by default); `@C` after a prompt of C tokens (`-d C`), the context `yoco bench` decodes
at. The ratios the targets name divide YOCO at context C by llama.cpp f16 `tg128`.
"""

import argparse
import json
import statistics


def llama_rates(path, context):
    """{(weights, depth): tokens/s} from one llama-bench JSON."""
    rates = {}
    for row in json.load(open(path)):
        weights = "q8_0" if "Q8_0" in row["model_type"] else "f16"
        if row["n_gen"] > 0 and row["n_depth"] in (0, context):
            rates[(weights, row["n_depth"])] = row["avg_ts"]
    return rates


def yoco_rate(path):
    decode = json.load(open(path))["decode"][0]
    return decode["yoco_tokens_per_s"], decode["bound_fraction"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True)
    parser.add_argument("--passes", type=int, required=True)
    parser.add_argument("--context", type=int, required=True)
    args = parser.parse_args()
    c = args.context
    columns = ["pass", "llama.cpp f16 tg128", "q8_0 tg128", "f16 @%d" % c, "q8_0 @%d" % c,
               "YOCO bf16 @%d (of floor)" % c, "YOCO q8 @%d (of floor)" % c, "bf16/f16 tg128",
               "q8/f16 tg128"]
    print("   ".join(columns))
    bf16_ratios, q8_ratios = [], []
    for p in range(1, args.passes + 1):
        llama = llama_rates("%s/llama-%d.json" % (args.work, p), c)
        bf16, bf16_floor = yoco_rate("%s/yoco-bf16-%d.json" % (args.work, p))
        q8, q8_floor = yoco_rate("%s/yoco-q8-%d.json" % (args.work, p))
        base = llama[("f16", 0)]
        bf16_ratios.append(bf16 / base)
        q8_ratios.append(q8 / base)
        cells = [str(p), "%.1f" % base, "%.1f" % llama[("q8_0", 0)], "%.1f" % llama[("f16", c)],
                 "%.1f" % llama[("q8_0", c)], "%.1f (%.0f%%)" % (bf16, 100 * bf16_floor),
                 "%.1f (%.0f%%)" % (q8, 100 * q8_floor), "%.2fx" % (bf16 / base),
                 "%.2fx" % (q8 / base)]
        print("   ".join(cell.rjust(len(col)) for cell, col in zip(cells, columns)))
    print("median over passes: YOCO bf16 / llama.cpp f16 tg128 %.2fx (target >= 1.2x), "
          "YOCO q8 / llama.cpp f16 tg128 %.2fx (target >= 1.8x)" %
          (statistics.median(bf16_ratios), statistics.median(q8_ratios)))


if __name__ == "__main__":
    main()
