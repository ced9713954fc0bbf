#!/usr/bin/env python3
"""How busy the cores were in each part of a `scripts/bench-8men.sh` attempt:
for each material pair, from its start to its initialisation, its steps,
its finishing and its shards, the wall seconds, the CPU seconds (from the
attempt's `cpu.log` samples, taken every 10 s and interpolated between
them) and their ratio, the cores busy on average.

usage: scripts/busy-cores.py DIR [ATTEMPT]
  scripts/busy-cores.py /work/scratch/run8

A part begins at its first progress line (finishing prints one every
10 s or so, so it begins a little late); parts shorter than 5 s are
counted with the next (the samples are 10 s apart), so the first rows
hold the small pairs too. Needs DIR/start.N, DIR/cpu.log with an attempt column and
DIR/progress.N.log, which bench-8men.sh writes since session 68.
"""
import re
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip().split("\n\n")[1])
    run = sys.argv[1]
    attempt = sys.argv[2] if len(sys.argv) > 2 else "1"
    try:
        start = int(open(f"{run}/start.{attempt}").read())
        samples = [(0.0, 0.0)]
        for line in open(f"{run}/cpu.log"):
            fields = line.split()
            if len(fields) == 4 and fields[3] == attempt:
                samples.append((int(fields[0]) - start, float(fields[1]) + float(fields[2])))
        progress = open(f"{run}/progress.{attempt}.log").read().splitlines()
    except (OSError, ValueError) as error:
        sys.exit(f"busy-cores: {error}")
    if len(samples) < 2:
        sys.exit(f"busy-cores: no CPU samples of attempt {attempt} in {run}/cpu.log")

    def cpu_at(elapsed):
        """CPU seconds at `elapsed` wall seconds, interpolated (the last
        sample's after it)."""
        for (t0, c0), (t1, c1) in zip(samples, samples[1:]):
            if t1 >= elapsed:
                return c0 + (c1 - c0) * (elapsed - t0) / (t1 - t0) if t1 > t0 else c1
        return samples[-1][1]

    # (elapsed s, what happens from then on), from the progress lines.
    marks = [(0.0, "set-up")]
    kinds = [
        (r"(\S+): started", "{} initialising"),
        (r"^initialised", "{} steps"),
        (r"finishing (\S+): batch", "{} finishing"),
        (r"(\S+): done after", "{} done: next pair, shards"),
        (r"saved \d+ shards", "published"),
    ]
    pair, seen = "", set()
    for line in progress:
        stamp = re.match(r"\[\s*(?:(\d+)m)?([\d.]+)s\]\s*(.*)", line)
        if not stamp:
            continue
        elapsed = int(stamp.group(1) or 0) * 60 + float(stamp.group(2))
        text = stamp.group(3)
        for pattern, label in kinds:
            found = re.search(pattern, text)
            if not found:
                continue
            if found.groups():
                name = found.group(1)
                pair = name if "started" in pattern else pair
                label = label.format(name)
            else:
                label = label.format(pair)
            if label not in seen:
                seen.add(label)
                marks.append((elapsed, label))
            break
    # The CPU time after the last sample is not known: the parts end there.
    last = samples[-1][0]
    marks = [(at, label) for at, label in marks if at < last] + [(last, "end of the samples")]
    print(f"{'from':>8} {'to':>8}  {'part':<44} {'wall s':>7} {'CPU s':>7} {'cores':>5}")
    begin, label = marks[0]
    for at, next_label in marks[1:]:
        if at - begin < 5 and next_label != "end of the samples":
            # Too short to measure: counted with the part after it.
            label = next_label
            continue
        cpu = cpu_at(at) - cpu_at(begin)
        print(f"{begin:8.1f} {at:8.1f}  {label:<44} {at - begin:7.1f} {cpu:7.1f} {cpu / (at - begin):5.2f}")
        begin, label = at, next_label


main()
