"""Survey of recipe files: every distinct JSON key path with its value kinds (and the values, when few).

    python tests/oracle/recipe_survey.py ../shared/reference-recipes

The parser's field table (src/builder/recipe.c: used fields; src/builder/recipe_ref.c: the reference's
bookkeeping fields, optim capability names and task names) was made from this survey of the reference's 299
recipes; tests/oracle/test_reference_recipes.py uses `field_paths` to check that every field of every file is
either used or reported as kept.
"""
import collections
import json
import os
import sys


def kind(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def field_paths(doc, prefix=""):
    """(path, value) for every member of every object in doc; array elements are path[]."""
    out = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            p = f"{prefix}.{k}" if prefix else k
            out.append((p, v))
            out.extend(field_paths(v, p))
    elif isinstance(doc, list):
        for e in doc:
            out.extend(field_paths(e, prefix + "[]"))
    return out


def recipe_files(root):
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".json"))


def survey(root):
    kinds = collections.defaultdict(collections.Counter)
    values = collections.defaultdict(collections.Counter)
    files = recipe_files(root)
    for f in files:
        with open(f) as fh:
            for p, v in field_paths(json.load(fh)):
                kinds[p][kind(v)] += 1
                if not isinstance(v, (dict, list)):
                    values[p][json.dumps(v)] += 1
    return files, kinds, values


def main(root):
    files, kinds, values = survey(root)
    print(f"{len(files)} files")
    for p in sorted(kinds):
        vs = values.get(p, collections.Counter())
        shown = ", ".join(f"{v} x{n}" for v, n in vs.most_common(6)) + (" ..." if len(vs) > 6 else "")
        print(f"{p:55s} {dict(kinds[p])}  {shown}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared",
                                                            "reference-recipes"))
