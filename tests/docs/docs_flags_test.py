#!/usr/bin/env python3
"""Every flag the README and docs/ show our programs with is one the program takes.

Reads the shell blocks (```sh, ```bash and unlabeled fences) of README.md, docs/*.md and the other
READMEs, joins continued lines, finds each command line of a yoco program (yoco, yoco-cli,
yoco-router, yoco-prefill, yoco-decode, yoco-loadtest, yoco-eval, yoco-transfer-bench; with a path
or not) and checks that every --flag it passes appears in that program's --help. Flags are
compared with '-' and '_' alike (absl prints --metrics_listen, the docs write --metrics-listen).

usage: docs_flags_test.py BIN_DIR SOURCE_DIR
"""
import glob
import os
import re
import shlex
import subprocess
import sys

PROGRAMS = ["yoco", "yoco-cli", "yoco-router", "yoco-prefill", "yoco-decode", "yoco-loadtest",
            "yoco-eval", "yoco-transfer-bench"]
# Words that run the next one.
WRAPPERS = {"time", "exec", "nohup", "sudo", "env"}
# absl's own flags, which every service takes but --help does not list.
ABSL_FLAGS = {"flagfile", "help", "helpfull", "helpshort", "version", "fromenv", "tryfromenv",
              "undefok"}


def shell_blocks(text):
    block = None
    for line in text.splitlines():
        fence = re.match(r"^\s*```(\w*)", line)
        if fence:
            if block is None:
                block = [] if fence.group(1) in ("", "sh", "bash", "shell", "console") else False
            else:
                if block:
                    yield "\n".join(block)
                block = None
        elif block not in (None, False):
            block.append(line)


def commands(block):
    joined = re.sub(r"\\\n\s*", " ", block)
    for line in joined.splitlines():
        line = re.sub(r"^\s*\$\s*", "", line)
        line = line.split(" #", 1)[0]
        for part in re.split(r"\|\||&&|[|;&]", line):
            try:
                words = shlex.split(part, posix=True)
            except ValueError:
                words = part.split()
            # The program is the command itself, or what runs after "--" (kubectl exec ... --).
            starts = [0] + [i + 1 for i, word in enumerate(words) if word == "--"]
            for start in starts:
                rest = words[start:]
                while rest and (re.match(r"^\w+=", rest[0]) or rest[0] in WRAPPERS):
                    rest = rest[1:]
                if rest and os.path.basename(rest[0]) in PROGRAMS:
                    yield os.path.basename(rest[0]), rest[1:]
                    break


def flag_names(args):
    for arg in args:
        m = re.match(r"^--([A-Za-z][\w-]*)", arg)
        if m:
            yield m.group(1)


def normalise(text):
    return re.sub(r"(?<=\w)-(?=\w)", "_", text)


def main():
    bin_dir, source_dir = sys.argv[1], sys.argv[2]
    docs = [os.path.join(source_dir, "README.md")]
    docs += sorted(glob.glob(os.path.join(source_dir, "docs", "*.md")))
    docs += [path for path in glob.glob(os.path.join(source_dir, "deploy", "**", "README.md"),
                                        recursive=True) if "node_modules" not in path]
    docs += sorted(glob.glob(os.path.join(source_dir, "models", "*", "README.md")))
    helps = {}
    checked = 0
    failures = []
    for doc in docs:
        with open(doc, encoding="utf-8") as f:
            text = f.read()
        for block in shell_blocks(text):
            for program, args in commands(block):
                if program not in helps:
                    run = subprocess.run([os.path.join(bin_dir, program), "--help"],
                                         capture_output=True, text=True, timeout=60)
                    helps[program] = normalise(run.stdout + run.stderr)
                for flag in flag_names(args):
                    checked += 1
                    if normalise(flag) in ABSL_FLAGS:
                        continue
                    if not re.search(r"--" + re.escape(normalise(flag)) + r"(?![\w])",
                                     helps[program]):
                        failures.append(f"{os.path.relpath(doc, source_dir)}: {program} --{flag}")
    for failure in failures:
        print("not in --help:", failure)
    print(f"{checked} flags of {len(helps)} programs checked in {len(docs)} documents")
    if checked < 50:
        print("too few flags found: is the extraction broken?")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
