#!/usr/bin/python3
"""Scores inspect_db --duplicates against make_planted_duplicates.py's truth.

    eval_duplicates.py CORPUS DUPLICATES.CSV

A planted pair is found when the CSV holds it; a reported pair is false
unless both images are the same original (a copy and its original, or two
copies of one). Prints recall and false pairs per 10,000 records.
"""
import csv
import os
import sys


def main():
    corpus, path = sys.argv[1], sys.argv[2]
    orig = {r["copy"]: r["original"] for r in csv.DictReader(open(os.path.join(corpus, "truth.csv")))}
    records = sum(len(fs) for _, _, fs in os.walk(os.path.join(corpus, "train"))) + \
        sum(len(fs) for _, _, fs in os.walk(os.path.join(corpus, "val")))

    def name(db, p):
        return ("train/" if os.path.basename(db).startswith("train") else "val/") + p

    found, false = set(), 0
    for r in csv.DictReader(open(path)):
        a, b = name(r["db_a"], r["path_a"]), name(r["db_b"], r["path_b"])
        if orig.get(a, a) == orig.get(b, b):
            found.add(frozenset((a, b)))
        else:
            false += 1
    hit = sum(frozenset(p) in found for p in orig.items())
    print("planted %d, found %d: recall %.1f%%; false pairs %d among %d records (%.2f per 10,000)"
          % (len(orig), hit, 100.0 * hit / max(1, len(orig)), false, records, false * 1e4 / max(1, records)))


if __name__ == "__main__":
    main()
